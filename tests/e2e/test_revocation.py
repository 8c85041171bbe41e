"""An open socket does not outlive its session (docs/protocol.md, "The WebSocket"): logout, a password
change, deactivation and deletion by an admin close it with 4401 at once, on every process."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import uuid

import httpx
import pytest
from httpx_sse import aconnect_sse
from openai import AsyncOpenAI
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from .conftest import ON_POSTGRES, REDIS_URL
from .harness import PASSWORD, ROOT, Client, Socket, answer_text, shell, slow_text_reply

pytestmark = pytest.mark.services

NEW_PASSWORD = "e2e-New-pass-w0rd-long"  # noqa: S105 - a test account


async def closed_with(sock: Socket, timeout: float = 15.0) -> int | None:
    """Waits for the server to close the socket, without sending anything; its close code.
    Fails if a frame arrives instead."""
    try:
        raw = await asyncio.wait_for(sock.ws.recv(), timeout)
    except ConnectionClosed as exc:
        return exc.rcvd.code if exc.rcvd else None
    pytest.fail(f"expected the socket to be closed, got a frame: {raw!r}")


async def answers_ping(sock: Socket) -> bool:
    await sock.send({"type": "ping"})
    return (await sock.until(lambda f: f["type"] == "pong"))[-1] == {"type": "pong"}


async def open_synced(client: Client, conversation: str, **kwargs) -> Socket:
    sock = await client.socket(conversation, **kwargs)
    await sock.sync()
    assert await answers_ping(sock)
    return sock


async def second_session(client: Client) -> Client:
    """The same user signed in again elsewhere (another browser): a session of its own."""
    return await Client(client.server, client.username).login()


async def logout(client: Client, server=None) -> None:
    r = await client.http.post(client.url("/accounts/logout/", server), headers=client._unsafe_headers(server))
    assert r.status_code == 302, (r.status_code, r.text[:500])


async def page_form(client: Client, path: str) -> str:
    r = await client.http.get(client.url(path))
    assert r.status_code == 200, (path, r.status_code)
    return r.text


def form_value(html: str, name: str) -> str:
    return re.search(rf'name="{name}"[^>]*value="([^"]*)"', html).group(1)


async def superuser(server) -> Client:
    """A superuser signed in through the login page, as an operator using /admin/."""
    username = f"admin{uuid.uuid4().hex[:8]}"
    subprocess.run(
        [
            sys.executable,
            "manage.py",
            "createsuperuser",
            "--noinput",
            "--username",
            username,
            "--email",
            f"{username}@example.org",
        ],
        cwd=ROOT,
        env={**server.env, "DJANGO_SUPERUSER_PASSWORD": PASSWORD},
        check=True,
        timeout=120,
        capture_output=True,
    )
    return await Client(server, username).login()


@pytest.fixture
async def admin(server):
    client = await superuser(server)
    yield client
    await client.aclose()


async def admin_user_id(admin: Client, username: str) -> str:
    html = await page_form(admin, f"/admin/auth/user/?q={username}")
    return re.search(r'href="/admin/auth/user/(\d+)/change/', html).group(1)


async def deactivate(admin: Client, username: str) -> None:
    """Through the admin's change form, "active" unticked (an unticked box is simply not sent)."""
    user_id = await admin_user_id(admin, username)
    html = await page_form(admin, f"/admin/auth/user/{user_id}/change/")
    r = await admin.http.post(
        admin.url(f"/admin/auth/user/{user_id}/change/"),
        data={
            "csrfmiddlewaretoken": form_value(html, "csrfmiddlewaretoken"),
            "username": username,
            "date_joined_0": form_value(html, "date_joined_0"),
            "date_joined_1": form_value(html, "date_joined_1"),
            "_save": "Save",
        },
        headers={"Referer": admin.server.base},
    )
    assert r.status_code == 302, (r.status_code, r.text[:2000])


async def streamed_completion(server, token: str, message: str) -> tuple[asyncio.Task, list[str], str]:
    """A streamed /v1 call read raw in a task, once its answer has begun: the task, the lines it
    has read (its last ones, an error chunk and `[DONE]`, are what the SDK does not show) and the
    call's conversation."""
    client = AsyncOpenAI(base_url=f"{server.base}/v1", api_key=token, max_retries=0, timeout=60)
    raw = await client.chat.completions.with_raw_response.create(
        model="default", messages=[{"role": "user", "content": message}], stream=True
    )
    lines: list[str] = []
    begun = asyncio.Event()

    async def read() -> None:
        try:
            async for line in raw.http_response.aiter_lines():
                if line:
                    lines.append(line)
                if '"content":"' in line and '"content":""' not in line:
                    begun.set()
        finally:
            await client.close()

    task = asyncio.create_task(read())
    await asyncio.wait_for(begun.wait(), 15)
    return task, lines, raw.headers["x-agentsite-conversation"]


def ended_with_error(lines: list[str]) -> dict:
    """The OpenAI error of a streamed call that ended with one, then `[DONE]`."""
    assert lines[-1] == "data: [DONE]", lines[-3:]
    return json.loads(lines[-2].removeprefix("data: "))["error"]


async def test_logout_closes_that_sessions_sockets_and_no_other(user):
    conversation = await user.create_conversation()
    elsewhere = await second_session(user)
    tab_1 = await open_synced(user, conversation)
    tab_2 = await open_synced(user, conversation)
    other_browser = await open_synced(elsewhere, conversation)

    await logout(user)

    assert await closed_with(tab_1) == 4401
    assert await closed_with(tab_2) == 4401
    # Logout ends one session, as it does over HTTP: the other browser stays signed in.
    assert await answers_ping(other_browser)
    await other_browser.message("still here")
    assert (await other_browser.until(lambda f: f["type"] == "user_message"))[-1]["content"] == "still here"
    await other_browser.until_complete()
    await other_browser.close()
    await elsewhere.aclose()


async def test_password_change_closes_every_socket_of_the_user(user):
    conversation = await user.create_conversation()
    elsewhere = await second_session(user)
    here = await open_synced(user, conversation)
    other_browser = await open_synced(elsewhere, conversation)

    html = await page_form(user, "/accounts/password_change/")
    r = await user.http.post(
        user.url("/accounts/password_change/"),
        data={
            "csrfmiddlewaretoken": form_value(html, "csrfmiddlewaretoken"),
            "old_password": PASSWORD,
            "new_password1": NEW_PASSWORD,
            "new_password2": NEW_PASSWORD,
        },
        headers={"Referer": user.server.base},
    )
    assert r.status_code == 302, (r.status_code, r.text[:1000])

    assert await closed_with(other_browser) == 4401
    # The changing session too: Django keeps that browser signed in under a new session key
    # and deletes the old one, the key this socket was opened with.
    assert await closed_with(here) == 4401
    # The browser's new cookie opens a socket again; the other browser's old one does not.
    again = await open_synced(user, conversation)
    await again.close()
    stale = await elsewhere.socket(conversation)
    assert await closed_with(stale) == 4401
    await elsewhere.aclose()


async def test_deactivation_by_an_admin_closes_every_socket(user, admin):
    conversation = await user.create_conversation()
    sock = await open_synced(user, conversation)
    await deactivate(admin, user.username)
    assert await closed_with(sock) == 4401
    assert await closed_with(await user.socket(conversation)) == 4401


async def test_deletion_by_an_admin_closes_every_socket(user, admin):
    conversation = await user.create_conversation()
    sock = await open_synced(user, conversation)
    user_id = await admin_user_id(admin, user.username)
    html = await page_form(admin, f"/admin/auth/user/{user_id}/delete/")
    r = await admin.http.post(
        admin.url(f"/admin/auth/user/{user_id}/delete/"),
        data={"csrfmiddlewaretoken": form_value(html, "csrfmiddlewaretoken"), "post": "yes"},
        headers={"Referer": admin.server.base},
    )
    assert r.status_code == 302, (r.status_code, r.text[:2000])
    assert await closed_with(sock) == 4401


# -- several processes ---------------------------------------------------------------------

needs_services = pytest.mark.skipif(
    not (ON_POSTGRES and REDIS_URL), reason="needs DATABASE_URL=postgres://... and REDIS_URL"
)


@pytest.fixture(scope="module")
def two_servers(databases, make_server):
    database = databases.new()
    return make_server(database, name="revoke-A"), make_server(database, name="revoke-B")


@pytest.mark.multiprocess
@needs_services
async def test_logout_through_a_closes_the_socket_on_b(two_servers):
    server_a, server_b = two_servers
    alice = await Client(server_a).signup()
    conversation = await alice.create_conversation()
    on_b = await open_synced(alice, conversation, server=server_b)
    on_a = await open_synced(alice, conversation, server=server_a)

    await logout(alice, server_a)

    assert await closed_with(on_b) == 4401
    assert await closed_with(on_a) == 4401
    await alice.aclose()


@pytest.mark.multiprocess
@needs_services
async def test_deactivation_in_another_process_closes_the_socket_on_b(two_servers):
    """A change made by a process that serves no socket at all (a management command)."""
    server_a, server_b = two_servers
    alice = await Client(server_a).signup()
    conversation = await alice.create_conversation()
    on_b = await open_synced(alice, conversation, server=server_b)
    code = (
        "from django.contrib.auth import get_user_model; "
        f"u = get_user_model().objects.get(username={alice.username!r}); u.is_active = False; u.save()"
    )
    shell(server_b, code)
    assert await closed_with(on_b) == 4401
    await alice.aclose()


@pytest.mark.multiprocess
@needs_services
async def test_revoking_a_token_on_a_closes_its_stream_and_socket_on_b(two_servers):
    """A token revoked through process A (DELETE /api/tokens/<id>/) ends, within seconds, the
    server-sent event stream and the WebSocket opened with it on process B."""
    server_a, server_b = two_servers
    alice = await Client(server_a).signup()
    conversation = await alice.create_conversation()
    r = await alice.api("POST", "/api/tokens/", json_body={"name": "on b"})
    assert r.status_code == 201, r.text
    token, token_id = r.json()["token"], r.json()["id"]
    auth = {"Authorization": f"Bearer {token}"}
    ws = await connect(f"{server_b.ws_base}/ws/chat/{conversation}/", additional_headers=auth, open_timeout=10)
    on_b = Socket(ws)
    await on_b.sync()
    assert await answers_ping(on_b)
    synced = asyncio.Event()

    async def stream():
        async with httpx.AsyncClient(base_url=server_b.base, headers=auth, timeout=30) as http:
            async with aconnect_sse(http, "GET", f"/api/conversations/{conversation}/stream/") as source:
                async for sse in source.aiter_sse():
                    if sse.event == "sync":
                        synced.set()

    reader = asyncio.create_task(stream())
    await asyncio.wait_for(synced.wait(), 15)
    r = await alice.api("DELETE", f"/api/tokens/{token_id}/")  # through A
    assert r.status_code == 204, r.text
    started = asyncio.get_running_loop().time()
    await asyncio.wait_for(reader, 4)  # the stream on B ended (its own re-check would take 5 s)
    assert await closed_with(on_b, timeout=4) == 4401
    assert asyncio.get_running_loop().time() - started < 4
    r = await alice.api("GET", f"/api/conversations/{conversation}/events/", server=server_b)
    assert r.status_code == 200  # the session, on B too, is untouched
    async with httpx.AsyncClient(base_url=server_b.base, headers=auth) as http:
        assert (await http.get("/api/conversations/")).status_code == 401
    await alice.aclose()


AT_ONCE = 1.5  # seconds: a liveness bound (the streams' own re-check would take 5 s)


async def token_stream_on_b(server_b, token: str, conversation: str) -> asyncio.Task:
    """A server-sent event stream opened on B with the token, in a task, once it has synced."""
    synced = asyncio.Event()

    async def stream() -> None:
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=server_b.base, headers=headers, timeout=60) as http:
            async with aconnect_sse(http, "GET", f"/api/conversations/{conversation}/stream/") as source:
                async for sse in source.aiter_sse():
                    if sse.event == "sync":
                        synced.set()

    reader = asyncio.create_task(stream())
    await asyncio.wait_for(synced.wait(), 15)
    return reader


@pytest.mark.multiprocess
@needs_services
async def test_deactivating_a_user_on_a_ends_their_token_streams_and_calls_on_b(two_servers, replies):
    """Deactivated through the admin on A: the stream, the socket and the streamed /v1 call that
    B serves with the user's API token end at once, as their sessions' do."""
    server_a, server_b = two_servers
    alice = await Client(server_a).signup()
    admin = await superuser(server_a)
    r = await alice.api("POST", "/api/tokens/", json_body={"name": "script"})
    assert r.status_code == 201, r.text
    token = r.json()["token"]
    conversation = await alice.create_conversation()
    reader = await token_stream_on_b(server_b, token, conversation)
    ws = await connect(
        f"{server_b.ws_base}/ws/chat/{conversation}/",
        additional_headers={"Authorization": f"Bearer {token}"},
        open_timeout=10,
    )
    on_b = Socket(ws)
    await on_b.sync()
    message = replies.set("deactivated mid-completion", slow_text_reply(answer_text(200, "x"), chunks=200, delay=0.05))
    call, lines, _ = await streamed_completion(server_b, token, message)

    await deactivate(admin, alice.username)
    started = asyncio.get_running_loop().time()
    await asyncio.wait_for(reader, AT_ONCE)
    await asyncio.wait_for(call, AT_ONCE)
    assert await closed_with(on_b, timeout=AT_ONCE) == 4401
    assert asyncio.get_running_loop().time() - started < AT_ONCE
    assert ended_with_error(lines) == {
        "message": "The API key was revoked.",
        "type": "authentication_error",
        "param": None,
        "code": "invalid_api_key",
    }
    async with httpx.AsyncClient(base_url=server_b.base, headers={"Authorization": f"Bearer {token}"}) as http:
        assert (await http.get("/api/conversations/")).status_code == 401
    await admin.aclose()
    await alice.aclose()


@pytest.mark.multiprocess
@needs_services
async def test_revoking_a_token_in_the_admin_on_a_ends_its_completion_on_b(two_servers, replies):
    server_a, server_b = two_servers
    alice = await Client(server_a).signup()
    admin = await superuser(server_a)
    r = await alice.api("POST", "/api/tokens/", json_body={"name": "script"})
    assert r.status_code == 201, r.text
    token, token_id = r.json()["token"], r.json()["id"]
    message = replies.set("revoked mid-completion", slow_text_reply(answer_text(200, "r"), chunks=200, delay=0.05))
    call, lines, conversation = await streamed_completion(server_b, token, message)
    reader = await token_stream_on_b(server_b, token, conversation)

    html = await page_form(admin, f"/admin/chat/apitoken/{token_id}/delete/")
    r = await admin.http.post(
        admin.url(f"/admin/chat/apitoken/{token_id}/delete/"),
        data={"csrfmiddlewaretoken": form_value(html, "csrfmiddlewaretoken"), "post": "yes"},
        headers={"Referer": admin.server.base},
    )
    assert r.status_code == 302, (r.status_code, r.text[:2000])
    await asyncio.wait_for(call, AT_ONCE)
    await asyncio.wait_for(reader, AT_ONCE)
    assert ended_with_error(lines)["code"] == "invalid_api_key"
    # The session still reads the conversation: only the token ended.
    r = await alice.api("GET", f"/api/conversations/{conversation}/", server=server_b)
    assert r.status_code == 200
    await admin.aclose()
    await alice.aclose()
