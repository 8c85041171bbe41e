"""Which origins may open a socket (chat.doors.socket.origins, docs/protocol.md, "The WebSocket"): the server's own,
scheme, host and port as the request reached it, or one of ALLOWED_ORIGINS."""

from __future__ import annotations

import pytest
from channels.testing import WebsocketCommunicator
from django.core.checks import run_checks

from agentsite.asgi import application
from chat.doors.socket.origins import normalize_origin, origin_allowed


def scope(origin: str | None, host: str = "chat.example.org", scheme: str = "ws", **headers: str) -> dict:
    pairs = [(b"host", host.encode())] if host else []
    if origin is not None:
        pairs.append((b"origin", origin.encode()))
    pairs += [(name.replace("_", "-").encode(), value.encode()) for name, value in headers.items()]
    return {"type": "websocket", "scheme": scheme, "headers": pairs}


@pytest.fixture(autouse=True)
def hosts(settings):
    settings.ALLOWED_HOSTS = ["chat.example.org", "localhost", "[::1]"]
    settings.ALLOWED_ORIGINS = []
    settings.SECURE_PROXY_SSL_HEADER = None
    settings.USE_X_FORWARDED_HOST = False


@pytest.mark.parametrize(
    "origin, host, scheme, allowed",
    [
        ("http://chat.example.org", "chat.example.org", "ws", True),
        ("HTTP://Chat.Example.ORG", "chat.example.org", "ws", True),
        ("http://chat.example.org:80", "chat.example.org", "ws", True),  # the default port, spelt out
        ("https://chat.example.org", "chat.example.org", "wss", True),
        ("https://chat.example.org", "chat.example.org:443", "wss", True),
        ("http://localhost:8000", "localhost:8000", "ws", True),
        ("http://[::1]:8000", "[::1]:8000", "ws", True),
        # the cases: another port, another scheme
        ("http://localhost:1", "localhost:8000", "ws", False),
        ("http://localhost", "localhost:8000", "ws", False),
        ("https://localhost", "localhost", "ws", False),
        ("http://chat.example.org", "chat.example.org", "wss", False),
        ("https://chat.example.org:8443", "chat.example.org", "wss", False),
        # other sites, malformed origins, a host we do not serve
        ("http://evil.example", "chat.example.org", "ws", False),
        ("http://chat.example.org.evil.example", "chat.example.org", "ws", False),
        ("null", "chat.example.org", "ws", False),
        ("http://chat.example.org/path", "chat.example.org", "ws", False),
        ("http://user@chat.example.org", "chat.example.org", "ws", False),
        ("ftp://chat.example.org", "chat.example.org", "ws", False),
        ("http://chat.example.org:99999", "chat.example.org", "ws", False),
        (None, "chat.example.org", "ws", False),
        ("http://evil.example", "evil.example", "ws", False),  # host not in ALLOWED_HOSTS
        ("http://chat.example.org", "", "ws", False),
    ],
)
def test_the_servers_own_origin_only(origin, host, scheme, allowed):
    assert origin_allowed(scope(origin, host, scheme)) is allowed


def test_allowed_origins_add_exact_origins(settings):
    settings.ALLOWED_ORIGINS = ["https://app.example.org", "http://localhost:5173/"]
    assert origin_allowed(scope("https://app.example.org"))
    assert origin_allowed(scope("http://localhost:5173"))
    assert not origin_allowed(scope("http://app.example.org"))
    assert not origin_allowed(scope("http://localhost:5174"))
    assert not origin_allowed(scope("https://app.example.org", host="evil.example"))  # hosts still apply


def test_behind_a_tls_proxy_the_trusted_forwarded_proto_gives_the_scheme(settings):
    # Without the setting, the header is not trusted: the server was reached over plain ws.
    assert not origin_allowed(scope("https://chat.example.org", x_forwarded_proto="https"))
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    assert origin_allowed(scope("https://chat.example.org", x_forwarded_proto="https"))
    assert origin_allowed(scope("https://chat.example.org", x_forwarded_proto="https, http"))
    assert not origin_allowed(scope("http://chat.example.org", x_forwarded_proto="https"))
    assert not origin_allowed(scope("https://chat.example.org", x_forwarded_proto="http"))


def test_forwarded_host_only_when_trusted(settings):
    forwarded = scope(
        "https://chat.example.org", host="127.0.0.1:8000", scheme="wss", x_forwarded_host="chat.example.org"
    )
    assert not origin_allowed(forwarded)
    settings.USE_X_FORWARDED_HOST = True
    assert origin_allowed(forwarded)


def test_normalize_origin():
    assert normalize_origin("HTTPS://Example.org:443") == "https://example.org"
    assert normalize_origin("http://example.org:8080") == "http://example.org:8080"
    assert normalize_origin("http://[::1]:80") == "http://[::1]"
    assert normalize_origin("example.org") is None


def test_a_malformed_allowed_origin_fails_the_system_checks(settings):
    settings.ALLOWED_ORIGINS = ["https://ok.example.org", "ok.example.org/path"]
    errors = [e for e in run_checks() if e.id == "agentsite.E120"]
    assert len(errors) == 1 and "ok.example.org/path" in errors[0].msg


@pytest.mark.django_db(transaction=True)  # the application's run registry may look at the database
@pytest.mark.parametrize(
    "origin, accepted", [("http://localhost", True), ("http://localhost:1", False), ("https://localhost", False)]
)
async def test_the_application_refuses_other_ports_and_schemes_at_the_handshake(origin, accepted):
    # Anonymous: an accepted handshake is closed 4401 after; a refused one is never accepted.
    comm = WebsocketCommunicator(
        application,
        "/ws/chat/00000000-0000-0000-0000-000000000000/",
        headers=[(b"origin", origin.encode()), (b"host", b"localhost")],
    )
    connected, _ = await comm.connect(timeout=5)
    assert connected is accepted
    await comm.disconnect()
