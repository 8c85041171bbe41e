"""The JSON exports streamed (docs/protocol.md, "Export and import"): one conversation's file,
and the whole account's.

Both were built whole, every frame of every conversation in memory, then their JSON, then
handed to the server at once: an account of long conversations held hundreds of MB per request
in the server, and a client that asked and did not read kept them there. Here the same files
are written a page of frames at a time (chat.doors.api.event_pages), each page read once the one
before has been handed over, so that a request holds one page and what its client has not read
yet (serving.send_buffer). The Markdown transcript follows the conversation's versions, a
tree read from all its frames, and is still built whole.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

import orjson
from django.http import StreamingHttpResponse
from django.utils.http import content_disposition_header

from chat.conversations.export import conversation_fields
from chat.doors.api.event_pages import frame_json, frame_pages


def export_response(body: AsyncIterator[bytes], *, filename: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse(body, content_type="application/json")
    # Django's header: a quoted ASCII name, or RFC 5987 `filename*` (UTF-8) for any other.
    response["Content-Disposition"] = content_disposition_header(True, filename)
    return response


async def conversation_body(conversation) -> AsyncIterator[bytes]:
    """`{"conversation": {...}, "events": [...]}`, a frame a line."""
    yield _head(conversation)
    head = b"\n"
    async for frames in frame_pages(conversation.pk):
        yield head + b",\n".join(frame_json(frame) for frame in frames)
        head = b",\n"
    yield b"\n]}\n"


async def account_body(conversations: Iterable[tuple[Any, set[str]]]) -> AsyncIterator[bytes]:
    """`{"conversations": [<a conversation's file>, ...]}`: each conversation up to its run still
    in progress (it has no end to import), and none with nothing finished in it."""
    yield b'{"conversations": ['
    first = True
    for conversation, running_run_ids in conversations:
        head = (b"\n" if first else b",\n") + _head(conversation) + b"\n"
        async for frames in _finished_pages(conversation.pk, running_run_ids):
            yield head + b",\n".join(frame_json(frame) for frame in frames)
            head, first = b",\n", False
        if head == b",\n":  # something was written: the conversation is closed
            yield b"\n]}"
    yield b"\n]}\n"


def _head(conversation) -> bytes:
    return b'{"conversation": ' + orjson.dumps(conversation_fields(conversation)) + b', "events": ['


async def _finished_pages(conversation_id, running_run_ids: set[str]) -> AsyncIterator[list[dict[str, Any]]]:
    """The pages of the conversation before its run still running (a conversation runs one run
    at a time, its last)."""
    pages = frame_pages(conversation_id)
    try:
        async for frames in pages:
            for index, frame in enumerate(frames):
                if str(frame["runId"]) in running_run_ids:
                    if index:
                        yield frames[:index]
                    return
            yield frames
    finally:
        await pages.aclose()
