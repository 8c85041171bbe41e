"""Reading and checking AG-UI streams in the e2e tests: every event validated by ag-ui-protocol's
own models (ag_ui.core), and its order checked as AG-UI's event verifier checks it."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
from ag_ui.core import Event
from pydantic import TypeAdapter

EVENT = TypeAdapter(Event)
ENDS = ("RUN_FINISHED", "RUN_ERROR")


def run_input(message: str | None, *, thread: str | None = None, **more: Any) -> dict[str, Any]:
    """A RunAgentInput as @ag-ui/client's HttpAgent posts it."""
    messages = [{"id": f"m-{uuid.uuid4().hex[:8]}", "role": "user", "content": message}] if message else []
    return {
        "threadId": thread or f"thread-{uuid.uuid4().hex[:8]}",
        "runId": f"run-{uuid.uuid4().hex[:8]}",
        "messages": messages,
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
        **more,
    }


def post_stream(base: str, path: str, body: dict, headers: dict, *, stop_after: int | None = None):
    """(response headers, status, the events read); `stop_after`: leave after that many events."""
    events: list[dict] = []
    with httpx.stream("POST", f"{base}{path}", json=body, headers=headers, timeout=60) as answer:
        if answer.status_code != 200:
            answer.read()
            return answer.headers, answer.status_code, answer.json()
        assert answer.headers["content-type"].startswith("text/event-stream")
        for line in answer.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
                if stop_after is not None and len(events) >= stop_after:
                    break
    return answer.headers, 200, events


def validated(events: list[dict]) -> list[Any]:
    """Each event as ag-ui-protocol's model of its type, which writes it back exactly as it came
    (its optional fields left out rather than null, as the model serializes them)."""
    models = []
    for event in events:
        model = EVENT.validate_python(event)
        assert model.model_dump(by_alias=True, mode="json") == event, event
        models.append(model)
    return models


def check_order(events: list[dict], *, reopened: tuple[str, ...] = (), announced: tuple[str, ...] = ()) -> None:
    """AG-UI's lifecycle rules: RUN_STARTED first, RUN_FINISHED or RUN_ERROR last and alone at the
    end; a message's content between its start and its end; a tool call's args between its start
    and its end; a result only for a call announced; nothing left open at RUN_FINISHED.
    `announced`: calls a previous AG-UI run of the thread announced."""
    assert events and events[0]["type"] == "RUN_STARTED", events[:1]
    assert events[-1]["type"] in ENDS, events[-1:]
    assert not any(e["type"] in ENDS for e in events[:-1])
    texts: set[str] = set(reopened)
    reasoning: set[str] = set()
    calls: set[str] = set()
    known_calls: set[str] = set(announced)
    for event in events[1:-1]:
        kind = event["type"]
        if kind == "TEXT_MESSAGE_START":
            assert event["messageId"] not in texts
            texts.add(event["messageId"])
        elif kind == "TEXT_MESSAGE_CONTENT":
            assert event["messageId"] in texts
        elif kind == "TEXT_MESSAGE_END":
            texts.remove(event["messageId"])
        elif kind in ("REASONING_START", "REASONING_MESSAGE_START"):
            reasoning.add(f"{kind}:{event['messageId']}")
        elif kind == "REASONING_MESSAGE_CONTENT":
            assert f"REASONING_MESSAGE_START:{event['messageId']}" in reasoning
        elif kind == "REASONING_MESSAGE_END":
            reasoning.remove(f"REASONING_MESSAGE_START:{event['messageId']}")
        elif kind == "REASONING_END":
            reasoning.remove(f"REASONING_START:{event['messageId']}")
        elif kind == "TOOL_CALL_START":
            calls.add(event["toolCallId"])
            known_calls.add(event["toolCallId"])
            if "parentMessageId" in event:
                assert event["parentMessageId"].startswith("msg_")
        elif kind in ("TOOL_CALL_ARGS", "TOOL_CALL_END"):
            assert event["toolCallId"] in calls
            if kind == "TOOL_CALL_END":
                calls.remove(event["toolCallId"])
        elif kind == "TOOL_CALL_RESULT":
            assert event["toolCallId"] in known_calls and event["toolCallId"] not in calls
    if events[-1]["type"] == "RUN_FINISHED":
        assert not texts and not reasoning and not calls, (texts, reasoning, calls)


def of_type(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["type"] == kind]


def text_of(events: list[dict]) -> str:
    return "".join(e["delta"] for e in of_type(events, "TEXT_MESSAGE_CONTENT"))
