"""The run engine's front door: the only way to start, cancel or answer a run, whichever door
asked (the socket's frames, the HTTP run endpoints, `/v1`). Each action takes one typed request
(chat.runs.requests); the start's rules are checked once, in its transaction
(chat.runs.admission), and every refusal comes back as a ProtocolError with the protocol's code
(docs/protocol.md, "Client frames" and "Runs over HTTP"). No door knows how a run is stored or
supervised."""

from __future__ import annotations

from chat.exceptions import (
    AgentUnavailable,
    ApprovalClosed,
    ConversationGone,
    NotAUserMessage,
    NothingToCompact,
    NotQueued,
    QueueFull,
    QuotaBusy,
    QuotaExceeded,
    RateLimited,
    RunInProgress,
    UnknownApproval,
)
from chat.models import Run
from chat.runs import queue
from chat.runs.client_frames import ProtocolError, already_answered
from chat.runs.queue import Queued, Steered
from chat.runs.requests import ApproveRun, CancelRun, StartRun, Unqueue
from chat.runs.starter import start_run
from chat.runtime.registry import get_registry


def database_unavailable() -> ProtocolError:
    return ProtocolError(
        "UNAVAILABLE", "The server cannot reach its database; try again in a moment.", "database unavailable"
    )


async def start(request: StartRun) -> tuple[Run, int]:
    """The run and the seq of its user_message."""
    try:
        return await start_run(request)
    except NotAUserMessage as exc:
        raise ProtocolError("BAD_REQUEST", "That is not a message of this conversation.", str(exc)) from None
    except RunInProgress:
        raise ProtocolError("RUN_IN_PROGRESS", "A run is already in progress in this conversation.") from None
    except NothingToCompact as exc:
        raise ProtocolError(
            "NOTHING_TO_COMPACT", "There is nothing to summarize: the kept turns are all there is.", str(exc)
        ) from None
    except RateLimited as exc:
        raise ProtocolError("RATE_LIMITED", "Too many messages; wait a minute.", str(exc)) from None
    except QuotaBusy as exc:
        raise ProtocolError(
            "QUOTA_EXCEEDED",
            "A run of yours is in progress and may use up your quota; wait for it to end.",
            str(exc),
            extra=quota_fields(exc),
        ) from None
    except QuotaExceeded as exc:
        raise ProtocolError(
            "QUOTA_EXCEEDED",
            "Your quota is used up (a budget reached its limit); try again when it resets.",
            str(exc),
            extra=quota_fields(exc),
        ) from None
    except AgentUnavailable as exc:
        # Refused rather than answered by another agent: a profile may stand for an endpoint
        # chosen for what it may see (a local model for confidential work), and a silent
        # switch would send the message elsewhere. The user picks another agent (PATCH).
        raise ProtocolError(
            "AGENT_UNAVAILABLE", "This conversation's agent is no longer available to you; pick another.", str(exc)
        ) from None
    except ConversationGone:
        raise ProtocolError("NOT_FOUND", "This conversation no longer exists.", "conversation deleted") from None


async def send(request: StartRun) -> tuple[Run, int] | Queued | Steered:
    """A user's message: started as `start` does, or, with `whileRunning` while the
    conversation's run works (or messages wait), queued or steering that run (docs/protocol.md,
    "Queued messages" and "Steering")."""
    if request.while_running is None:
        return await start(request)
    for _ in range(3):  # a run that starts or ends between the two steps: looked at again
        try:
            queued = await queue.queue(request, steer=request.while_running == "steer")
        except QueueFull:
            raise ProtocolError(
                "QUEUE_FULL", "Too many messages wait in this conversation; wait for one to start.", "queue full"
            ) from None
        except ConversationGone:
            raise ProtocolError("NOT_FOUND", "This conversation no longer exists.", "conversation deleted") from None
        if queued is not None:
            return queued
        try:
            return await start(request)
        except ProtocolError as exc:
            if exc.code != "RUN_IN_PROGRESS":
                raise
    raise ProtocolError("RUN_IN_PROGRESS", "A run is already in progress in this conversation.")


async def cancel(request: CancelRun) -> bool:
    """Whether a run was in progress (and is now asked to stop)."""
    return (await cancel_clearing(request))[0]


async def cancel_clearing(request: CancelRun) -> tuple[bool, int]:
    """cancel, and how many waiting messages `clearQueue` withdrew (before the run is stopped:
    nothing starts after its `complete`)."""
    cleared = 0
    if request.clear_queue:
        try:
            cleared = await queue.clear(conversation_id=request.conversation_id)
        except ConversationGone:
            raise ProtocolError("NOT_FOUND", "This conversation no longer exists.", "conversation deleted") from None
    return await get_registry().cancel(conversation_id=request.conversation_id), cleared


async def unqueue(request: Unqueue) -> None:
    try:
        await queue.unqueue(conversation_id=request.conversation_id, queue_id=request.queue_id)
    except (NotQueued, ConversationGone):
        raise ProtocolError(
            "NOT_QUEUED", "No message of this conversation waits with that queueId.", "not queued"
        ) from None


async def approve(request: ApproveRun) -> None:
    try:
        await get_registry().approve(
            conversation_id=request.conversation_id,
            tool_call_id=request.tool_call_id,
            decision=request.decision,
            reply_to=request.reply_to,
        )
    except UnknownApproval:
        raise ProtocolError(
            "BAD_REQUEST", "This conversation has no approval request with that toolCallId.", "unknown toolCallId"
        ) from None
    except ApprovalClosed:
        raise already_answered() from None


def quota_fields(exc: QuotaExceeded) -> dict:
    """A QUOTA_EXCEEDED refusal's own fields (docs/protocol.md, "Budgets")."""
    return {"retryAfter": exc.retry_after, "resetsAt": exc.resets_at, "budget": exc.budget}
