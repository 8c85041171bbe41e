"""Which pages may open a WebSocket (docs/protocol.md, "The WebSocket").

Browsers send cookies with a WebSocket handshake from any site, so the Origin header is
what stops another page from using the visitor's session (cross-site WebSocket
hijacking). Channels' AllowedHostsOriginValidator compares the origin's host with
ALLOWED_HOSTS only, so `http://127.0.0.1:1` (any other port on the host, another
program) and `https://localhost` passed. Here the origin must be the server's own
exactly, scheme, host and port as the request reached it (the scheme from the proxy's
forwarded-proto header when SECURE_PROXY_SSL_HEADER trusts one, the host from
X-Forwarded-Host when USE_X_FORWARDED_HOST does, as Django reads them for HTTP), or one
of ALLOWED_ORIGINS.
"""

from __future__ import annotations

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.core.checks import Error, register

from chat.doors.http.origins import normalize_origin, origin_allowed

__all__ = ["OriginValidator", "normalize_origin", "origin_allowed"]


def _has_bearer(scope) -> bool:
    header = dict(scope.get("headers") or []).get(b"authorization", b"")
    return header[:7].lower() == b"bearer "


class OriginValidator:
    """ASGI middleware: a WebSocket handshake from any other origin is refused (HTTP 403)."""

    # A plain call handing back the inner application's coroutine (chat.runtime.lifecycle): no
    # frame of this check lives as long as each socket.
    _asgi_single_callable = True

    def __init__(self, application):
        self.application = application

    def __call__(self, scope, receive, send):
        # A handshake with `Authorization: Bearer` is a program's, not a page's: browsers cannot
        # set that header on a WebSocket, and such a handshake never signs in with the cookie
        # (chat.doors.socket.credentials), so there is no session for another site to ride.
        if scope["type"] == "websocket" and not _has_bearer(scope) and not origin_allowed(scope):
            return WebsocketDenier()(scope, receive, send)
        return self.application(scope, receive, send)


@register()
def check_allowed_origins(app_configs, **kwargs):
    return [
        Error(
            f"ALLOWED_ORIGINS: {origin!r} is not an origin of the form scheme://host[:port].",
            hint="For example https://chat.example.org or http://localhost:8000.",
            id="agentsite.E120",
        )
        for origin in getattr(settings, "ALLOWED_ORIGINS", [])
        if normalize_origin(origin) is None
    ]
