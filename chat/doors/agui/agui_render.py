"""A run's stored events as AG-UI 1.0 events (docs/protocol.md, "AG-UI"): camelCase dicts, optional
fields left out, each with the `timestamp` of the stored event it comes from. Derived from the
stored events alone and in their order, so a run read live, replayed or resumed half-way is the
same stream. No I/O here: chat.doors.agui.agui_api reads the log and serves.

Ids (unique in a thread): text message `msg_<run hex>_<seq>`, reasoning message `rs_<run hex>_<seq>`,
tool call `call_<run hex>_<seq>` (its `tool_start`'s, or its `approval_request`'s: a call asked
about is announced then, and its later `tool_start` announces nothing again), tool message
`tool_<run hex>_<seq of tool_end>`."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

PROTOCOL_VERSION = "1.0"
# The answer an approval interrupt expects in its resume entry's payload.
APPROVAL_SCHEMA = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["approved"],
}
# Stored events that neither render nor end an open message.
PASSING = ("reference", "steer", "queued", "unqueued", "approval_result")


def millis(ts: Any) -> int | None:
    """A frame's `ts` (ISO 8601) as epoch milliseconds."""
    try:
        return int(datetime.fromisoformat(str(ts).replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def agui_run_id(user_message: Mapping[str, Any], run_id: Any) -> str:
    """The AG-UI runId of a run: the one its AG-UI request gave, else its own id."""
    return (user_message.get("request") or {}).get("runId") or str(run_id)


def usage_of(complete: Mapping[str, Any], model: str) -> list[dict[str, Any]]:
    u = complete.get("usage") or {}
    return [
        {
            "model": model,
            "inputTokens": u.get("promptTokens", 0),
            "outputTokens": u.get("completionTokens", 0),
            "totalTokens": u.get("totalTokens", 0),
        }
    ]


class AguiRender:
    """Follows one run's stored events (`add`, in seq order) and makes the AG-UI events of each."""

    def __init__(self, *, run_id: Any, thread_id: str, agui_run_id: str, model: str) -> None:
        self.run_id = str(run_id)
        self.hex = uuid.UUID(self.run_id).hex
        self.thread_id, self.agui_run_id, self.model = thread_id, agui_run_id, model
        self.open: tuple[str, str] | None = None  # ("text" | "thinking", message id) of the open message
        self.calls: dict[str, str] = {}  # the run's toolCallId -> the AG-UI id, of a call announced and not ended
        self.asked: dict[str, dict[str, Any]] = {}  # AG-UI id -> the interrupt of a request not answered
        self.turn_text: str | None = None  # the text message of the model turn going on
        self.after_tools = False  # a tool ended: the next text or thinking is a new model turn's
        self.errors: list[Mapping[str, Any]] = []
        self.finished = False  # RUN_FINISHED or RUN_ERROR made
        self.ts: int | None = None  # of the stored event being followed

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, **{k: v for k, v in fields.items() if v is not None}}
        if self.ts is not None:
            event["timestamp"] = self.ts
        return event

    def started(self, *, agui_run_id: str | None = None) -> dict[str, Any]:
        """RUN_STARTED, first; `agui_run_id`: the runId of a request that resumes the run."""
        if agui_run_id is not None:
            self.agui_run_id = agui_run_id
        event = {
            "type": "RUN_STARTED",
            "threadId": self.thread_id,
            "runId": self.agui_run_id,
            "protocolVersion": PROTOCOL_VERSION,
        }
        return event

    def add(self, frame: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The AG-UI events of one stored event of the conversation (none for another run's, nor
        for a frame that is no stored event: a stream's `sync`)."""
        if frame.get("runId") != self.run_id or "seq" not in frame or self.finished:
            return []
        self.ts = millis(frame.get("ts"))
        kind = frame.get("type")
        out: list[dict[str, Any]] = []
        if kind == "user_message":
            self.model = frame.get("model") or self.model
        elif kind in ("thinking", "text"):
            out += self._delta(kind, frame)
        elif kind in ("tool_start", "approval_request"):
            out += self._close()
            call_id = frame.get("toolCallId", "")
            if call_id not in self.calls:
                out += self._announce(frame)
            if kind == "approval_request":
                self._ask(frame)
        elif kind == "tool_end":
            out += self._close()
            out += self._result(frame)
        elif kind == "approval_result":
            self.asked.pop(self.calls.get(frame.get("toolCallId", ""), ""), None)
        elif kind == "error":
            out += self._error(frame)
        elif kind == "reference":
            out.append(self._event("CUSTOM", name="agentsite.reference", value={"references": frame["references"]}))
        elif kind == "complete":
            out += self._close()
            out += self._complete(frame)
        elif kind not in PASSING:
            out += self._close()
        return out

    def _delta(self, kind: str, frame: Mapping[str, Any]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if self.after_tools:
            self.turn_text, self.after_tools = None, False
        if self.open is not None and self.open[0] != kind:
            out += self._close()
        if self.open is None:
            prefix = "rs" if kind == "thinking" else "msg"
            self.open = (kind, f"{prefix}_{self.hex}_{frame.get('seq')}")
            if kind == "text":
                self.turn_text = self.open[1]
            out += self.reopen()
        message_id = self.open[1]
        delta = frame.get("content") or ""
        content = "REASONING_MESSAGE_CONTENT" if kind == "thinking" else "TEXT_MESSAGE_CONTENT"
        out.append(self._event(content, messageId=message_id, delta=delta))
        return out

    def reopen(self) -> list[dict[str, Any]]:
        """The start of the open message (a reconnect repeats it after the snapshot: same id)."""
        if self.open is None:
            return []
        kind, message_id = self.open
        if kind == "thinking":
            return [
                self._event("REASONING_START", messageId=message_id),
                self._event("REASONING_MESSAGE_START", messageId=message_id, role="reasoning"),
            ]
        return [self._event("TEXT_MESSAGE_START", messageId=message_id, role="assistant")]

    def _close(self) -> list[dict[str, Any]]:
        if self.open is None:
            return []
        (kind, message_id), self.open = self.open, None
        if kind == "thinking":
            return [
                self._event("REASONING_MESSAGE_END", messageId=message_id),
                self._event("REASONING_END", messageId=message_id),
            ]
        return [self._event("TEXT_MESSAGE_END", messageId=message_id)]

    def _announce(self, frame: Mapping[str, Any]) -> list[dict[str, Any]]:
        call = f"call_{self.hex}_{frame.get('seq')}"
        self.calls[frame.get("toolCallId", "")] = call
        arguments = frame.get("arguments") or ""
        out = [
            self._event(
                "TOOL_CALL_START",
                toolCallId=call,
                toolCallName=frame.get("toolName", ""),
                parentMessageId=None if self.after_tools else self.turn_text,
            )
        ]
        if arguments:
            out.append(self._event("TOOL_CALL_ARGS", toolCallId=call, delta=arguments))
        out.append(self._event("TOOL_CALL_END", toolCallId=call))
        return out

    def _ask(self, frame: Mapping[str, Any]) -> None:
        call = self.calls[frame.get("toolCallId", "")]
        name, arguments = frame.get("toolName", ""), frame.get("arguments") or ""
        self.asked[call] = {
            "id": call,
            "reason": "tool_approval",
            "message": f"The agent asks to run {name} with {arguments or 'no arguments'}.",
            "toolCallId": call,
            "expiresAt": frame.get("expiresAt"),
            "responseSchema": APPROVAL_SCHEMA,
            "metadata": {"toolName": name, "arguments": arguments},
        }

    def _result(self, frame: Mapping[str, Any]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if frame.get("toolCallId", "") not in self.calls:  # never announced: every call gets its result
            out += self._announce(frame)
        call = self.calls.pop(frame.get("toolCallId", ""))
        self.asked.pop(call, None)
        self.after_tools = True
        out.append(
            self._event(
                "TOOL_CALL_RESULT",
                messageId=f"tool_{self.hex}_{frame.get('seq')}",
                toolCallId=call,
                content=frame.get("result") or "",
                role="tool",
            )
        )
        return out

    def _error(self, frame: Mapping[str, Any]) -> list[dict[str, Any]]:
        self.errors.append(frame)
        out = self._close()
        value: dict[str, Any] = {
            "code": frame.get("code", ""),
            "message": frame.get("message", ""),
            "detail": frame.get("detail", ""),
        }
        if frame.get("discards") is not None:
            value["discardedMessageId"] = f"msg_{self.hex}_{frame['discards']}"
            self.turn_text = None
        out.append(self._event("CUSTOM", name="agentsite.error", value=value))
        return out

    def _complete(self, frame: Mapping[str, Any]) -> list[dict[str, Any]]:
        self.finished = True
        status, usage = frame.get("status"), usage_of(frame, self.model)
        if status in ("failed", "interrupted"):
            last = self.errors[-1] if self.errors else {}
            code = last.get("code") or ("INTERRUPTED" if status == "interrupted" else "RUN_FAILED")
            message = last.get("message") or "The run failed."
            return [self._event("RUN_ERROR", message=message, code=code, usage=usage)]
        outcome = {"type": "cancelled" if status == "cancelled" else "success"}
        return [self.finished_event(outcome, usage=usage)]

    def finished_event(self, outcome: dict[str, Any], **fields: Any) -> dict[str, Any]:
        return self._event("RUN_FINISHED", threadId=self.thread_id, runId=self.agui_run_id, outcome=outcome, **fields)

    @property
    def waiting(self) -> bool:
        """The run waits for answers to approval requests it made."""
        return bool(self.asked) and not self.finished

    def interrupt(self) -> list[dict[str, Any]]:
        """RUN_FINISHED with the interrupt outcome naming every request still unanswered: the
        AG-UI run ends there, the agentsite run waits on (a `resume` answers it)."""
        out = self._close()
        interrupts = [{k: v for k, v in asked.items() if v is not None} for asked in self.asked.values()]
        out.append(self.finished_event({"type": "interrupt", "interrupts": interrupts}))
        self.finished = True
        return out

    def stopped(self, code: str, message: str) -> dict[str, Any]:
        """RUN_ERROR for a stream the server ended (its credential revoked, its conversation deleted)."""
        self.finished = True
        return self._event("RUN_ERROR", message=message, code=code)
