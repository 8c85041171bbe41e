"""The run tree of the inspector's run page (docs/protocol.md, "Sub-agents"): a run's child runs,
each under the delegate call that started it with its own model calls, tool calls, usage and
waterfall, and their bars in the parent's waterfall (the times are absolute, so a child's bars
fall inside its call's). Read from each run's trace (chat.inspector.trace), as the page of the
run itself is."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from chat.agent.approval import ERROR, OK
from chat.agent.trace import CANCELLED
from chat.inspector.charts import Span, waterfall
from chat.inspector.trace import run_trace


def offset_ms(moment: str, start: datetime) -> float:
    return (datetime.fromisoformat(moment) - start).total_seconds() * 1000


def call_spans(trace: dict[str, Any], start: datetime, *, prefix: str = "", anchor: str = "") -> list[Span]:
    """The bars of a run's model and tool calls and approval waits, from `start`; each call gets
    its `name` (1.2, or title) and, unless `anchor` sends every bar to one place (a child's, to
    its delegate call), its `anchor` on the page."""
    spans = []
    for n, call in enumerate(trace["modelCalls"], 1):
        call["anchor"] = anchor or f"model-call-{n}"
        call["retry"] = call["attempt"] > 1
        # The conversation's title, asked after the run (chat.runtime.titles): no round of its loop.
        call["name"] = "title" if call["purpose"] == "title" else f"{call['iteration']}.{call['attempt']}"
        if call["purpose"] == "compaction":  # the summary before that round's call (docs/protocol.md, "Compaction")
            call["name"] += " compaction"
        ttft = f", first token {call['firstTokenMs']} ms" if call["firstTokenMs"] is not None else ""
        title = f"{prefix}model call {call['name']}: {call['durationMs']} ms{ttft}"
        call["cancelled"] = call["error"] == CANCELLED
        if call["finishReason"] == "length":
            title += ", cut off by the token limit"
        spans.append(
            Span(
                label=f"{prefix}model {call['name']}",
                start_ms=offset_ms(call["startedAt"], start),
                duration_ms=call["durationMs"],
                kind="model-cancelled" if call["cancelled"] else "model-error" if call["error"] else "model",
                anchor=call["anchor"],
                title=title + (f" — {call['error']}" if call["error"] else ""),
            )
        )
    for n, tool in enumerate(trace["toolCalls"], 1):
        tool["anchor"] = anchor or f"tool-call-{n}"
        outcome = tool["outcome"]
        spans.append(
            Span(
                label=f"{prefix}{tool['toolName']}",
                start_ms=offset_ms(tool["startedAt"], start),
                duration_ms=tool["durationMs"],
                # Not approved (denied, expired): grey as on the timeline, never a failure's red.
                kind={OK: "tool", ERROR: "tool-error"}.get(outcome, "tool-denied"),
                anchor=tool["anchor"],
                title=f"{prefix}{tool['toolName']}: {tool['durationMs']} ms"
                + ("" if outcome == OK else f" ({outcome})"),
            )
        )
    anchors = {tool["toolCallId"]: tool["anchor"] for tool in trace["toolCalls"]}
    return spans + approval_waits(trace["events"], start, anchors, prefix=prefix)


def approval_waits(events: list[dict], start: datetime, anchors: dict[str, str], *, prefix: str = "") -> list[Span]:
    """A bar per approval request, from its asking to its answer (or, unanswered, to now),
    linking to its call's details."""
    asked: dict[str, dict] = {}
    spans = []
    for event in events:
        if event["type"] == "approval_request":
            asked[event["toolCallId"]] = event
        elif event["type"] == "approval_result" and event["toolCallId"] in asked:
            request = asked.pop(event["toolCallId"])
            spans.append(_wait_span(request, event["ts"], event["decision"], start, anchors, prefix))
    now = timezone.now().isoformat()
    spans += [_wait_span(request, now, "waiting", start, anchors, prefix) for request in asked.values()]
    return spans


def _wait_span(request: dict, until: str, decision: str, start: datetime, anchors: dict[str, str], prefix: str) -> Span:
    begin = offset_ms(request["ts"], start)
    duration = max(0.0, offset_ms(until, start) - begin)
    return Span(
        label=f"{prefix}approval: {request['toolName']}",
        start_ms=begin,
        duration_ms=duration,
        kind="approval",
        anchor=anchors.get(request["toolCallId"], ""),
        title=f"waiting for approval of {request['toolName']}: {duration / 1000:.1f} s, {decision}",
    )


def attach_children(trace: dict[str, Any], start: datetime, *, prefix: str = "") -> tuple[list[Span], list[dict]]:
    """Hang each child run's tree on the delegate call that started it (`tool["child"]`: the
    child's summary, its trace as `tree`, its own waterfall), depth first; answer the bars of
    every descendant for the parent's waterfall and every descendant's events."""
    by_call = {child["parentToolCallId"]: child for child in trace["children"]}
    spans: list[Span] = []
    events: list[dict] = []
    for tool in trace["toolCalls"]:
        child = tool["child"] = by_call.get(tool["toolCallId"])
        if child is None:
            continue
        tree = run_trace(run_id=child["id"])
        if tree is None:  # deleted meanwhile
            continue
        label = f"{prefix}{child['agent'] or 'agent'} › "
        # Every bar of a child leads to its delegate call here: its own page's anchors are not on this one.
        own = call_spans(tree, start, prefix=label, anchor=tool["anchor"])
        deeper, deeper_events = attach_children(tree, start, prefix=label)
        # Its own chart: the same bars, from its own start.
        shift = offset_ms(tree["run"]["startedAt"], start)
        bars = sorted(own + deeper, key=lambda span: span.start_ms)
        total = tree["run"]["durationMs"]
        child["tree"] = tree
        child["waterfall"] = waterfall(
            [Span(s.label, s.start_ms - shift, s.duration_ms, s.kind, s.anchor, s.title) for s in bars],
            total_ms=total if total is not None else offset_ms(timezone.now().isoformat(), start) - shift,
            label=f"model and tool calls of the child run {child['id'][:8]}",
        )
        spans += own + deeper
        events += tree["events"] + deeper_events
    return spans, events
