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
    run = Run.objects.filter(pk=run_id).select_related("user", "feedback").first()
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
            "feedback": None
            if feedback is None
            else {"rating": feedback.rating, "comment": feedback.comment, "updatedAt": frame_time(feedback.updated_at)},
        },
        "modelCalls": model_calls,
        "toolCalls": tool_calls,
        "events": events,
    }
