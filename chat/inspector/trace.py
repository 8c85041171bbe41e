"""One run's trace for the inspector and `GET /api/runs/<id>/trace/` (docs/protocol.md section
8): the run, its model calls and tool calls with their times, tokens and cost."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings

from chat.conversations.selectors import usage_json
from chat.eventlog.frames import frame_time
from chat.eventlog.reads import frames_of
from chat.models import Event, ModelCall, Run, ToolRecord
from chat.pricing import cost


def _ms(start: datetime | None, end: datetime | None) -> int | None:
    return None if start is None or end is None else int((end - start).total_seconds() * 1000)


def _time(moment: datetime | None) -> str | None:
    return None if moment is None else frame_time(moment)


def run_trace(*, run_id) -> dict[str, Any] | None:
    """Everything the run inspector shows of one run (docs/protocol.md, "Run trace"), or None when there
    is no such run. Staff only: the caller checks (this reads any user's run)."""
    run = Run.objects.filter(pk=run_id).select_related("user", "feedback", "conversation").first()
    if run is None:
        return None
    feedback = getattr(run, "feedback", None)  # absent: Django raises an AttributeError subclass
    model_calls = [
        {
            "purpose": call.purpose,
            "iteration": call.iteration,
            "attempt": call.attempt,
            "startedAt": frame_time(call.started_at),
            "firstTokenMs": call.first_token_ms,
            "durationMs": call.duration_ms,
            "promptTokens": call.prompt_tokens,
            "completionTokens": call.completion_tokens,
            "finishReason": call.finish_reason or None,
            "error": call.error or None,
            "estimated": call.usage_estimated,
            "messageCount": call.message_count,
            **({"requestMessages": call.request_messages} if call.request_messages is not None else {}),
        }
        for call in ModelCall.objects.filter(run=run).order_by("started_at", "id")
    ]
    tool_calls = [
        {
            "toolCallId": record.tool_call_id,
            "toolName": record.tool_name,
            "arguments": record.arguments,
            "result": record.result,
            "isError": record.is_error,
            "outcome": record.outcome,
            "startedAt": frame_time(record.started_at),
            "durationMs": record.duration_ms,
        }
        for record in ToolRecord.objects.filter(run=run).order_by("started_at", "id")
    ]
    events = frames_of(Event.objects.filter(run=run).order_by("seq"))
    return {
        "run": {
            "id": str(run.pk),
            "conversationId": str(run.conversation_id),
            "user": run.user.get_username(),
            "status": run.status,
            "imported": run.imported,
            "source": run.conversation.source,
            "scheduleId": str(run.schedule_id) if run.schedule_id else None,
            "triggerId": str(run.trigger_id) if run.trigger_id else None,
            "model": run.model,
            "startedAt": frame_time(run.started_at),
            "finishedAt": _time(run.finished_at),
            "durationMs": _ms(run.started_at, run.finished_at),
            "usage": usage_json(run.prompt_tokens, run.completion_tokens, run.total_tokens),
            "iterations": run.iterations,
            "error": run.error or None,
            "cost": cost(
                settings.AGENT_MODEL_PRICES,
                model=run.model,
                prompt_tokens=run.prompt_tokens,
                completion_tokens=run.completion_tokens,
            ),
            "parentRunId": None if run.parent_id is None else str(run.parent_id),
            "parentToolCallId": run.parent_tool_call_id or None,
            "depth": run.depth,
            "feedback": None
            if feedback is None
            else {"rating": feedback.rating, "comment": feedback.comment, "updatedAt": frame_time(feedback.updated_at)},
        },
        "modelCalls": model_calls,
        "toolCalls": tool_calls,
        "events": events,
        "children": children_of(run),
    }


def children_of(run: Run) -> list[dict[str, Any]]:
    """The child runs a run's delegate calls started (docs/protocol.md, "Sub-agents"), in start
    order; `usage`: each one's complete's (its own and its children's), its row's while it runs."""
    children = list(Run.objects.filter(parent=run).select_related("agent").order_by("started_at", "id"))
    completes = dict(Event.objects.filter(run__in=children, type="complete").values_list("run_id", "payload__usage"))
    return [
        {
            "id": str(child.pk),
            "agent": child.agent.slug if child.agent is not None else None,
            "status": child.status,
            "parentToolCallId": child.parent_tool_call_id,
            "startedAt": frame_time(child.started_at),
            "durationMs": _ms(child.started_at, child.finished_at),
            "usage": completes.get(child.pk)
            or usage_json(child.prompt_tokens, child.completion_tokens, child.total_tokens),
        }
        for child in children
    ]
