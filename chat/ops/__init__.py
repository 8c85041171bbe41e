"""Operating the server: Prometheus metrics (metrics.py) and OpenTelemetry traces of runs
(tracing.py). See docs/deployment.md, "Metrics" and "Traces"."""
