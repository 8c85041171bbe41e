"""A stored Event row as the frame it stands for, built from its columns (apart from the readers
of chat.eventlog.reads, so that a test compares them with an independent reading)."""

from __future__ import annotations

from chat.eventlog.frames import EventFrame, event_frame, frame_time
from chat.models import Event


def stored_frame(event: Event) -> EventFrame:
    return event_frame(event.payload, seq=event.seq, run_id=event.run_id, ts=frame_time(event.created_at))
