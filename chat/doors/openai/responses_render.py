"""A run's stored events as the Responses API has them (docs/protocol.md, "Responses API"): the
Response object and its stream of events, each with its `sequence_number`. Derived from the
stored events alone and in their order, so the n-th event is the same live, replayed or resumed.
No I/O here: chat.doors.openai.responses_api reads the log and serves."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from chat.agent.events import ErrorCode

TERMINAL = {
    "completed": "response.completed",
    "incomplete": "response.incomplete",
    "cancelled": "response.incomplete",
    "failed": "response.failed",
}
PREFIX = "resp_"


def response_id(run_id: Any) -> str:
    return PREFIX + uuid.UUID(str(run_id)).hex


def run_id_of(response: str) -> uuid.UUID | None:
    """The run a response id names; None when it is not one."""
    hexits = response.removeprefix(PREFIX)
    if not response.startswith(PREFIX) or len(hexits) != 32:
        return None
    try:
        return uuid.UUID(hex=hexits)
    except ValueError:
        return None


def usage_of(complete: Mapping[str, Any]) -> dict[str, Any]:
    u = complete.get("usage") or {}
    return {
        "input_tokens": u.get("promptTokens", 0),
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": u.get("completionTokens", 0),
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u.get("totalTokens", 0),
    }


class ResponseRender:
    """Follows one run's stored events (`add`, in seq order): its output items, its status, and
    the Responses events each stored event makes."""

    def __init__(self, *, run_id: Any, model: str, conversation_id: Any, created_at: int) -> None:
        self.run_id = str(run_id)
        self.hex = uuid.UUID(self.run_id).hex
        self.model, self.conversation_id, self.created_at = model, str(conversation_id), created_at
        self.request: dict[str, Any] = {}
        self.items: list[dict[str, Any]] = []  # every item added, left-out messages too
        self.left_out: set[int] = set()
        self.open_index: int | None = None  # the open reasoning or message item
        self.calls: dict[str, int] = {}  # toolCallId -> output_index of a call under way
        self.asked: dict[str, str] = {}  # toolCallId -> arguments of its approval_request
        self.errors: list[dict[str, Any]] = []
        self.complete: dict[str, Any] | None = None
        self.events: list[dict[str, Any]] = []
        self.started = False

    # The Response object

    @property
    def status(self) -> str:
        if self.complete is None:
            return "in_progress"
        status = self.complete.get("status")
        if status == "cancelled":
            return "cancelled"
        if status in ("failed", "interrupted"):
            return "failed"
        if self.incomplete_reason() is not None:
            return "incomplete"
        return "completed"

    def incomplete_reason(self) -> str | None:
        if any(e.get("code") == ErrorCode.MAX_ITERATIONS for e in self.errors):
            return "max_messages"
        if (self.complete or {}).get("finishReason") == "length":
            return "max_output_tokens"
        return None

    def response(self, *, initial: bool = False) -> dict[str, Any]:
        status = "in_progress" if initial else self.status
        reason = None if initial else self.incomplete_reason()
        error = None
        if status == "failed":
            last = self.errors[-1] if self.errors else {}
            error = {"code": "server_error", "message": last.get("message") or "The run failed."}
        request = self.request
        ended = self.complete is not None and not initial
        return {
            "id": response_id(self.run_id),
            "object": "response",
            "created_at": self.created_at,
            "completed_at": _seconds(self.complete.get("ts")) if ended and status == "completed" else None,
            "status": status,
            "model": self.model,
            "output": [] if initial else [item for i, item in enumerate(self.items) if i not in self.left_out],
            "usage": usage_of(self.complete) if ended else None,
            "error": error,
            "incomplete_details": {"reason": reason} if status == "incomplete" and reason else None,
            "instructions": request.get("instructions"),
            "metadata": request.get("metadata") or {},
            "previous_response_id": request.get("previousResponseId"),
            "background": bool(request.get("background")),
            "max_output_tokens": request.get("maxOutputTokens"),
            "temperature": request.get("temperature"),
            "top_p": None,
            "conversation": {"id": self.conversation_id},
            "tools": [],
            "tool_choice": "auto",
            "parallel_tool_calls": True,
            "text": {"format": {"type": "text"}},
            "truncation": "disabled",
            "store": True,
        }

    # Following the events

    def _emit(self, kind: str, **fields: Any) -> None:
        self.events.append({"type": kind, "sequence_number": len(self.events), **fields})

    def add(self, frame: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Follow one stored event of the conversation; returns the Responses events it makes
        (none for another run's, nor for a frame that is no stored event: a stream's `sync`)."""
        if frame.get("runId") != self.run_id or "seq" not in frame or self.complete is not None:
            return []
        before = len(self.events)
        kind = frame.get("type")
        if kind == "user_message":
            if not self.started:
                self.started = True
                self.request = dict(frame.get("request") or {})
                self._emit("response.created", response=self.response(initial=True))
                self._emit("response.in_progress", response=self.response(initial=True))
        elif kind in ("thinking", "text"):
            self._delta(kind, frame)
        elif kind == "tool_start":
            self._close_open()
            self._call_start(frame, frame.get("arguments") or "")
        elif kind == "tool_end":
            self._close_open()
            self._call_end(frame)
        elif kind == "approval_request":
            self._close_open()
            self.asked[frame.get("toolCallId", "")] = frame.get("arguments") or ""
        elif kind == "error":
            self.errors.append(dict(frame))
            self._close_open(incomplete="discards" in frame)
        elif kind == "complete":
            self._close_open()
            self.complete = dict(frame)
            self._emit(TERMINAL[self.status], response=self.response())
        elif kind in ("reference", "steer", "queued", "unqueued"):
            pass
        else:
            self._close_open()
        return self.events[before:]

    def _delta(self, kind: str, frame: Mapping[str, Any]) -> None:
        item_type = "reasoning" if kind == "thinking" else "message"
        if self.open_index is not None and self.items[self.open_index]["type"] != item_type:
            self._close_open()
        if self.open_index is None:
            self.open_index = len(self.items)
            seq = frame.get("seq")
            if item_type == "reasoning":
                item: dict[str, Any] = {
                    "type": "reasoning",
                    "id": f"rs_{self.hex}_{seq}",
                    "summary": [],
                    "content": [],
                    "status": "in_progress",
                }
                part: dict[str, Any] = {"type": "reasoning_text", "text": ""}
            else:
                item = {
                    "type": "message",
                    "id": f"msg_{self.hex}_{seq}",
                    "role": "assistant",
                    "status": "in_progress",
                    "content": [],
                }
                part = {"type": "output_text", "text": "", "annotations": []}
            self.items.append(item)
            self._emit("response.output_item.added", output_index=self.open_index, item=_copy(item))
            self._emit(
                "response.content_part.added",
                item_id=item["id"],
                output_index=self.open_index,
                content_index=0,
                part=dict(part),
            )
            item["content"].append(part)
        item = self.items[self.open_index]
        delta = frame.get("content") or ""
        item["content"][0]["text"] += delta
        where = {"item_id": item["id"], "output_index": self.open_index, "content_index": 0, "delta": delta}
        if item_type == "reasoning":
            self._emit("response.reasoning_text.delta", **where)
        else:
            self._emit("response.output_text.delta", **where, logprobs=[])

    def _close_open(self, *, incomplete: bool = False) -> None:
        if self.open_index is None:
            return
        index, self.open_index = self.open_index, None
        item = self.items[index]
        part = item["content"][0]
        where = {"item_id": item["id"], "output_index": index, "content_index": 0}
        if item["type"] == "reasoning":
            self._emit("response.reasoning_text.done", **where, text=part["text"])
        else:
            self._emit("response.output_text.done", **where, text=part["text"], logprobs=[])
        self._emit("response.content_part.done", **where, part=dict(part))
        left_out = incomplete and item["type"] == "message"
        item["status"] = "incomplete" if left_out else "completed"
        if left_out:
            self.left_out.add(index)
        self._emit("response.output_item.done", output_index=index, item=_copy(item))

    def _call_start(self, frame: Mapping[str, Any], arguments: str) -> int:
        index = len(self.items)
        item = {
            "type": "mcp_call",
            "id": f"mcp_{self.hex}_{frame.get('seq')}",
            "server_label": "agentsite",
            "name": frame.get("toolName", ""),
            "arguments": "",
            "output": None,
            "error": None,
            "status": "in_progress",
        }
        self.items.append(item)
        self.calls[frame.get("toolCallId", "")] = index
        self._emit("response.output_item.added", output_index=index, item=_copy(item))
        self._emit("response.mcp_call.in_progress", item_id=item["id"], output_index=index)
        self._emit("response.mcp_call_arguments.delta", item_id=item["id"], output_index=index, delta=arguments)
        self._emit("response.mcp_call_arguments.done", item_id=item["id"], output_index=index, arguments=arguments)
        item["arguments"] = arguments
        return index

    def _call_end(self, frame: Mapping[str, Any]) -> None:
        call_id = frame.get("toolCallId", "")
        index = self.calls.pop(call_id, None)
        if index is None:  # a call that never started (denied, expired)
            index = self._call_start(frame, self.asked.get(call_id, ""))
            self.calls.pop(call_id, None)
        item = self.items[index]
        result = frame.get("result") or ""
        failed = bool(frame.get("isError"))
        item["output"] = result
        item["status"] = "failed" if failed else "completed"
        if failed:
            item["error"] = {"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": result}]}
        done = "response.mcp_call.failed" if failed else "response.mcp_call.completed"
        self._emit(done, item_id=item["id"], output_index=index)
        self._emit("response.output_item.done", output_index=index, item=_copy(item))


def _copy(item: dict[str, Any]) -> dict[str, Any]:
    return {**item, "content": [dict(p) for p in item["content"]]} if "content" in item else dict(item)


def _seconds(ts: Any) -> int | None:
    """A frame's `ts` (ISO 8601) as Unix seconds."""
    try:
        return int(datetime.fromisoformat(str(ts).replace("Z", "+00:00")).timestamp())
    except ValueError:
        return None


def input_items(user_message: Mapping[str, Any], *, run_id: Any, conversation_id: Any) -> list[dict[str, Any]]:
    """The input of a run, oldest first: each `history` entry, then the user_message."""
    hexits, seq = uuid.UUID(str(run_id)).hex, user_message.get("seq")
    recorded = [*(user_message.get("history") or []), {"role": "user", **user_message}]
    items = []
    for index, message in enumerate(recorded):
        role = message.get("role", "user")
        if role == "assistant":
            parts: list[dict[str, Any]] = [
                {"type": "output_text", "text": message.get("content", ""), "annotations": []}
            ]
        else:
            parts = [{"type": "input_text", "text": message.get("content", "")}]
            parts += [
                {
                    "type": "input_image",
                    "detail": "auto",
                    "file_id": None,
                    "image_url": f"/api/conversations/{conversation_id}/files/{attachment['path']}",
                }
                for attachment in message.get("attachments") or []
            ]
        last = index == len(recorded) - 1
        items.append(
            {
                "type": "message",
                "id": f"msg_{hexits}_{seq}" if last else f"msg_{hexits}_{seq}_{index}",
                "role": role,
                "status": "completed",
                "content": parts,
            }
        )
    return items
