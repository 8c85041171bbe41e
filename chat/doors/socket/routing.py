"""Where a WebSocket goes: `ws/chat/<uuid>/` to the chat consumer, `ws/notifications/` to the bell
(chat.doors.socket.bell); any other path is refused.

In place of Channels' URLRouter and `as_asgi()`: each is a coroutine awaiting the next, so their
frames, and URLRouter's copy of the scope with the route added, lived as long as each socket
(~1.5 KiB of an idle socket, `python -m bench.socket_memory`). SocketRouter matches the same
Django patterns, makes the consumer with the route's values (as `as_asgi` makes it with its
init arguments) and hands back its coroutine from a plain call, the scope as it came. A path
no pattern matches is refused at the handshake (403), where URLRouter raised (an error logged
with a traceback for any client's typo).
"""

from __future__ import annotations

from channels.security.websocket import WebsocketDenier
from django.urls import path

from chat.doors.socket.bell import BellConsumer
from chat.doors.socket.consumers import ChatConsumer

websocket_urlpatterns = [
    path("ws/chat/<uuid:conversation_id>/", ChatConsumer),
    path("ws/notifications/", BellConsumer),
]


class SocketRouter:
    """Routes of consumer classes: each made with its route's keyword values."""

    _asgi_single_callable = True  # a plain call handing back the consumer's coroutine

    def __init__(self, routes) -> None:
        self.routes = routes

    def __call__(self, scope, receive, send):
        path, root_path = scope["path"], scope.get("root_path", "")
        if root_path and not path.startswith(root_path):
            return WebsocketDenier()(scope, receive, send)
        path = path[len(root_path) :].lstrip("/")  # as URLRouter and Django's resolver
        for route in self.routes:
            match = route.pattern.match(path)
            if match:
                _, _, kwargs = match
                return route.callback(**kwargs, **route.default_args)(scope, receive, send)
        return WebsocketDenier()(scope, receive, send)
