"""Server-drawn SVG charts for the run inspector: the dashboard's bars and a run's waterfall.

Why SVG made here and no chart library: no dependency to vet and ship; it works under the
strict CSP (chat/doors/pages/csp.py: no inline script, no inline style; geometry is SVG attributes and the
colours come from classes in static/inspect/inspect.css); and everything shown (tool names,
usernames, errors: user and model data) goes through format_html, so it stays inert text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

WIDTH = 720
LABEL_WIDTH = 170
ROW = 22


def _n(value: float) -> str:
    """A coordinate: format_html escapes its arguments to strings first, so numbers are formatted here."""
    return f"{value:.1f}"


def _svg(height: int, label: str, body: SafeString, *, width: int = WIDTH, role: str = "img") -> SafeString:
    """role "img" for a picture; "group" for a chart whose bars are links (an image's parts cannot be)."""
    return format_html(
        '<svg class="chart" viewBox="0 0 {} {}" width="{}" height="{}" role="{}" aria-label="{}">{}</svg>',
        width,
        height,
        width,
        height,
        role,
        label,
        body,
    )


def stacked_columns(
    buckets: Sequence[tuple[str, dict[str, int]]],
    keys: Sequence[str],
    *,
    label: str,
    height: int = 180,
    width: int = 1200,
) -> SafeString:
    """A column per bucket, stacked by key (class `k-<key>`); each segment titled with its count."""
    top = max((sum(counts.values()) for _, counts in buckets), default=0) or 1
    plot_h, axis = height - 24, 30
    step = (width - axis) / max(len(buckets), 1)
    parts = [
        format_html('<text class="axis" x="0" y="12">{}</text>', top),
        format_html('<line class="axis-line" x1="{}" y1="{}" x2="{}" y2="{}"/>', axis, plot_h, width, plot_h),
    ]
    for i, (name, counts) in enumerate(buckets):
        x = axis + i * step
        y = float(plot_h)
        for key in keys:
            n = counts.get(key, 0)
            if not n:
                continue
            h = n / top * (plot_h - 4)
            y -= h
            parts.append(
                format_html(
                    '<rect class="k-{}" x="{}" y="{}" width="{}" height="{}"><title>{}: {} {}</title></rect>',
                    key,
                    _n(x + 1),
                    _n(y),
                    _n(max(step - 2, 1)),
                    _n(h),
                    name,
                    n,
                    key,
                )
            )
        # Label every few columns so the names never overlap.
        if i % max(1, len(buckets) // 8) == 0:
            parts.append(format_html('<text class="axis" x="{}" y="{}">{}</text>', _n(x), height - 6, name))
    return _svg(height, label, mark_safe("".join(parts)), width=width)  # noqa: S308 - parts came from format_html


def horizontal_bars(rows: Sequence[tuple[str, float, str]], *, label: str, kind: str = "bar") -> SafeString:
    """A bar per (name, value, shown value), longest first as given."""
    top = max((value for _, value, _ in rows), default=0) or 1
    height = max(len(rows), 1) * ROW + 4
    bars = format_html_join(
        "",
        '<text class="label" x="{}" y="{}" text-anchor="end">{}</text>'
        '<rect class="k-{}" x="{}" y="{}" width="{}" height="{}"><title>{}: {}</title></rect>'
        '<text class="value" x="{}" y="{}">{}</text>',
        (
            (
                LABEL_WIDTH - 6,
                i * ROW + 15,
                name[:28],
                kind,
                LABEL_WIDTH,
                i * ROW + 3,
                _n(max(value / top * (WIDTH - LABEL_WIDTH - 90), 1)),
                ROW - 6,
                name,
                shown,
                _n(LABEL_WIDTH + max(value / top * (WIDTH - LABEL_WIDTH - 90), 1) + 6),
                i * ROW + 15,
                shown,
            )
            for i, (name, value, shown) in enumerate(rows)
        ),
    )
    return _svg(height, label, bars)


@dataclass(frozen=True)
class Span:
    """One bar of a run's waterfall: offsets from the run's start, in milliseconds."""

    label: str
    start_ms: float
    duration_ms: float
    kind: str  # css class suffix: model, model-error, tool, tool-error
    anchor: str  # the id of its details on the page
    title: str


def waterfall(spans: Sequence[Span], *, total_ms: float, label: str) -> SafeString:
    """Bars on a time axis, one row per span, each linking to its details."""
    total = max(total_ms, max((s.start_ms + s.duration_ms for s in spans), default=0), 1)
    plot = WIDTH - LABEL_WIDTH - 10
    height = (len(spans) + 1) * ROW + 8
    ticks = []
    for i in range(5):
        at = total * i / 4
        x = LABEL_WIDTH + plot * i / 4
        ticks.append(
            format_html(
                '<line class="tick" x1="{}" y1="0" x2="{}" y2="{}"/>'
                '<text class="axis" x="{}" y="{}" text-anchor="middle">{} s</text>',
                _n(x),
                _n(x),
                height - ROW,
                _n(x),
                height - 6,
                f"{at / 1000:.2f}",
            )
        )
    bars = format_html_join(
        "",
        '<a href="#{}"><text class="label" x="{}" y="{}" text-anchor="end">{}</text>'
        '<rect class="k-{}" x="{}" y="{}" width="{}" height="{}"><title>{}</title></rect></a>',
        (
            (
                s.anchor,
                LABEL_WIDTH - 6,
                i * ROW + 15,
                s.label[:26],
                s.kind,
                _n(LABEL_WIDTH + s.start_ms / total * plot),
                i * ROW + 3,
                _n(max(s.duration_ms / total * plot, 2)),
                ROW - 6,
                s.title,
            )
            for i, s in enumerate(spans)
        ),
    )
    return _svg(height, label, mark_safe("".join(ticks) + bars), role="group")  # noqa: S308 - parts came from format_html
