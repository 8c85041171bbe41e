"""The run inspector, for staff (docs/architecture.md, "inspector/"): the pages (views.py), their
reads (reads.py, trace.py), the SVG charts drawn on the server (charts.py) and tokens turned
into money (pricing.py)."""
