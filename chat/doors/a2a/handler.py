"""The A2A request handler (docs/protocol.md, "A2A agent"): the SDK's JSON-RPC dispatcher parses
and routes each call to these methods, which read tasks from the event log and start, answer and
cancel runs through the run engine's front door (chat.runs.engine). The event log is the only
record of a task: no SDK TaskStore beside it. The caller (chat.doors.a2a.endpoint) puts the Door
in the call context's state."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler, validate_request_params
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import (
    InternalError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from django.db import DatabaseError

from chat.agent.batching import GroupedCalls
from chat.agents.profiles import A2A_VIA
from chat.conversations.services import conversation_create, conversation_delete
from chat.doors.a2a import cards, reads
from chat.doors.a2a.following import Door, Follower
from chat.doors.a2a.messages import Asked, approval, asked, no_decision
from chat.doors.a2a.tasks import StreamEvent, TaskRender, rendered
from chat.eventlog.turns import first_message_title
from chat.models import A2A_SOURCE, Conversation, Run
from chat.runs import engine
from chat.runs.client_frames import ProtocolError
from chat.runs.requests import ApproveRun, CancelRun, StartRun
from serving.loop_middleware import request_db

log = logging.getLogger(__name__)

# Refusals of a start the client may retry later: -32004 whose message starts with the code.
NOT_NOW = frozenset({"RUN_IN_PROGRESS", "RATE_LIMITED", "QUOTA_EXCEEDED", "AGENT_UNAVAILABLE"})
CANCEL_WAIT_SECONDS = 10.0
# A run's statuses by the state ListTasks filters on (working and input-required both run).
RUN_STATUSES = {
    TaskState.TASK_STATE_SUBMITTED: ("running",),
    TaskState.TASK_STATE_WORKING: ("running",),
    TaskState.TASK_STATE_INPUT_REQUIRED: ("running",),
    TaskState.TASK_STATE_COMPLETED: ("succeeded",),
    TaskState.TASK_STATE_FAILED: ("failed", "interrupted"),
    TaskState.TASK_STATE_CANCELED: ("cancelled",),
}


def door_of(context: ServerCallContext) -> Door:
    return context.state["door"]


def refused(exc: ProtocolError) -> Exception:
    text = f"{exc.code}: {exc.message}"
    if exc.code in NOT_NOW:
        return UnsupportedOperationError(message=text)
    if exc.code == "UNAVAILABLE":
        return InternalError(message=text)
    return InvalidParamsError(message=text)


def _history_length(config) -> int | None:
    return config.history_length if config.HasField("history_length") else None


def _new_conversation(*, door: Door, content: str) -> Conversation:
    return conversation_create(
        owner=door.user, title=first_message_title(content), agent=door.profile, source=A2A_SOURCE
    )


# The messages' new conversations made in groups, one trip per group, each its own transaction (issue 55).
_new_conversation_grouped = GroupedCalls(_new_conversation, request_db, name="a2a-conversations")


def _discard(conversation: Conversation) -> None:
    """A conversation made for a refused start goes again: a refused message stores nothing."""
    try:
        conversation_delete(conversation=conversation)
    except DatabaseError:
        log.warning("could not delete the conversation %s of a refused A2A message", conversation.pk)


def _snapshot(*, door: Door, task_id: str) -> tuple[Run, TaskRender, Conversation]:
    """The task's run, its Task from the log, and its conversation read after its events (so its
    last_seq is not older than they are); TaskNotFoundError for anything not the user's on this agent."""
    run = reads.task_run(user=door.user, agent_id=door.agent_id, task_id=task_id)
    if run is None:
        raise TaskNotFoundError(message="No such task on this agent.")
    render = rendered(run_id=run.pk, context_id=run.conversation_id, events=reads.task_events(run=run))
    conversation = Conversation.objects.filter(pk=run.conversation_id).first()
    if conversation is None:  # deleted meanwhile
        raise TaskNotFoundError(message="No such task on this agent.")
    return run, render, conversation


async def _read(door: Door, task_id: str) -> tuple[Run, TaskRender, Conversation]:
    try:
        return await request_db(_snapshot)(door=door, task_id=task_id)
    except DatabaseError:
        raise InternalError(message="UNAVAILABLE: The server cannot reach its database.") from None


class RunsRequestHandler(RequestHandler):
    """Tasks are runs, contexts conversations, approvals input-required."""

    async def _started(self, door: Door, request: Asked, *, streamed: bool) -> Follower:
        """The message's run started (on a new conversation without contextId) and followed."""
        conversation = None
        if request.context_id:
            conversation = await request_db(reads.context_conversation)(
                user=door.user, agent_id=door.agent_id, context_id=request.context_id
            )
            if conversation is None:
                raise InvalidParamsError(
                    message="NOT_FOUND: No such context: not a conversation of yours with this agent."
                )
        new = conversation is None
        if conversation is None:
            conversation = await _new_conversation_grouped(door=door, content=request.content)
        follower = Follower(
            door,
            conversation,
            TaskRender(run_id="", context_id=str(conversation.pk)),
            after=0 if new else conversation.last_seq,
            new=new,
            streamed=streamed,
        )
        start = StartRun(
            conversation,
            door.user,
            request.content,
            first=new,
            api_token_id=door.token_id,
            via=A2A_VIA,
            request={"messageId": request.message_id},
        )
        try:
            await follower.start(start)
        except ProtocolError as exc:
            if new:
                await request_db(_discard)(conversation)
            raise refused(exc) from None
        return follower

    async def _answered(self, door: Door, request: Asked, *, streamed: bool) -> Follower:
        """The answer to a task's approval request given, and the task followed from there."""
        run, render, conversation = await _read(door, request.task_id)
        if request.context_id and request.context_id != str(run.conversation_id):
            raise InvalidParamsError(message="The contextId is not the task's.")
        if not render.waiting:
            raise UnsupportedOperationError(message="This task is not waiting for input.")
        if request.decision is None:
            raise no_decision()
        answer = request.decision
        named = answer.get("toolCallId")
        if named is None and len(render.open) > 1:
            raise InvalidParamsError(message="Several calls wait for approval: name the toolCallId.")
        if named is not None and named not in render.open:
            raise InvalidParamsError(message="This task has no open approval request with that toolCallId.")
        tool_call_id, decision = approval(answer, tool_call_id=named or next(iter(render.open)))
        follower = Follower(door, conversation, render, after=render.seen, new=False, streamed=streamed)
        await follower.join()
        try:
            await engine.approve(ApproveRun(run.conversation_id, tool_call_id, decision))
        except ProtocolError as exc:
            await follower.aclose()
            raise UnsupportedOperationError(message=f"{exc.code}: {exc.message}") from None
        return follower

    async def _begun(self, params: SendMessageRequest, context: ServerCallContext, *, streamed: bool) -> Follower:
        door, request = door_of(context), asked(params)
        if request.task_id:
            return await self._answered(door, request, streamed=streamed)
        return await self._started(door, request, streamed=streamed)

    @validate_request_params
    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task:
        follower = await self._begun(params, context, streamed=False)
        if params.configuration.return_immediately:
            await follower.aclose()
            door = door_of(context)
            render = (await _read(door, follower.render.run_id))[1]
            return render.task(history_length=_history_length(params.configuration))
        await follower.to_rest()
        return follower.render.task(history_length=_history_length(params.configuration))

    @validate_request_params
    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[StreamEvent]:
        follower = await self._begun(params, context, streamed=True)
        if params.message.task_id:  # an answer goes on from the task as it was
            yield follower.render.task()
        async with aclosing(follower.events()) as events:
            async for event in events:
                yield event

    @validate_request_params
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        _, render, _ = await _read(door_of(context), params.id)
        history = params.history_length if params.HasField("history_length") else None
        return render.task(history_length=history)

    @validate_request_params
    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        door = door_of(context)
        size = params.page_size if params.HasField("page_size") else reads.DEFAULT_PAGE
        if not 1 <= size <= reads.MAX_PAGE:
            raise InvalidParamsError(message=f"pageSize must be from 1 to {reads.MAX_PAGE}.")
        state = params.status if params.status != TaskState.TASK_STATE_UNSPECIFIED else None
        try:
            page, token, total = await request_db(reads.tasks_page)(
                user=door.user,
                agent_id=door.agent_id,
                context_id=params.context_id or None,
                statuses=RUN_STATUSES.get(state) if state is not None else None,
                page_size=size,
                page_token=params.page_token,
            )
        except reads.BadPageToken as exc:
            raise InvalidParamsError(message=str(exc)) from None
        history = params.history_length if params.HasField("history_length") else None
        tasks = [rendered(run_id=run.pk, context_id=run.conversation_id, events=events) for run, events in page]
        kept = [render for render in tasks if state is None or render.state == state]
        return ListTasksResponse(
            tasks=[render.task(history_length=history) for render in kept],
            next_page_token=token,
            page_size=size,
            total_size=total,
        )

    @validate_request_params
    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task:
        door = door_of(context)
        run, render, conversation = await _read(door, params.id)
        if render.finished:
            raise TaskNotCancelableError(message="This task has ended.")
        follower = Follower(door, conversation, render, after=render.seen, new=False, streamed=False)
        await follower.join()
        try:
            await engine.cancel(CancelRun(run.conversation_id))
            async with asyncio.timeout(CANCEL_WAIT_SECONDS):
                await follower.to_rest()  # to the run's complete
        except TimeoutError:
            pass  # answered as the log has it now
        finally:
            await follower.aclose()
        return render.task()

    @validate_request_params
    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[StreamEvent]:
        door = door_of(context)
        _, render, conversation = await _read(door, params.id)
        if render.finished:
            raise UnsupportedOperationError(message="This task has ended: read it with GetTask.")
        follower = Follower(door, conversation, render, after=render.seen, new=False, streamed=True)
        await follower.join()
        yield render.task()
        async with aclosing(follower.events()) as events:
            async for event in events:
                yield event

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        door = door_of(context)
        skills = await request_db(cards.users_agents)(user=door.user)
        return cards.card(origin=door.origin, profile=door.profile, skills=skills, public=False)

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError
