"""Where a form sends the browser back to (`next`): only a place on this site, never a URL
another site could make a link of (an open redirect)."""

from __future__ import annotations

from django.utils.http import url_has_allowed_host_and_scheme


def safe_next(request, target: str) -> str | None:
    """`target` when it is a place on this site to send the browser to; None otherwise."""
    allowed = url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return target if target and allowed else None
