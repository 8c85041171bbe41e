"""What the metrics read across processes: tallies and gauges kept in the database."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class MetricTally(models.Model):
    """What deleted rows had added to a counter or histogram series of /metrics (chat.ops.metrics):
    the series are derived from Run and ToolRecord rows, and without this, deleting a
    conversation would make counters go down, which Prometheus reads as a reset."""

    series = models.CharField(max_length=500, primary_key=True)  # name and labels (chat.ops.metrics.series_key)
    value = models.FloatField(default=0)

    def __str__(self) -> str:
        return f"{self.series} += {self.value}"


class ProcessGauge(models.Model):
    """One server process's live gauges, published on its heartbeat (chat.ops.metrics): open
    WebSockets exist only in a process's memory, and /metrics may be scraped from any process
    (on any machine), so each process writes its own row and the scrape sums the fresh ones."""

    process = models.CharField(max_length=200, primary_key=True)
    websocket_connections = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now, db_index=True)

    def __str__(self) -> str:
        return f"{self.process}: {self.websocket_connections} sockets"
