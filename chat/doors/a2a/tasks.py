"""A run as an A2A Task, rendered from its stored events alone (docs/protocol.md, "A2A agent"):
the same events give the same Task whether they are read back (GetTask, ListTasks, the first
event of SubscribeToTask) or followed live (the streams), and each event followed gives the
stream events A2A sends for it. The answer is chat.agent.answer's (the text after the last
failed attempt), so the artifact always ends as the stored answer."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from a2a.types.a2a_pb2 import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.struct_pb2 import Struct, Value
from google.protobuf.timestamp_pb2 import Timestamp

from chat.agent.answer import Answer

ANSWER_ID = "answer"
# A run's `complete` status as the Task's final state.
FINAL_STATES = {
    "succeeded": TaskState.TASK_STATE_COMPLETED,
    "failed": TaskState.TASK_STATE_FAILED,
    "interrupted": TaskState.TASK_STATE_FAILED,
    "cancelled": TaskState.TASK_STATE_CANCELED,
}
FINISHED = frozenset(FINAL_STATES.values())

StreamEvent = Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent


def _timestamp(ts: str | None) -> Timestamp | None:
    if not ts:
        return None
    stamp = Timestamp()
    stamp.FromJsonString(ts)
    return stamp


def _seq_metadata(seq: int) -> Struct:
    metadata = Struct()
    metadata.update({"seq": seq})
    return metadata


def _text(text: str) -> Part:
    return Part(text=text)


class TaskRender:
    """Follows one run's events in seq order (other runs' are left out): its state, its answer,
    its open approval requests, and the stream events each event makes."""

    def __init__(self, *, run_id: str, context_id: str):
        self.run_id, self.context_id = str(run_id), str(context_id)
        self.state = TaskState.TASK_STATE_SUBMITTED
        self.state_ts: str | None = None
        self.status_text = ""
        self.status_data: dict[str, Any] | None = None
        self.status_seq: int | None = None
        self.answer = Answer()
        self.user_text: str | None = None
        self.message_id = ""
        self.last_error: Mapping[str, Any] | None = None
        self.open: dict[str, Mapping[str, Any]] = {}  # approval requests not answered yet, by toolCallId
        self.complete: Mapping[str, Any] | None = None
        self._replace = False  # a failed attempt's text was taken out: the next chunk replaces the artifact
        self.seen = 0  # the last seq followed: an event read twice (the log, then live) counts once

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    @property
    def waiting(self) -> bool:
        return self.state == TaskState.TASK_STATE_INPUT_REQUIRED

    def add(self, frame: Mapping[str, Any]) -> list[StreamEvent]:
        """Follow one more event of the conversation; the stream events it makes for this run (for
        its user_message, the Task: a stream's first event)."""
        seq = frame.get("seq")
        if seq is None or seq <= self.seen or str(frame.get("runId")) != self.run_id:
            return []
        self.seen = seq
        kind = frame.get("type")
        before = self.answer.text
        if self.answer.add(frame) and kind == "error":
            self._replace = True
        if kind == "user_message":
            self.user_text = frame.get("content", "")
            recorded = frame.get("request") or {}
            self.message_id = str(recorded.get("messageId") or f"{self.context_id}:{seq}")
            self._set(TaskState.TASK_STATE_WORKING, frame)
            return [self.task()]
        if kind == "text":
            return [self._chunk(frame, before)]
        if kind == "error":
            self.last_error = frame
            return []
        if kind in ("tool_start", "tool_end"):
            name = frame.get("toolName", "")
            if kind == "tool_start":
                words = f"calling {name}"
            else:
                words = f"{name} failed" if frame.get("isError") else f"{name} done"
            self._set(self.state if self.open else TaskState.TASK_STATE_WORKING, frame, words)
            return [self._status_update(frame)]
        if kind == "approval_request":
            self.open[frame["toolCallId"]] = frame
            self._set_waiting(frame)
            return [self._status_update(frame)]
        if kind == "approval_result":
            self.open.pop(frame.get("toolCallId", ""), None)
            if self.open:
                self._set_waiting(next(reversed(self.open.values())))
            else:
                self._set(TaskState.TASK_STATE_WORKING, frame)
            return []
        if kind == "complete":
            self.complete = frame
            self.open.clear()
            out: list[StreamEvent] = []
            if self._replace:  # the failed attempt's text is still in a follower's artifact
                out.append(self._artifact_update(self.answer.text, append=False, seq=seq))
                self._replace = False
            words = ""
            if frame.get("status") in ("failed", "interrupted") and self.last_error is not None:
                words = f"{self.last_error.get('code')}: {self.last_error.get('message')}"
            self._set(FINAL_STATES.get(frame.get("status", ""), TaskState.TASK_STATE_FAILED), frame, words)
            return [*out, self._status_update(frame)]
        return []

    def _set(self, state: int, frame: Mapping[str, Any], words: str = "") -> None:
        self.state, self.state_ts, self.status_seq = state, frame.get("ts"), frame.get("seq")
        self.status_text, self.status_data = words, None

    def _set_waiting(self, request: Mapping[str, Any]) -> None:
        self._set(TaskState.TASK_STATE_INPUT_REQUIRED, request, f"{request.get('toolName', '')} needs your approval")
        self.status_data = {
            "approvalRequest": {
                "toolCallId": request.get("toolCallId"),
                "toolName": request.get("toolName"),
                "arguments": request.get("arguments"),
                "expiresAt": request.get("expiresAt"),
            }
        }

    def _chunk(self, frame: Mapping[str, Any], before: str) -> TaskArtifactUpdateEvent:
        """A text event as an artifact chunk: appended to what the follower has, or, for the
        answer's first chunk and the first after a failed attempt, the whole answer so far."""
        if not before or self._replace:
            self._replace = False
            return self._artifact_update(self.answer.text, append=False, seq=frame["seq"])
        return self._artifact_update(frame.get("content", ""), append=True, seq=frame["seq"])

    def _artifact_update(self, text: str, *, append: bool, seq: int) -> TaskArtifactUpdateEvent:
        return TaskArtifactUpdateEvent(
            task_id=self.run_id,
            context_id=self.context_id,
            artifact=Artifact(artifact_id=ANSWER_ID, name=ANSWER_ID, parts=[_text(text)]),
            append=append,
            last_chunk=False,
            metadata=_seq_metadata(seq),
        )

    def _status_message(self) -> Message | None:
        if not self.status_text:
            return None
        parts = [_text(self.status_text)]
        if self.status_data is not None:
            data = Value()
            data.struct_value.update(json.loads(json.dumps(self.status_data)))
            parts.append(Part(data=data))
        return Message(
            message_id=f"{self.run_id}:{self.status_seq}",
            context_id=self.context_id,
            task_id=self.run_id,
            role=Role.ROLE_AGENT,
            parts=parts,
        )

    def status(self) -> TaskStatus:
        status = TaskStatus(state=self.state)
        message = self._status_message()
        if message is not None:
            status.message.CopyFrom(message)
        stamp = _timestamp(self.state_ts)
        if stamp is not None:
            status.timestamp.CopyFrom(stamp)
        return status

    def _status_update(self, frame: Mapping[str, Any]) -> TaskStatusUpdateEvent:
        return TaskStatusUpdateEvent(
            task_id=self.run_id, context_id=self.context_id, status=self.status(), metadata=_seq_metadata(frame["seq"])
        )

    def task(self, *, history_length: int | None = None, artifacts: bool = True) -> Task:
        """The Task as the events followed so far have it; `history_length`: at most that many
        messages of its history (None: all)."""
        task = Task(id=self.run_id, context_id=self.context_id, status=self.status())
        text = self.answer.text
        if artifacts and text:
            task.artifacts.append(Artifact(artifact_id=ANSWER_ID, name=ANSWER_ID, parts=[_text(text)]))
        history = []
        if self.user_text is not None:
            history.append(
                Message(
                    message_id=self.message_id,
                    context_id=self.context_id,
                    task_id=self.run_id,
                    role=Role.ROLE_USER,
                    parts=[_text(self.user_text)],
                )
            )
        if history_length is not None:
            history = history[len(history) - history_length :] if history_length > 0 else []
        task.history.extend(history)
        return task


def rendered(*, run_id, context_id, events) -> TaskRender:
    render = TaskRender(run_id=str(run_id), context_id=str(context_id))
    for frame in events:
        render.add(frame)
    return render
