import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0002_run_resumes"),
    ]

    operations = [
        migrations.CreateModel(
            name="MetricTally",
            fields=[
                ("series", models.CharField(max_length=500, primary_key=True, serialize=False)),
                ("value", models.FloatField(default=0)),
            ],
        ),
        migrations.CreateModel(
            name="ProcessGauge",
            fields=[
                ("process", models.CharField(max_length=200, primary_key=True, serialize=False)),
                ("websocket_connections", models.PositiveIntegerField(default=0)),
                ("updated_at", models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
            ],
        ),
        migrations.AddIndex(
            model_name="toolrecord",
            index=models.Index(fields=["tool_name", "is_error"], name="toolrecord_tool_outcome"),
        ),
    ]
