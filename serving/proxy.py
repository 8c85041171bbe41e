"""The client's address and scheme behind a reverse proxy, believed from trusted proxies only.

daphne sees the proxy as the peer (REMOTE_ADDR). The proxy says who the client is in
X-Forwarded-For and whether it came over HTTPS in X-Forwarded-Proto, but anyone can send
those headers: they are believed only when the peer is one of TRUSTED_PROXIES, and are
removed from every other request, so that nothing further down (SECURE_PROXY_SSL_HEADER,
the sign-in lockout, the sign-up limit, logs) can be fooled by a client that reaches the
server directly. (django-ipware, axes' optional helper, decides from the header's
content instead of from who sent it, which is why this is not left to it.)
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from django.conf import settings

from serving.loop_middleware import InlineMiddleware

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=4)
def _networks(entries: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in entries)


def _trusted(address: str, networks: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


def forwarded_client(peer: str, forwarded_for: str, networks: tuple[Network, ...]) -> str:
    """The client: walking X-Forwarded-For from the right (each proxy appends the address it
    saw), the first address that is not a trusted proxy. The entries to its left were written
    by the client itself and prove nothing."""
    address = peer
    for entry in reversed([item.strip() for item in forwarded_for.split(",") if item.strip()]):
        if not _trusted(address, networks):
            break
        try:
            address = str(ipaddress.ip_address(entry))
        except ValueError:
            break  # garbage from a client: the last address we could vouch for stands
    return address


class TrustedProxyMiddleware(InlineMiddleware):
    def before(self, request):
        meta = request.META
        networks = _networks(tuple(settings.TRUSTED_PROXIES))
        peer = meta.get("REMOTE_ADDR", "")
        if networks and _trusted(peer, networks):
            meta["REMOTE_ADDR"] = forwarded_client(peer, meta.get("HTTP_X_FORWARDED_FOR", ""), networks)
        else:
            meta.pop("HTTP_X_FORWARDED_FOR", None)
            meta.pop("HTTP_X_FORWARDED_PROTO", None)
        return None


def client_address(request) -> str | None:
    """The client's address (set by TrustedProxyMiddleware); django-axes' AXES_CLIENT_IP_CALLABLE."""
    return request.META.get("REMOTE_ADDR")


def socket_client_address(scope) -> str:
    """A WebSocket handshake's client address, believed from TRUSTED_PROXIES as for HTTP (behind
    nginx, the peer is the proxy: counting failures by it would hold back every client at once)."""
    peer = (scope.get("client") or ("",))[0] or ""
    networks = _networks(tuple(settings.TRUSTED_PROXIES))
    if networks and _trusted(peer, networks):
        forwarded = dict(scope.get("headers") or []).get(b"x-forwarded-for", b"").decode("latin-1")
        return forwarded_client(peer, forwarded, networks)
    return peer
