"""EventSink: a run's events -> coalesced batches -> rows -> doorbell.

Model chunks arrive 50-300 a second. Text and thinking deltas are merged for
AGENT_STREAM_FLUSH_MS, so rows, group_send calls and frames grow with time,
not with tokens; any other event flushes at once, keeping the order. A batch
is published only after its transaction commits: a frame a client received is
always in the database.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.utils import timezone

from . import services

logger = logging.getLogger(__name__)

DELTA_TYPES = frozenset({"text", "thinking"})


def conversation_group(conversation_id) -> str:
    return f"conversation.{conversation_id}"


async def publish(conversation_id, frames: list[dict[str, Any]]) -> None:
    """Ring the doorbell of every socket of the conversation; the frames ride along so that
    a socket that has seen everything before them needs no query."""
    if not frames:
        return
    try:
        await get_channel_layer().group_send(
            conversation_group(conversation_id), {"type": "chat.events", "events": frames}
        )
    except Exception:  # the layer is best effort; sockets fill gaps from the database
        logger.warning("group_send failed for conversation %s", conversation_id, exc_info=True)


class EventSink:
    def __init__(self, *, conversation_id, run_id, flush_seconds: float):
        self.conversation_id = conversation_id
        self.run_id = run_id
        self.flush_seconds = flush_seconds
        self._pending: list[dict[str, Any]] = []
        self._records: list[services.ToolRecordData] = []
        self._tool_arguments: dict[str, str] = {}
        self._lock = asyncio.Lock()
        self._timer: asyncio.Task | None = None
        self.events_written = 0
        self.batches_written = 0

    async def add(self, payload: dict[str, Any], *, outcome: services.RunOutcome | None = None) -> None:
        kind = payload["type"]
        if kind in DELTA_TYPES:
            last = self._pending[-1] if self._pending else None
            if last is not None and last["type"] == kind:
                last["content"] += payload["content"]
            else:
                self._pending.append(dict(payload))
            if self.flush_seconds <= 0:
                await self.flush()
            elif self._timer is None:
                self._timer = asyncio.create_task(self._flush_later())
            return
        if kind == "tool_start":
            self._tool_arguments[payload["toolCallId"]] = payload["arguments"]
        elif kind == "tool_end":
            self._records.append(self._record(payload))
        self._pending.append(payload)
        await self.flush(outcome=outcome)

    def _record(self, payload: dict[str, Any]) -> services.ToolRecordData:
        duration = int(payload.get("durationMs", 0))
        return services.ToolRecordData(
            tool_call_id=payload["toolCallId"],
            tool_name=payload["toolName"],
            arguments=self._tool_arguments.pop(payload["toolCallId"], ""),
            result=payload["result"],
            is_error=bool(payload["isError"]),
            started_at=timezone.now() - timedelta(milliseconds=duration),
            duration_ms=duration,
        )

    async def _flush_later(self) -> None:
        await asyncio.sleep(self.flush_seconds)
        self._timer = None
        await self.flush()

    async def flush(self, *, outcome: services.RunOutcome | None = None) -> None:
        async with self._lock:
            if self._timer is not None and self._timer is not asyncio.current_task():
                self._timer.cancel()
                self._timer = None
            batch, self._pending = self._pending, []
            records, self._records = self._records, []
            if not batch:
                return
            frames = await sync_to_async(services.events_append)(
                conversation_id=self.conversation_id,
                run_id=self.run_id,
                payloads=batch,
                tool_records=records,
                outcome=outcome,
            )
            self.events_written += len(frames)
            self.batches_written += 1
            await publish(self.conversation_id, frames)
