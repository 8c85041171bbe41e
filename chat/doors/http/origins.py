"""The server's own origin and ALLOWED_ORIGINS, the pages that may open a WebSocket
(chat.doors.socket.origins) or call the MCP server (chat.doors.mcp_server.gate): the origin must
be the server's own exactly, scheme, host and port as the request reached it (the scheme from the
proxy's forwarded-proto header when SECURE_PROXY_SSL_HEADER trusts one, the host from
X-Forwarded-Host when USE_X_FORWARDED_HOST does, as Django reads them for HTTP), or one of
ALLOWED_ORIGINS."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}


def normalize_origin(value: str) -> str | None:
    """`scheme://host[:port]` lower-cased, the scheme's default port left out; None if it is
    not a plain http(s) origin (a path, credentials, `null`, garbage)."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "")
    if scheme not in DEFAULT_PORTS or not host or parts.username is not None or parts.password is not None:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return None
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}" if port in (None, DEFAULT_PORTS[scheme]) else f"{scheme}://{host}:{port}"


def _header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _scheme(scope) -> str:
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        meta_name, secure_value = proxy
        value = _header(scope, meta_name.removeprefix("HTTP_").replace("_", "-").lower().encode())
        if value is not None:
            return "https" if value.split(",", 1)[0].strip() == secure_value else "http"
    return "https" if scope.get("scheme") in ("wss", "https") else "http"


def _host(scope) -> str | None:
    if getattr(settings, "USE_X_FORWARDED_HOST", False):
        forwarded = _header(scope, b"x-forwarded-host")
        if forwarded:
            return forwarded.split(",", 1)[0].strip()
    return _header(scope, b"host")


def _allowed_hosts() -> list[str]:
    # As Django's HttpRequest.get_host: with DEBUG and no ALLOWED_HOSTS, local names only.
    if settings.DEBUG and not settings.ALLOWED_HOSTS:
        return [".localhost", "127.0.0.1", "[::1]"]
    return settings.ALLOWED_HOSTS


def host_allowed(scope) -> bool:
    """The host the request reached is one of ALLOWED_HOSTS."""
    host = _host(scope)
    if not host:
        return False
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, _allowed_hosts())


def origin_allowed(scope) -> bool:
    origin = _header(scope, b"origin")
    host = _host(scope)
    if origin is None or not host or not host_allowed(scope):
        return False
    own = normalize_origin(f"{_scheme(scope)}://{host}")
    requested = normalize_origin(origin)
    if requested is None:
        return False
    return requested == own or requested in {normalize_origin(o) for o in settings.ALLOWED_ORIGINS}
