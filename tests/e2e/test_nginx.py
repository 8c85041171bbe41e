"""The production set-up end to end: Debian's nginx, configured from deploy/'s template, with
TLS in front of two daphnes on PostgreSQL + Redis. Sign-up, a streamed run, a reconnect, the
lockout by forwarded address and logout closing the socket, all through nginx.

nginx runs unprivileged from a temp dir of its own (free ports, its own pid, logs and temp
paths). Each client connects from an address of its own in 127.0.0.0/8 (random per run:
the sign-up counters live in Redis for an hour), so the address nginx forwards differs
per client, while daphne only ever sees nginx at 127.0.0.1.
"""

from __future__ import annotations

import os
import pwd
import random
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx2
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from .conftest import ON_POSTGRES, REDIS_URL
from .harness import (
    PASSWORD,
    ROOT,
    Client,
    Socket,
    answer_text,
    assert_contiguous,
    events_only,
    free_port,
    run_text,
    server_env,
    slow_text_reply,
)

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
TEMPLATE = ROOT / "deploy" / "nginx-agentsite.conf.template"
FAILURE_LIMIT = 3

pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.skipif(not (ON_POSTGRES and REDIS_URL), reason="needs DATABASE_URL=postgres://... and REDIS_URL"),
    pytest.mark.skipif(not os.access(NGINX, os.X_OK), reason="needs Debian's nginx (make test installs it)"),
]

# What the test adds around the site file: the parts Debian's /etc/nginx/nginx.conf holds,
# with every path inside the temp dir, and which daphne served each request in the log.
MAIN_CONF = """\
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 512; }}
http {{
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    log_format upstream '$remote_addr "$request" $status $upstream_addr';
    access_log {d}/access.log upstream;
    client_body_temp_path {d}/temp/body;
    proxy_temp_path {d}/temp/proxy;
    fastcgi_temp_path {d}/temp/fastcgi;
    uwsgi_temp_path {d}/temp/uwsgi;
    scgi_temp_path {d}/temp/scgi;
    include {d}/agentsite.conf;
}}
"""


def render(template: str, values: dict[str, str]) -> str:
    """envsubst restricted to AGENTSITE_* (docs/deployment.md's command), so nginx's $variables stay."""
    text = re.sub(r"\$\{(AGENTSITE_[A-Z0-9_]+)\}", lambda m: values[m.group(1)], template)
    assert not [line for line in text.splitlines() if "${" in line and not line.lstrip().startswith("#")]
    return text


class Nginx:
    def __init__(self, directory: Path, *, daphnes: list[str], static_root: Path, cert: Path, key: Path):
        self.dir = directory
        self.port = free_port()
        self.http_port = free_port()
        (directory / "temp").mkdir()
        (directory / "agentsite.conf").write_text(
            render(
                TEMPLATE.read_text(),
                {
                    "AGENTSITE_SERVER_NAME": "127.0.0.1 localhost",
                    "AGENTSITE_HTTP_LISTEN": f"127.0.0.1:{self.http_port}",
                    "AGENTSITE_HTTPS_LISTEN": f"127.0.0.1:{self.port}",
                    "AGENTSITE_TLS_CERT": str(cert),
                    "AGENTSITE_TLS_KEY": str(key),
                    "AGENTSITE_STATIC_ROOT": str(static_root),
                    "AGENTSITE_DAPHNE_1": daphnes[0],
                    "AGENTSITE_DAPHNE_2": daphnes[1],
                },
            )
        )
        (directory / "nginx.conf").write_text(MAIN_CONF.format(d=directory))
        self.proc: subprocess.Popen | None = None

    @property
    def base(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ws_base(self) -> str:
        return f"wss://127.0.0.1:{self.port}"

    def command(self, *extra: str) -> list[str]:
        return [
            NGINX,
            "-p",
            str(self.dir),
            "-c",
            str(self.dir / "nginx.conf"),
            "-e",
            str(self.dir / "error.log"),
            *extra,
        ]

    def start(self, ssl_context: ssl.SSLContext) -> Nginx:
        # Unprivileged: as root, nginx and its workers run as nobody and own only this folder.
        as_user = {}
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            for path in [self.dir, *self.dir.rglob("*")]:
                os.chown(path, nobody.pw_uid, nobody.pw_gid)
            as_user = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
        check = subprocess.run(self.command("-t"), capture_output=True, text=True, timeout=30, **as_user)
        assert check.returncode == 0, check.stderr
        self.proc = subprocess.Popen(
            self.command("-g", "daemon off;"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **as_user
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log()
            try:
                if httpx2.get(f"{self.base}/healthz", verify=ssl_context, timeout=2).status_code == 200:
                    return self
            except httpx2.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"nginx did not answer in 20 s:\n{self.log()}")

    def log(self) -> str:
        return "\n".join(
            p.read_text(errors="replace")[-3000:]
            for p in (self.dir / "error.log", self.dir / "access.log")
            if p.exists()
        )

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: nginx's fast shutdown
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@pytest.fixture(scope="module")
def tls():
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    return ca, ca.issue_cert("127.0.0.1", "localhost")


@pytest.fixture(scope="module")
def client_tls(tls) -> ssl.SSLContext:
    ca, _cert = tls
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


@pytest.fixture(scope="module")
def proxy_env():
    # The daphnes run with the unit's own Environment= settings (its allocator), as deployed.
    unit = (ROOT / "deploy" / "agentsite@.service").read_text()
    deployed = dict(re.findall(r"^Environment=(\w+)=(.*)$", unit, re.MULTILINE))
    return dict(
        deployed,
        HTTPS="true",
        TRUSTED_PROXIES="127.0.0.1",
        LOGIN_FAILURE_LIMIT=str(FAILURE_LIMIT),
        SIGNUP_RATE_LIMIT="2",
    )


@pytest.fixture(scope="module")
def nginx(databases, make_server, proxy_env, tls, client_tls, e2e_llm):
    database = databases.new()
    daphnes = [make_server(database, name=f"behind-nginx-{n}", **proxy_env) for n in (1, 2)]
    for daphne in daphnes:  # the unit's allocator was found and loaded (make install-test installs it)
        assert re.search(r"/libjemalloc\.so\.2$", Path(f"/proc/{daphne.proc.pid}/maps").read_text(), re.M)
    directory = Path(tempfile.mkdtemp(prefix="agentsite-nginx-"))
    os.chmod(directory, 0o755)
    static_root = directory / "static"
    env = server_env(database_url=database, llm_base_url=e2e_llm.base_url, STATIC_ROOT=str(static_root))
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=120,
    )
    (static_root / "only-in-nginx-root.txt").write_text("served by nginx\n")
    _ca, cert = tls
    cert.private_key_pem.write_to_path(str(directory / "key.pem"))
    for n, blob in enumerate(cert.cert_chain_pems):
        blob.write_to_path(str(directory / "cert.pem"), append=n > 0)
    proxy = Nginx(
        directory,
        daphnes=[f"127.0.0.1:{d.port}" for d in daphnes],
        static_root=static_root,
        cert=directory / "cert.pem",
        key=directory / "key.pem",
    )
    try:
        yield proxy.start(client_tls)
    finally:
        proxy.stop()
        for daphne in daphnes:  # now, not at the session's end: their database connections count
            daphne.stop()
        shutil.rmtree(directory, ignore_errors=True)


_SUBNET = random.randrange(2, 250)  # 127.<this run>.x.y: addresses no earlier run has used


def client_address() -> str:
    return f"127.{_SUBNET}.{random.randrange(0, 256)}.{random.randrange(2, 255)}"


class ProxiedClient(Client):
    """The harness's user, over TLS through nginx, from a loopback address of its own."""

    def __init__(self, proxy: Nginx, context: ssl.SSLContext, address: str | None = None):
        super().__init__(proxy)
        self.address = address or client_address()
        self.context = context
        self.http = httpx2.AsyncClient(
            timeout=20, transport=httpx2.AsyncHTTPTransport(verify=context, local_address=self.address)
        )

    async def socket(self, conversation_id: str, *, after: int | None = None, **_ignored) -> Socket:
        query = f"?after={after}" if after is not None else ""
        ws = await connect(
            f"{self.server.ws_base}/ws/chat/{conversation_id}/{query}",
            ssl=self.context,
            local_addr=(self.address, 0),
            open_timeout=10,
            max_size=None,
            additional_headers={"Origin": self.server.base, "Cookie": self.cookie_header},
        )
        return Socket(ws)

    async def sign_in(self, username: str, password: str, **headers: str) -> httpx2.Response:
        token = await self._form_token("/accounts/login/")
        return await self.http.post(
            self.url("/accounts/login/"),
            data={"csrfmiddlewaretoken": token, "username": username, "password": password},
            headers={"Referer": self.server.base, **headers},
        )


@pytest.fixture
async def new_client(nginx, client_tls):
    clients: list[ProxiedClient] = []

    def make(address: str | None = None) -> ProxiedClient:
        clients.append(ProxiedClient(nginx, client_tls, address))
        return clients[-1]

    yield make
    for client in clients:
        await client.aclose()


async def test_static_files_come_from_nginx_and_plain_http_is_redirected(nginx, client_tls):
    async with httpx2.AsyncClient(verify=client_tls) as http:
        script = await http.get(f"{nginx.base}/static/chat/app.js")
        assert script.status_code == 200
        assert script.content == (ROOT / "static" / "chat" / "app.js").read_bytes()
        assert "javascript" in script.headers["content-type"]
        assert script.headers["x-content-type-options"] == "nosniff"
        # A file that exists in nginx's STATIC_ROOT only: nginx served it, not daphne.
        marker = await http.get(f"{nginx.base}/static/only-in-nginx-root.txt")
        assert marker.status_code == 200 and marker.text == "served by nginx\n"
        plain = await http.get(f"http://127.0.0.1:{nginx.http_port}/accounts/login/")
        assert plain.status_code == 301 and plain.headers["location"] == "https://127.0.0.1/accounts/login/"


async def test_sign_up_stream_and_reconnect_through_nginx(nginx, new_client, replies):
    alice = await new_client().signup()
    page = await alice.http.get(alice.url("/"))
    assert page.status_code == 200
    # Django saw HTTPS (X-Forwarded-Proto from a trusted proxy): HSTS and Secure cookies.
    assert page.headers["strict-transport-security"].startswith("max-age=31536000")
    cookies = {c.name: c for c in alice.http.cookies.jar}
    assert cookies["sessionid"].secure and cookies["csrftoken"].secure

    answer = answer_text(120, "n")
    message = replies.set(f"through nginx {uuid.uuid4().hex[:6]}", slow_text_reply(answer, chunks=120, delay=0.03))
    conversation = await alice.create_conversation()
    first = await alice.socket(conversation)
    await first.sync()
    await first.message(message)
    seen = events_only(await first.until(lambda f: f.get("type") == "text" and f["seq"] >= 4))
    await first.close()

    # Reconnect mid-run (nginx may hand it to the other daphne): exactly the rest.
    second = await alice.socket(conversation, after=seen[-1]["seq"])
    replay, sync = await second.sync()
    rest = events_only(replay) + (events_only(await second.until_complete()) if sync["running"] else [])
    await second.close()
    frames = seen + rest
    assert_contiguous(frames)
    assert run_text(frames) == answer and frames[-1]["status"] == "succeeded"
    assert frames == await alice.events(conversation)
    # Both daphnes served requests: nginx spread them over its upstream.
    upstreams = set(re.findall(r" (127\.0\.0\.1:\d+)$", (nginx.dir / "access.log").read_text(), re.M))
    assert len(upstreams) == 2, upstreams


async def test_lockout_and_sign_up_limit_follow_the_forwarded_address(nginx, new_client):
    alice = await new_client().signup()
    attacker = new_client()
    codes = [
        (await attacker.sign_in(f"guess-{uuid.uuid4().hex[:8]}", "wrong")).status_code for _ in range(FAILURE_LIMIT)
    ]
    assert codes == [200] * (FAILURE_LIMIT - 1) + [429]
    # Locked by its forwarded address, whatever X-Forwarded-For it sends itself.
    refused = await attacker.sign_in(alice.username, PASSWORD, **{"X-Forwarded-For": client_address()})
    assert refused.status_code == 429 and "Too many failed sign-in attempts" in refused.text
    # Everyone else comes through the same nginx (127.0.0.1 to daphne) and is not locked.
    elsewhere = new_client()
    assert (await elsewhere.sign_in(alice.username, PASSWORD)).status_code == 302

    # Two accounts per address (SIGNUP_RATE_LIMIT=2), counted in Redis across both daphnes.
    address = client_address()
    made = []
    for _ in range(3):
        client = new_client(address)
        token = await client._form_token("/accounts/signup/")
        response = await client.http.post(
            client.url("/accounts/signup/"),
            headers={"Referer": nginx.base},
            data={
                "csrfmiddlewaretoken": token,
                "username": client.username,
                "password1": PASSWORD,
                "password2": PASSWORD,
            },
        )
        made.append(response.status_code)
    assert made == [302, 302, 429]


async def test_logout_closes_the_socket_through_nginx(nginx, new_client):
    alice = await new_client().signup()
    conversation = await alice.create_conversation()
    socket = await alice.socket(conversation)
    await socket.sync()
    # Logging out in another tab of the same browser (the socket may be on either daphne).
    response = await alice.http.post(alice.url("/accounts/logout/"), headers=alice._unsafe_headers())
    assert response.status_code == 302
    try:
        while True:
            await socket.recv(timeout=15)
    except ConnectionClosed:
        pass
    except TimeoutError:
        pytest.fail("the socket was still open 15 s after its session was logged out")
    assert socket.close_code == 4401
