"""`GET /api/conversations/<id>/events/` streamed: the whole history, but page by page.

The body was built whole, every frame of the conversation in memory and then its JSON, and
handed to the server at once: a client that asked and did not read held all of it in the
server (ten thousand events: megabytes a request; 551 MB for a few dozen such requests). Here
the same body, `{"events": [...]}`, is written a page of frames at a time, each page read from
the database when the one before has been handed over; the server's send waits while the client
has not taken what it holds (agentsite.send_buffer), so a client that does not read holds at
most that and one page.
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


def _json(frame: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(frame)
    except TypeError:  # a surrogate stored before text was cleaned on the way in, as on the socket
        return orjson.dumps(clean_value(frame))


async def _events_body(conversation_id, after: int) -> AsyncIterator[bytes]:
    # The request's own thread (thread-sensitive), as the view's queries: its connection.
    page = sync_to_async(events_after)
    head = b'{"events":['
    while True:
        frames = await page(conversation_id=conversation_id, after=after, limit=PAGE)
        if frames:
            yield head + b",".join(_json(frame) for frame in frames)
            head, after = b",", frames[-1]["seq"]
        if len(frames) < PAGE:
            break
    yield b"]}" if head == b"," else head + b"]}"
