"""A schedule's `webhookUrl` checked when it is saved, and its secret (docs/protocol.md,
"Schedules"). The secret is shown once and kept encrypted with a key derived from SECRET_KEY: a
copy of the database alone makes no valid signature. The deliveries themselves are not built yet."""

from __future__ import annotations

import base64
import secrets
import socket
from urllib.parse import urlsplit

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.utils.crypto import salted_hmac

from chat.tools.netguard import AddressRefused, classify, parse_ip

URL_MAX = 2000
SECRET_PREFIX = "whsec_"


class WebhookRefused(ValueError):
    pass


def _fernet() -> Fernet:
    key = salted_hmac("agentsite.schedule-webhook-secret", "", algorithm="sha256").digest()
    return Fernet(base64.urlsafe_b64encode(key))


def secret_new() -> tuple[str, str]:
    """A new secret: (its value, shown once; what is stored)."""
    value = SECRET_PREFIX + secrets.token_urlsafe(32)
    return value, secret_sealed(value)


def secret_sealed(value: str) -> str:
    """A secret as it is stored: encrypted with a key derived from SECRET_KEY (a trigger's too)."""
    return _fernet().encrypt(value.encode()).decode()


def secret_value(stored: str) -> str | None:
    """The secret a stored one holds (None: none, or one sealed under another SECRET_KEY)."""
    if not stored:
        return None
    try:
        return _fernet().decrypt(stored.encode()).decode()
    except InvalidToken:
        return None


def _refusal(host: str) -> str | None:
    """Why the host is not public (None: it is, as far as can be told now)."""
    if host.lower().rstrip(".") == "localhost" or host.lower().rstrip(".").endswith(".localhost"):
        return "a loopback name"
    try:
        literal = parse_ip(host)
    except AddressRefused as exc:
        return str(exc)
    if literal is not None:
        return classify(literal)
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return None  # not resolvable now: checked again at every connection
    for info in found:
        address = parse_ip(str(info[4][0]))
        if address is not None and (reason := classify(address)):
            return reason
    return None


def webhook_url_checked(value) -> str | None:
    """The URL if the protocol takes it (None: no webhook); else WebhookRefused."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > URL_MAX:
        raise WebhookRefused(f"webhookUrl must be an http or https URL of at most {URL_MAX} characters, or null")
    try:
        parts = urlsplit(value)
        host = parts.hostname or ""
    except ValueError:
        raise WebhookRefused("webhookUrl is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not host:
        raise WebhookRefused("webhookUrl must be an http or https URL")
    if not settings.AGENT_WEBHOOK_ALLOW_PRIVATE and (reason := _refusal(host)):
        raise WebhookRefused(f"webhookUrl must reach a public host, not {reason}")
    return value
