"""The AgentStreamEvent family: JSON exactly as docs/protocol.md, "Events"."""

from __future__ import annotations

import dataclasses
import json

import pytest

from chat.agent import (
    CompleteEvent,
    ErrorEvent,
    ReferenceEvent,
    TextEvent,
    ThinkingEvent,
    ToolEndEvent,
    ToolStartEvent,
    UserMessageEvent,
    event_from_dict,
)
from chat.agent.events import Reference

EVENTS_AND_JSON = [
    (UserMessageEvent("hi"), {"type": "user_message", "content": "hi"}),
    (ThinkingEvent("hmm"), {"type": "thinking", "content": "hmm"}),
    (TextEvent("42"), {"type": "text", "content": "42"}),
    (
        ToolStartEvent("calculator", "call_1", '{"expression": "6*7"}'),
        {"type": "tool_start", "toolName": "calculator", "toolCallId": "call_1", "arguments": '{"expression": "6*7"}'},
    ),
    (
        ToolEndEvent("calculator", "call_1", "42", False, 3),
        {
            "type": "tool_end",
            "toolName": "calculator",
            "toolCallId": "call_1",
            "result": "42",
            "isError": False,
            "durationMs": 3,
        },
    ),
    (
        ErrorEvent("LLM_CALL_FAILED", "The model call failed (1/3)", "HTTP 500: boom"),
        {
            "type": "error",
            "code": "LLM_CALL_FAILED",
            "message": "The model call failed (1/3)",
            "detail": "HTTP 500: boom",
        },
    ),
    (CompleteEvent("succeeded"), {"type": "complete", "status": "succeeded"}),
    (
        ReferenceEvent((Reference("Django", "https://djangoproject.com", "The web framework"), Reference("T", "u"))),
        {
            "type": "reference",
            "references": [
                {"title": "Django", "url": "https://djangoproject.com", "snippet": "The web framework"},
                {"title": "T", "url": "u", "snippet": ""},
            ],
        },
    ),
]


@pytest.mark.parametrize(("event", "expected"), EVENTS_AND_JSON, ids=lambda v: getattr(v, "type", ""))
def test_to_dict_is_the_protocol_json(event, expected):
    assert event.to_dict() == expected
    # key order is part of what clients see in logs; and it must survive json
    assert list(event.to_dict()) == list(expected)
    assert json.loads(json.dumps(event.to_dict())) == expected


@pytest.mark.parametrize(("event", "expected"), EVENTS_AND_JSON, ids=lambda v: getattr(v, "type", ""))
def test_event_from_dict_round_trip(event, expected):
    assert event_from_dict(expected) == event
    assert event_from_dict(json.loads(json.dumps(event.to_dict()))).to_dict() == expected


def test_event_from_dict_ignores_seq_and_run_id():
    stored = {"type": "text", "content": "x", "seq": 7, "runId": "0b5e..."}
    assert event_from_dict(stored) == TextEvent("x")


def test_error_detail_defaults_to_empty():
    assert ErrorEvent("CANCELLED", "stopped").to_dict()["detail"] == ""
    assert event_from_dict({"type": "error", "code": "CANCELLED", "message": "stopped"}) == ErrorEvent(
        "CANCELLED", "stopped", ""
    )


def test_unknown_type_is_refused():
    with pytest.raises(ValueError, match="unknown event type"):
        event_from_dict({"type": "telepathy"})


@pytest.mark.parametrize(("event", "expected"), EVENTS_AND_JSON, ids=lambda v: getattr(v, "type", ""))
def test_events_are_immutable(event, expected):
    field = dataclasses.fields(event)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(event, field, "changed")
    with pytest.raises((AttributeError, TypeError)):
        event.extra = 1  # slots: no new attributes either
    assert event.to_dict() == expected


def test_events_are_hashable_and_compare_by_value():
    assert TextEvent("a") == TextEvent("a") != ThinkingEvent("a")
    assert len({TextEvent("a"), TextEvent("a"), CompleteEvent("failed")}) == 2
