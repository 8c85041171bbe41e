"""The AgentStreamEvent family: immutable events whose JSON is exactly docs/protocol.md, "Events".

`seq` and `runId` are not part of these types: the server adds them when it stores an event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass(frozen=True, slots=True)
class AgentEvent:
    type: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class UserMessageEvent(AgentEvent):
    content: str
    type: ClassVar[str] = "user_message"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "content": self.content}


@dataclass(frozen=True, slots=True)
class TextEvent(AgentEvent):
    content: str
    type: ClassVar[str] = "text"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "content": self.content}


@dataclass(frozen=True, slots=True)
class ThinkingEvent(AgentEvent):
    content: str
    type: ClassVar[str] = "thinking"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "content": self.content}


@dataclass(frozen=True, slots=True)
class ToolStartEvent(AgentEvent):
    tool_name: str
    tool_call_id: str
    arguments: str
    type: ClassVar[str] = "tool_start"

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "toolName": self.tool_name,
            "toolCallId": self.tool_call_id,
            "arguments": self.arguments,
        }


@dataclass(frozen=True, slots=True)
class ToolEndEvent(AgentEvent):
    tool_name: str
    tool_call_id: str
    result: str
    is_error: bool
    duration_ms: int
    type: ClassVar[str] = "tool_end"

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "toolName": self.tool_name,
            "toolCallId": self.tool_call_id,
            "result": self.result,
            "isError": self.is_error,
            "durationMs": self.duration_ms,
        }


@dataclass(frozen=True, slots=True)
class ErrorEvent(AgentEvent):
    code: str
    message: str
    detail: str = ""
    # The error's own fields beyond these (BUDGET_EXHAUSTED's budget, retryAfter, resetsAt).
    extra: dict[str, Any] | None = None
    type: ClassVar[str] = "error"

    def to_dict(self) -> dict[str, Any]:
        data = {"type": self.type, "code": self.code, "message": self.message, "detail": self.detail}
        return {**data, **self.extra} if self.extra else data


@dataclass(frozen=True, slots=True)
class CompleteEvent(AgentEvent):
    status: str  # succeeded | failed | cancelled | interrupted
    # Why the answer's model call ended when not at the model's own stop ("length": cut off at the
    # token limit); "" for a whole answer, or when the endpoint gave no reason.
    finish_reason: str = ""
    type: ClassVar[str] = "complete"

    def to_dict(self) -> dict[str, Any]:
        data = {"type": self.type, "status": self.status}
        if self.finish_reason:
            data["finishReason"] = self.finish_reason
        return data


@dataclass(frozen=True, slots=True)
class Reference:
    title: str
    url: str
    snippet: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"title": self.title, "url": self.url, "snippet": self.snippet}


@dataclass(frozen=True, slots=True)
class ReferenceEvent(AgentEvent):
    references: tuple[Reference, ...]
    type: ClassVar[str] = "reference"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "references": [ref.to_dict() for ref in self.references]}


@dataclass(frozen=True, slots=True)
class ApprovalRequestEvent(AgentEvent):
    """A tool call waits for the user's approval until `expires_at` (ISO 8601 UTC)."""

    tool_call_id: str
    tool_name: str
    arguments: str
    expires_at: str
    type: ClassVar[str] = "approval_request"

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "toolCallId": self.tool_call_id,
            "toolName": self.tool_name,
            "arguments": self.arguments,
            "expiresAt": self.expires_at,
        }


@dataclass(frozen=True, slots=True)
class ApprovalResultEvent(AgentEvent):
    tool_call_id: str
    decision: str  # approved | denied | expired (chat.agent.approval)
    reason: str = ""
    type: ClassVar[str] = "approval_result"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "toolCallId": self.tool_call_id, "decision": self.decision, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class SteerAppliedEvent(AgentEvent):
    """The run took a user's steer in: the model call that follows holds it (chat.agent.loop)."""

    queue_id: str
    type: ClassVar[str] = "steer_applied"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "queueId": self.queue_id}


@dataclass(frozen=True, slots=True)
class CompactionEvent(AgentEvent):
    """The run summarized its conversation's older turns (chat.agent.compaction): its next model
    call, and later runs of the same branch, are sent the summary in their place."""

    summary: str
    through_seq: int  # the seq of the last event of the newest turn summarized
    previous_seq: int | None  # the compaction whose summary this one took in
    turns: int  # the turns the summary stands for, those of previous_seq's included
    tokens_before: int
    tokens_after: int
    trigger: str = "auto"
    type: ClassVar[str] = "compaction"

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "summary": self.summary,
            "throughSeq": self.through_seq,
            "previousSeq": self.previous_seq,
            "turns": self.turns,
            "tokensBefore": self.tokens_before,
            "tokensAfter": self.tokens_after,
            "trigger": self.trigger,
        }


class ErrorCode:
    LLM_CALL_FAILED = "LLM_CALL_FAILED"
    COMPACTION_FAILED = "COMPACTION_FAILED"
    MAX_ITERATIONS = "MAX_ITERATIONS"
    CANCELLED = "CANCELLED"
    INTERRUPTED = "INTERRUPTED"
    INVALID_OUTPUT = "INVALID_OUTPUT"


class RunStatus:
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"


def event_from_dict(data: dict[str, Any]) -> AgentEvent:
    """Rebuild an event from its protocol JSON (extra keys such as seq and runId are ignored)."""
    kind = data.get("type")
    if kind == "user_message":
        return UserMessageEvent(content=data["content"])
    if kind == "text":
        return TextEvent(content=data["content"])
    if kind == "thinking":
        return ThinkingEvent(content=data["content"])
    if kind == "tool_start":
        return ToolStartEvent(data["toolName"], data["toolCallId"], data["arguments"])
    if kind == "tool_end":
        return ToolEndEvent(
            data["toolName"], data["toolCallId"], data["result"], bool(data["isError"]), int(data["durationMs"])
        )
    if kind == "error":
        return ErrorEvent(data["code"], data["message"], data.get("detail", ""))
    if kind == "complete":
        return CompleteEvent(data["status"], data.get("finishReason") or "")
    if kind == "reference":
        refs = tuple(Reference(r.get("title", ""), r.get("url", ""), r.get("snippet", "")) for r in data["references"])
        return ReferenceEvent(refs)
    if kind == "approval_request":
        return ApprovalRequestEvent(data["toolCallId"], data["toolName"], data["arguments"], data.get("expiresAt", ""))
    if kind == "approval_result":
        return ApprovalResultEvent(data["toolCallId"], data["decision"], data.get("reason", ""))
    if kind == "steer_applied":
        return SteerAppliedEvent(data["queueId"])
    if kind == "compaction":
        return CompactionEvent(
            data["summary"],
            data["throughSeq"],
            data.get("previousSeq"),
            data["turns"],
            data["tokensBefore"],
            data["tokensAfter"],
            data.get("trigger", "auto"),
        )
    raise ValueError(f"unknown event type: {kind!r}")
