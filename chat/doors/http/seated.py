"""A streamed answer that holds a place under the user's cap of open streams and sockets
(chat.accounts.sockets): the SSE stream's, and the Responses API door's."""

from __future__ import annotations

from django.http import StreamingHttpResponse

from chat.accounts import sockets


class SeatedResponse(StreamingHttpResponse):
    """A stream that gives its place under the user's cap back when it ends, or when its response
    is closed without having been read (the client went before the first chunk)."""

    def __init__(self, content, seat: sockets.Seat, **kwargs) -> None:
        super().__init__(content, **kwargs)
        self.seat = seat

    def close(self) -> None:
        super().close()
        self.seat.release()
