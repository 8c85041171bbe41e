"""/healthz is answered whatever the Host header names.

Kubernetes' HTTP probes send the pod's address as Host, and so does a container's own
HEALTHCHECK (127.0.0.1 inside the container): neither is in ALLOWED_HOSTS, and Django refuses
such a request (400, DisallowedHost) as soon as anything asks for the host. The health answer
builds nothing from the host (no link, no cookie, no redirect: SECURE_REDIRECT_EXEMPT keeps it on
plain HTTP), so a GET or HEAD of /healthz with a host that is not allowed is served as if it named
the first allowed one. Every other path still refuses an unknown host.
"""

from __future__ import annotations

from django.conf import settings
from django.http.request import split_domain_port, validate_host

from serving.loop_middleware import InlineMiddleware

PROBE_PATH = "/healthz"


def allowed_stand_in(allowed: list[str]) -> str | None:
    """A host name that ALLOWED_HOSTS accepts: its first entry, a `.example.com` pattern as
    `example.com`; None when it names none (an empty list)."""
    for entry in allowed:
        name = "localhost" if entry == "*" else entry.lstrip(".")
        if name and validate_host(name, allowed):
            return name
    return None


class ProbeAnyHostMiddleware(InlineMiddleware):
    def before(self, request):
        if request.path_info != PROBE_PATH or request.method not in ("GET", "HEAD"):
            return None
        meta = request.META
        domain, _port = split_domain_port(meta.get("HTTP_HOST") or meta.get("SERVER_NAME", ""))
        allowed = settings.ALLOWED_HOSTS
        if domain and validate_host(domain, allowed):
            return None
        stand_in = allowed_stand_in(allowed)
        if stand_in is not None:
            meta["HTTP_HOST"] = stand_in
            meta.pop("HTTP_X_FORWARDED_HOST", None)
        return None
