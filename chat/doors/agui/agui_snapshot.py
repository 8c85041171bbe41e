"""A thread's MESSAGES_SNAPSHOT (docs/protocol.md, "AG-UI", reconnecting with `connect`): the
newest branch of the conversation as stored, as AG-UI messages with the ids its events have in
the AG-UI stream (chat.doors.agui.agui_render): user messages with the ids the client gave,
reasoning, assistant text with its `toolCalls`, tool results, a call awaiting approval as a tool
call without result; text a retried model call left out is not in it. No I/O here."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from chat.doors.agui.agui_render import PASSING

HISTORY_ROLES = ("user", "assistant", "system")


class _Transcript:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.open: dict[str, Any] | None = None  # the reasoning or text message being written
        self.turn: dict[str, Any] | None = None  # the assistant message of the model turn going on
        self.after_tools = False
        self.calls: dict[str, str] = {}  # the run's toolCallId -> the AG-UI id, of a call not ended

    def add(self, frame: Mapping[str, Any]) -> None:
        kind, seq = frame.get("type"), frame.get("seq")
        hexits = uuid.UUID(str(frame.get("runId"))).hex
        if kind == "user_message":
            self._user(frame, hexits)
        elif kind in ("thinking", "text"):
            self._delta(kind, frame, hexits)
        elif kind in ("tool_start", "approval_request"):
            self.open = None
            if frame.get("toolCallId", "") not in self.calls:
                self._call(frame, hexits)
        elif kind == "tool_end":
            self.open = None
            if frame.get("toolCallId", "") not in self.calls:
                self._call(frame, hexits)
            call = self.calls.pop(frame.get("toolCallId", ""))
            self.after_tools = True
            self.messages.append(
                {"id": f"tool_{hexits}_{seq}", "role": "tool", "content": frame.get("result") or "", "toolCallId": call}
            )
        elif kind == "error" and frame.get("discards") is not None:
            self.open = None
            left_out = f"msg_{hexits}_{frame['discards']}"
            self.messages = [m for m in self.messages if m["id"] != left_out]
            if self.turn is not None and self.turn["id"] == left_out:
                self.turn = None
        elif kind not in PASSING:
            self.open = None

    def _user(self, frame: Mapping[str, Any], hexits: str) -> None:
        self.open, self.turn, self.after_tools, self.calls = None, None, False, {}
        seq = frame.get("seq")
        for index, earlier in enumerate(frame.get("history") or []):
            role = earlier.get("role") if earlier.get("role") in HISTORY_ROLES else "user"
            self.messages.append({"id": f"history_{hexits}_{seq}_{index}", "role": role, "content": earlier["content"]})
        request = frame.get("request") or {}
        message_id = request.get("messageId") or f"user_{hexits}_{seq}"
        self.messages.append({"id": message_id, "role": "user", "content": frame.get("content") or ""})

    def _delta(self, kind: str, frame: Mapping[str, Any], hexits: str) -> None:
        if self.after_tools:
            self.turn, self.after_tools = None, False
        role = "reasoning" if kind == "thinking" else "assistant"
        if self.open is None or self.open["role"] != role:
            prefix = "rs" if kind == "thinking" else "msg"
            self.open = {"id": f"{prefix}_{hexits}_{frame.get('seq')}", "role": role, "content": ""}
            self.messages.append(self.open)
            if role == "assistant":
                self.turn = self.open
        self.open["content"] += frame.get("content") or ""

    def _call(self, frame: Mapping[str, Any], hexits: str) -> None:
        call = f"call_{hexits}_{frame.get('seq')}"
        self.calls[frame.get("toolCallId", "")] = call
        if self.turn is None or self.after_tools:
            # A turn that called tools without text: an assistant message of its own carries them.
            self.turn, self.after_tools = {"id": f"msg_{hexits}_{frame.get('seq')}", "role": "assistant"}, False
            self.messages.append(self.turn)
        function = {"name": frame.get("toolName", ""), "arguments": frame.get("arguments") or ""}
        self.turn.setdefault("toolCalls", []).append({"id": call, "type": "function", "function": function})


def snapshot_messages(frames: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The AG-UI messages of a branch's stored events (its runs' events, in seq order)."""
    transcript = _Transcript()
    for frame in frames:
        transcript.add(frame)
    return transcript.messages
