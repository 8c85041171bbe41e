"""Content-Security-Policy: the page may run only its own scripts and talk only to its own host.

Model and tool output is rendered as sanitised Markdown, and this header is the
second wall: even if markup slipped through, inline script, event-handler
attributes, inline styles, foreign images and foreign connections stay blocked.
"""

from __future__ import annotations

from serving.loop_middleware import InlineMiddleware


def policy_for(request) -> str:
    host = request.get_host()
    # The page's own WebSocket endpoint. Behind a TLS-terminating proxy the request may
    # look plain while the page is https, so a plain request allows both schemes.
    sockets = f"wss://{host}" if request.is_secure() else f"ws://{host} wss://{host}"
    return "; ".join(
        [
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data:",
            "font-src 'self'",
            f"connect-src 'self' {sockets}",
            "media-src 'none'",
            "object-src 'none'",
            "frame-src 'none'",
            "worker-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ]
    )


class ContentSecurityPolicyMiddleware(InlineMiddleware):
    def after(self, request, response):
        # The admin ships inline scripts of its own; it is staff-only and renders no model output as HTML.
        if not request.path.startswith("/admin/"):
            response.headers.setdefault("Content-Security-Policy", policy_for(request))
        return response
