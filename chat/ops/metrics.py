"""/metrics (docs/protocol.md, "Health and metrics"): Prometheus series derived from the database at scrape time.

Why from the database: runs move between processes (a dead process's run is resumed
by another), processes may live on several machines, and /metrics may be answered by
any of them. prometheus-client's own multiprocess mode sums files in a directory shared
by the processes of one machine only, so instead every counter and histogram here is an
aggregate query over the rows that are the truth anyway (Run, ToolRecord, ModelCall):
any process answers the same numbers, and a restart loses nothing. Each
series is one GROUP BY or one conditional-count aggregate (indexes on Run.status and
ToolRecord(tool_name, outcome)), so a scrape costs a handful of queries, never a row
loop in Python. Rows do get deleted (a conversation, a user): what they had counted is
first folded into MetricTally rows and added back at scrape time, so that no counter
ever goes down.

What users send never becomes what operators measure: imported runs (Run.imported) are
history, not activity, and count nowhere; a tool label is a name the server knows (a built-in
tool, or a tool of a server in AGENT_MCP_CONFIG), every other name a model or a file gave is
counted under the one label `other`.

The live gauges: active runs are the `running` rows. Open WebSockets exist only in a
process's memory, so each process publishes its count to its ProcessGauge row on its
heartbeat; the scrape sums the rows fresher than AGENT_HEARTBEAT_TIMEOUT (a dead
process drops out) and uses its own count live.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import socket
import uuid
from collections.abc import Iterable, Iterator
from datetime import timedelta

from channels.db import database_sync_to_async
from django.conf import settings
from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, QuerySet, Sum
from django.db.models.signals import pre_delete
from django.utils import timezone
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.samples import Sample

from chat import mcp
from chat.accounts.sockets import open_socket_count
from chat.agent.trace import CANCELLED
from chat.mcp.tools import tool_name as mcp_tool_name
from chat.models import Conversation, MetricTally, ModelCall, ProcessGauge, Run, ToolRecord
from chat.tools import BUILTIN_TOOLS

logger = logging.getLogger(__name__)

RUN_DURATION_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
FIRST_TOKEN_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)

# This process's ProcessGauge row: host and pid for the operator, a random part because pids repeat.
PROCESS_ID = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


# -- access ------------------------------------------------------------------------------
def may_scrape(request) -> bool:
    """A staff session, or `Authorization: Bearer <METRICS_TOKEN>` (compared in constant time)."""
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated and user.is_active and user.is_staff:
        return True
    token = settings.METRICS_TOKEN
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return bool(token) and scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


# -- the series --------------------------------------------------------------------------
def run_families(runs: QuerySet[Run]) -> Iterator[Metric]:
    """Runs by outcome, their durations and tokens. Running runs are left to the gauge: a
    counter by status must only grow, and a run's tokens are stored with its outcome."""
    finished = runs.exclude(status=Run.Status.RUNNING)
    by_status = CounterMetricFamily("agentsite_runs", "Runs that ended, by final status.", labels=["status"])
    for row in finished.values("status").annotate(n=Count("pk")).order_by("status"):
        by_status.add_metric([row["status"]], row["n"])
    yield by_status

    duration = ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())
    timed = finished.filter(finished_at__isnull=False).annotate(duration=duration)
    yield _histogram(
        "agentsite_run_duration_seconds",
        "Wall time of runs that ended, from start to outcome.",
        timed,
        "duration",
        RUN_DURATION_BUCKETS,
        to_bound=lambda seconds: timedelta(seconds=seconds),
        to_seconds=lambda total: total.total_seconds() if total else 0.0,
    )

    sums = runs.aggregate(prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"))
    tokens = CounterMetricFamily("agentsite_tokens", "Model tokens used by runs, by kind.", labels=["kind"])
    tokens.add_metric(["prompt"], sums["prompt"] or 0)
    tokens.add_metric(["completion"], sums["completion"] or 0)
    yield tokens

    active = GaugeMetricFamily("agentsite_active_runs", "Runs running now, in every process.")
    active.add_metric([], runs.filter(status=Run.Status.RUNNING).count())
    yield active


OTHER_TOOL = "other"


def tool_label(name: str, *, offered: bool = True) -> str:
    """The `tool` label of a tool name: itself when the server knows it, else OTHER_TOOL. A
    name under an MCP server's prefix is known when its run offered it (ToolRecord.offered):
    a name the model invented there is no label."""
    if name in BUILTIN_TOOLS:
        return name
    if offered and settings.AGENT_MCP_CONFIG:
        # An MCP tool is named `<server>__<tool>` (chat.mcp.tools): a server of the file, read
        # here without starting it, vouches for the prefix.
        for server in mcp.configured(settings.AGENT_MCP_CONFIG):
            if name.startswith(mcp_tool_name(server.name, "", set())):
                return name
    return OTHER_TOOL


def tool_families(records: QuerySet[ToolRecord]) -> Iterator[Metric]:
    calls = CounterMetricFamily(
        "agentsite_tool_calls", "Tool calls that ended, by tool and outcome.", labels=["tool", "outcome"]
    )
    # outcome: ok, error, or denied / expired for a call not approved (never counted as an error).
    counts: dict[tuple[str, str], int] = {}
    rows = records.values("tool_name", "outcome", "offered").annotate(n=Count("pk"))
    for row in rows.order_by("tool_name", "outcome", "offered"):
        key = (tool_label(row["tool_name"], offered=row["offered"]), row["outcome"])
        counts[key] = counts.get(key, 0) + row["n"]
    for labels, n in sorted(counts.items()):
        calls.add_metric(list(labels), n)
    yield calls


def model_call_families(calls: QuerySet) -> Iterator[Metric]:
    """Model call attempts (failed ones included) and their time to first token, from a
    queryset of the ModelCall shape (first_token_ms: null when no token came; error: "" when ok)."""
    outcomes = calls.aggregate(
        n=Count("pk"),
        failed=Count("pk", filter=~Q(error="") & ~Q(error=CANCELLED)),
        cancelled=Count("pk", filter=Q(error=CANCELLED)),
    )
    counter = CounterMetricFamily(
        "agentsite_model_calls", "Model call attempts, retries included, by outcome.", labels=["outcome"]
    )
    counter.add_metric(["ok"], outcomes["n"] - outcomes["failed"] - outcomes["cancelled"])
    counter.add_metric(["error"], outcomes["failed"])
    # Cut by a Stop: the user's doing, not the model's failure.
    counter.add_metric(["cancelled"], outcomes["cancelled"])
    yield counter
    yield _histogram(
        "agentsite_model_first_token_seconds",
        "Time from a model request to its first streamed token.",
        calls.filter(first_token_ms__isnull=False),
        "first_token_ms",
        FIRST_TOKEN_BUCKETS,
        to_bound=lambda seconds: seconds * 1000,
        to_seconds=lambda total: (total or 0) / 1000,
    )


def _histogram(name, documentation, rows: QuerySet, field: str, buckets, *, to_bound, to_seconds) -> Metric:
    """One aggregate query: a filtered count per bucket, the count and the sum."""
    counts = {f"le{i}": Count("pk", filter=Q(**{f"{field}__lte": to_bound(b)})) for i, b in enumerate(buckets)}
    result = rows.aggregate(**counts, count=Count("pk"), total=Sum(field))
    family = HistogramMetricFamily(name, documentation)
    family.add_metric(
        [],
        [(_bound(b), result[f"le{i}"]) for i, b in enumerate(buckets)] + [("+Inf", result["count"])],
        sum_value=to_seconds(result["total"]),
    )
    return family


def _bound(value: float) -> str:
    return repr(float(value))


def websocket_family() -> Metric:
    fresh_after = timezone.now() - timedelta(seconds=settings.AGENT_HEARTBEAT_TIMEOUT)
    others = (
        ProcessGauge.objects.filter(updated_at__gte=fresh_after)
        .exclude(process=PROCESS_ID)
        .aggregate(n=Sum("websocket_connections"))["n"]
    )
    gauge = GaugeMetricFamily("agentsite_websocket_connections", "Open chat WebSockets, in every process.")
    gauge.add_metric([], (others or 0) + local_websockets())
    return gauge


def local_websockets() -> int:
    return open_socket_count()


def _families(runs: QuerySet[Run], records: QuerySet[ToolRecord], calls: QuerySet[ModelCall]) -> Iterator[Metric]:
    """The growing series of these rows, imported runs left out (history, not activity)."""
    yield from run_families(runs.filter(imported=False))
    yield from tool_families(records.filter(run__imported=False))
    yield from model_call_families(calls.filter(run__imported=False))


# Budget events no row keeps (a refused start stores nothing): counted in MetricTally as they happen.
BUDGET_FAMILIES = {
    "refusals": "Run starts refused by a budget (QUOTA_EXCEEDED), by the refusing budget's scope.",
    "stops": "Runs ended BUDGET_EXHAUSTED before a model call, by the budget's scope.",
}


def compaction_counted(*, trigger: str, outcome: str) -> None:
    """agentsite_compactions_total{trigger, outcome} + 1 (auto or manual; ok or failed): counted as
    a run of this server stores it, never for an imported one."""
    key = series_key("agentsite_compactions_total", {"trigger": trigger, "outcome": outcome})
    MetricTally.objects.get_or_create(series=key)
    MetricTally.objects.filter(series=key).update(value=F("value") + 1)


def budget_counted(*, kind: str, scope: str) -> None:
    """agentsite_budget_<kind>_total{scope} + 1 (scope: user, group, default, agent, token)."""
    key = series_key(f"agentsite_budget_{kind}_total", {"scope": scope})
    MetricTally.objects.get_or_create(series=key)
    MetricTally.objects.filter(series=key).update(value=F("value") + 1)


class DatabaseCollector:
    """prometheus-client asks it for the families on every scrape."""

    def collect(self) -> Iterable[Metric]:
        tallies = {key: value for key, value in MetricTally.objects.values_list("series", "value")}
        for family in _families(Run.objects.all(), ToolRecord.objects.all(), ModelCall.objects.all()):
            yield _with_tallies(family, tallies)
        for kind, documentation in BUDGET_FAMILIES.items():
            yield _with_tallies(
                CounterMetricFamily(f"agentsite_budget_{kind}", documentation, labels=["scope"]), tallies
            )
        yield _with_tallies(
            CounterMetricFamily(
                "agentsite_compactions",
                "Compactions of older turns, by trigger and outcome.",
                labels=["trigger", "outcome"],
            ),
            tallies,
        )
        yield websocket_family()


# -- deleted rows ------------------------------------------------------------------------------
_GROWING = ("counter", "histogram")


def series_key(name: str, labels: dict[str, str]) -> str:
    return name + json.dumps(labels, sort_keys=True, separators=(",", ":"))


def _folded(labels: dict[str, str]) -> dict[str, str]:
    """A tally's labels as the scrape labels them now (a tally written before tool labels were
    folded, or for an MCP server since removed from the file, names a tool now `other`)."""
    return {**labels, "tool": tool_label(labels["tool"])} if "tool" in labels else labels


def _with_tallies(family: Metric, tallies: dict[str, float]) -> Metric:
    if family.type not in _GROWING or not tallies:
        return family
    samples = {series_key(sample.name, sample.labels): sample for sample in family.samples}
    for key, value in tallies.items():
        name, _, text = key.partition("{")
        labels = _folded(json.loads("{" + text))
        folded = series_key(name, labels)
        if folded in samples:
            samples[folded] = samples[folded]._replace(value=samples[folded].value + value)
        elif name == f"{family.name}_total":
            # Counter series only deleted rows had (a tool no longer called): histograms always
            # have every bucket, so only `<name>_total` can be missing.
            samples[folded] = Sample(name, labels, value)
    family.samples = list(samples.values())
    return family


def retire(*, runs: QuerySet[Run], records: QuerySet[ToolRecord], calls: QuerySet[ModelCall]) -> None:
    """Fold what these rows count into MetricTally before they are deleted."""
    for family in _families(runs, records, calls):
        if family.type not in _GROWING:
            continue
        for sample in family.samples:
            if sample.value:
                key = series_key(sample.name, sample.labels)
                MetricTally.objects.get_or_create(series=key)
                # An UPDATE that adds: concurrent deletions in other processes add up.
                MetricTally.objects.filter(series=key).update(value=F("value") + sample.value)


def connect_signals() -> None:
    """Connected by chat.apps after chat.realtime.deletion's receiver, whatever imported this module
    first: what the tallies keep of a deleted conversation's running run is the `cancelled` that
    one stores (a receiver connected at import ran first once a runtime module imported this one)."""
    pre_delete.connect(_retire_conversation, sender=Conversation, dispatch_uid="chat.ops.metrics.retire_before_delete")


def _retire_conversation(sender, instance: Conversation, **kwargs) -> None:
    # A receiver, not a step in the delete service: a user's deletion cascades to their
    # conversations without the service, and Django sends pre_delete for those too.
    retire(
        runs=Run.objects.filter(conversation_id=instance.pk),
        records=ToolRecord.objects.filter(run__conversation_id=instance.pk),
        calls=ModelCall.objects.filter(run__conversation_id=instance.pk),
    )


_registry = CollectorRegistry(auto_describe=False)
_registry.register(DatabaseCollector())


def exposition() -> bytes:
    return generate_latest(_registry)


# -- this process's gauges ------------------------------------------------------------------
def publish_process_gauges() -> None:
    now = timezone.now()
    ProcessGauge.objects.update_or_create(
        process=PROCESS_ID, defaults={"websocket_connections": local_websockets(), "updated_at": now}
    )
    # Rows of processes long gone: kept a while for nothing, then dropped by whoever passes.
    ProcessGauge.objects.filter(updated_at__lt=now - timedelta(seconds=10 * settings.AGENT_HEARTBEAT_TIMEOUT)).delete()


async def publish_process_gauges_forever() -> None:
    while True:
        try:
            await database_sync_to_async(publish_process_gauges)()
        except Exception:
            logger.warning("could not publish this process's gauges", exc_info=True)
        await asyncio.sleep(settings.AGENT_HEARTBEAT_SECONDS)
