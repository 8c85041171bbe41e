"""fetch_url and its guard: the hostile URL corpus, redirects re-checked hop by hop, limits, HTML to text.

The only server ever contacted is a local one on 127.0.0.1, reached through the operator
allow-list (AGENT_FETCH_ALLOWED_HOSTS). Every refusal is checked to happen before any connection.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpcore2
import pytest

from chat.agent.tools import ToolError
from chat.tools import netguard
from chat.tools.fetch import fetch_url, html_to_text

from .helpers import configure
from .hostile_urls import ADDRESSES, SCHEMES

PAGE = b"""<!doctype html><html><head><title>Test  page</title><style>body{color:red}</style>
<script>var secret = "do not show";</script></head>
<body><nav>menu</nav><h1>Hello &amp; welcome</h1><p>First paragraph.</p>
<ul><li>one</li><li>two</li></ul><noscript>enable js</noscript></body></html>"""


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        self.server.requests.append(self.path)
        route, _, query = self.path.partition("?")
        if route == "/page":
            self._send(200, "text/html; charset=utf-8", PAGE)
        elif route == "/redirect":
            self.send_response(302)
            self.send_header("Location", query.removeprefix("to="))
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif route == "/loop":
            self.send_response(301)
            self.send_header("Location", "/loop")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif route == "/big":
            self._send(200, "text/plain", b"x" * 50_000)
        elif route == "/binary":
            self._send(200, "image/png", b"\x89PNG\r\n")
        elif route == "/slow":
            time.sleep(3)
            self._send(200, "text/plain", b"late")
        else:
            self._send(404, "text/plain", b"not here")

    def _send(self, status, content_type, body):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def site():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()


@pytest.fixture
def base(site):
    site.requests.clear()
    return f"http://127.0.0.1:{site.server_address[1]}"


@pytest.fixture
def connections(monkeypatch):
    """Every address a socket is opened to, through the guarded backend."""
    seen: list[str] = []
    original = httpcore2.AnyIOBackend.connect_tcp

    async def spy(self, host, port, *args, **kwargs):
        seen.append(host)
        return await original(self, host, port, *args, **kwargs)

    monkeypatch.setattr(httpcore2.AnyIOBackend, "connect_tcp", spy)
    return seen


@pytest.fixture
def allow_local(context):
    configure(context, fetch={"allowed_hosts": ("127.0.0.1",)})
    return context


# --- the corpus -----------------------------------------------------------------------------


@pytest.mark.parametrize("url, message", SCHEMES + ADDRESSES, ids=[u for u, _ in SCHEMES + ADDRESSES])
async def test_hostile_urls_are_refused_before_connecting(context, connections, url, message):
    with pytest.raises(ToolError, match=message):
        await fetch_url(url, context)
    assert connections == []


@pytest.mark.parametrize("url, message", ADDRESSES, ids=[u for u, _ in ADDRESSES])
async def test_the_transport_refuses_them_too(url, message, connections):
    """The connect-time check alone (no pre-check), as a redirect hop or a raw client would meet it."""
    import httpx2

    transport = netguard.GuardedTransport(netguard.FetchPolicy())
    async with httpx2.AsyncClient(transport=transport) as client:
        try:
            target = httpx2.URL(url)
        except Exception:
            target = None  # refused by the URL parser already: it can never reach the transport
        if target is not None:
            with pytest.raises(ToolError, match=message):
                await client.get(target)
    assert connections == []


@pytest.mark.parametrize(
    "target",
    [
        "http://10.0.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://metadata.example/",
        "http://[fd00::1]/",
        "http://0xa9fea9fe/",
        "http://[::ffff:10.0.0.1]/",
        "http://100.64.0.1/",
        "file:///etc/passwd",
    ],
)
async def test_redirect_from_an_allowed_host_to_a_refused_one(allow_local, base, site, connections, target):
    with pytest.raises(ToolError) as caught:
        await fetch_url(f"{base}/redirect?to={target}", allow_local)
    assert "refused" in str(caught.value)
    assert site.requests == [f"/redirect?to={target}"]  # the first hop happened
    assert connections == ["127.0.0.1"]  # and nothing was opened for the second


async def test_redirect_to_loopback_port_is_refused_without_allow_list_for_the_target(context, connections):
    configure(context, fetch={"allowed_hosts": ("intranet-only.example",)})
    with pytest.raises(ToolError, match="loopback"):
        await fetch_url("http://127.0.0.1:1/", context)
    assert connections == []


async def test_dns_rebinding_cannot_swap_the_address(allow_local, monkeypatch, connections):
    """The name is resolved once per connection and the socket goes to the checked address."""
    answers = iter([["93.184.215.14"], ["127.0.0.1"]])  # first public, then "rebound" to loopback

    async def rebinding(host, port):
        return next(answers)

    monkeypatch.setattr(netguard, "resolve", rebinding)
    policy = netguard.FetchPolicy()
    assert await policy.addresses("rebind.test", 80) == ["93.184.215.14"]
    with pytest.raises(ToolError, match="loopback"):
        await policy.addresses("rebind.test", 80)


async def test_backend_connects_to_the_checked_address_not_the_name(monkeypatch, connections, site):
    async def resolve(host, port):
        return ["127.0.0.1"]

    monkeypatch.setattr(netguard, "resolve", resolve)
    backend = netguard.GuardedBackend(netguard.FetchPolicy(["some.internal"]))
    stream = await backend.connect_tcp("some.internal", site.server_address[1])
    await stream.aclose()
    assert connections == ["127.0.0.1"]


# --- limits and the happy path -----------------------------------------------------------


async def test_fetch_page_as_text(allow_local, base):
    result = await fetch_url(f"{base}/page", allow_local)
    assert f"URL: {base}/page" in result and "Status: 200" in result and "Title: Test page" in result
    assert "# Hello & welcome" in result and "First paragraph." in result and "- one" in result
    assert "do not show" not in result and "color:red" not in result and "enable js" not in result


async def test_redirects_are_followed_and_capped(allow_local, base, site):
    result = await fetch_url(f"{base}/redirect?to=/page", allow_local)
    assert "First paragraph." in result and f"URL: {base}/page" in result
    configure(allow_local, fetch={"max_redirects": 3})
    with pytest.raises(ToolError, match="too many redirects"):
        await fetch_url(f"{base}/loop", allow_local)
    assert site.requests.count("/loop") == 4


async def test_size_cap(allow_local, base):
    configure(allow_local, fetch={"max_bytes": 1000})
    result = await fetch_url(f"{base}/big", allow_local)
    assert result.count("x") == 1000 and "[... truncated" in result


async def test_time_cap(allow_local, base):
    configure(allow_local, fetch={"timeout": 0.5})
    started = time.monotonic()
    with pytest.raises(ToolError, match="timed out|longer than"):
        await fetch_url(f"{base}/slow", allow_local)
    assert time.monotonic() - started < 2


async def test_binary_content_refused(allow_local, base):
    with pytest.raises(ToolError, match="image/png, not text"):
        await fetch_url(f"{base}/binary", allow_local)


async def test_invalid_url(context):
    with pytest.raises(ToolError, match="not a valid URL|only http and https|no host"):
        await fetch_url("http://", context)


def test_allow_list_by_network():
    policy = netguard.FetchPolicy(["10.1.0.0/16", "Intranet.Example."])
    policy.check_address("x", ipaddress.ip_address("10.1.2.3"))
    assert policy.name_allowed("intranet.example")
    with pytest.raises(ToolError, match="private"):
        policy.check_address("x", ipaddress.ip_address("10.2.0.1"))


def test_html_to_text():
    title, text = html_to_text(PAGE.decode())
    assert title == "Test page"
    assert text.splitlines()[0] == "menu"
