"""`GET /api/conversations/<id>/events/` streamed: the whole history, but page by page.

The body was built whole, every frame of the conversation in memory and then its JSON, and
handed to the server at once: a client that asked and did not read held all of it in the
server (ten thousand events: megabytes a request; 551 MB for a few dozen such requests). Here
the same body, `{"events": [...]}`, is written a page of frames at a time, each page read from
the database when the one before has been handed over; the server's send waits while the client
has not taken what it holds (serving.send_buffer), so a client that does not read holds at
most that and one page. The JSON exports are written the same way (chat.doors.api.export_streams).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from django.http import StreamingHttpResponse

from chat.agent.text import clean_value
from chat.eventlog.reads import events_after

# Frames read, and held, at once by one request.
PAGE = 100


def events_response(*, conversation_id, after: int) -> StreamingHttpResponse:
    return StreamingHttpResponse(_events_body(conversation_id, after), content_type="application/json")


def frame_json(frame: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(frame)
    except TypeError:  # a surrogate stored before text was cleaned on the way in, as on the socket
        return orjson.dumps(clean_value(frame))


async def frame_pages(conversation_id, *, after: int = 0) -> AsyncIterator[list[dict[str, Any]]]:
    """The conversation's frames after `after`, PAGE at a time, each read once the one before
    has been handed over."""
    # The request's own thread (thread-sensitive), as the view's queries: its connection.
    page = sync_to_async(events_after)
    while True:
        frames = await page(conversation_id=conversation_id, after=after, limit=PAGE)
        if frames:
            yield frames
            after = frames[-1]["seq"]
        if len(frames) < PAGE:
            return


async def _events_body(conversation_id, after: int) -> AsyncIterator[bytes]:
    head = b'{"events":['
    async for frames in frame_pages(conversation_id, after=after):
        yield head + b",".join(frame_json(frame) for frame in frames)
        head = b","
    yield b"]}" if head == b"," else head + b"]}"
