"""Another user, an anonymous client and a foreign page see nothing of a conversation."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus

from .harness import Socket, anonymous_socket, answer_text, events_only, slow_text_reply

pytestmark = pytest.mark.services


async def refusal(open_socket) -> tuple[str, int]:
    """How a socket was refused: ("handshake", HTTP status) or ("close", close code).
    Fails if the server sends any frame at all."""
    try:
        sock: Socket = await open_socket()
    except InvalidStatus as exc:
        return "handshake", exc.response.status_code
    try:
        raw = await asyncio.wait_for(sock.ws.recv(), 10)
    except ConnectionClosed as exc:
        return "close", exc.rcvd.code if exc.rcvd else None
    pytest.fail(f"a refused socket received a frame: {raw!r}")


@pytest.fixture
async def conversation_with_history(user, replies):
    message = replies.set(
        "secret plans",
        {"chunks": [{"delta": {"content": "top secret answer"}}, {"delta": {}, "finish_reason": "stop"}]},
    )
    conversation = await user.create_conversation(title="private")
    sock = await user.socket(conversation)
    await sock.sync()
    await sock.message(message)
    await sock.until_complete()
    await sock.close()
    return conversation


async def test_another_user_gets_404_on_every_api_path(user, other_user, conversation_with_history):
    conversation = conversation_with_history
    missing = str(uuid.uuid4())
    for target in (conversation, missing):
        responses = [
            await other_user.api("GET", f"/api/conversations/{target}/"),
            await other_user.api("PATCH", f"/api/conversations/{target}/", json_body={"title": "mine now"}),
            await other_user.api("GET", f"/api/conversations/{target}/events/?after=0"),
            await other_user.api("GET", f"/api/conversations/{target}/events/"),
            await other_user.api("DELETE", f"/api/conversations/{target}/"),
        ]
        assert [r.status_code for r in responses] == [404] * 5, target
        assert "secret" not in "".join(r.text for r in responses)
    # A foreign conversation answers exactly like a missing one.
    foreign = await other_user.api("GET", f"/api/conversations/{conversation}/")
    absent = await other_user.api("GET", f"/api/conversations/{missing}/")
    assert foreign.json() == absent.json()

    listing = (await other_user.api("GET", "/api/conversations/")).json()["conversations"]
    assert conversation not in [c["id"] for c in listing]

    # Nothing was changed or deleted by the attempts.
    mine = await user.api("GET", f"/api/conversations/{conversation}/")
    assert mine.status_code == 200 and mine.json()["title"] == "private"
    events = await user.events(conversation)
    assert events and events[-1]["type"] == "complete"


async def test_another_user_gets_no_frame_on_the_socket(user, other_user, conversation_with_history):
    conversation = conversation_with_history
    for after in (None, 0):
        how = await refusal(lambda after=after: other_user.socket(conversation, after=after))
        assert how in {("close", 4404), ("handshake", 403)}, how
    # A missing conversation is refused the same way as a foreign one.
    assert await refusal(lambda: other_user.socket(str(uuid.uuid4()))) in {("close", 4404), ("handshake", 403)}


async def test_another_users_socket_gets_nothing_of_a_live_run(user, other_user, replies, server):
    """A refused socket must not be left in the conversation's group either."""
    message = replies.set("live secret", slow_text_reply(answer_text(20, "s"), chunks=20, delay=0.02))
    conversation = await user.create_conversation()
    owner = await user.socket(conversation)
    await owner.sync()
    try:
        intruder = await other_user.socket(conversation)
    except InvalidStatus:
        intruder = None
    await owner.message(message)
    await owner.until_complete()
    await owner.close()
    if intruder is not None:
        with pytest.raises(ConnectionClosed) as closed:
            raw = await asyncio.wait_for(intruder.ws.recv(), 5)
            pytest.fail(f"the intruder received {raw!r}")
        assert closed.value.rcvd.code == 4404


async def test_anonymous_gets_4401_and_no_frame(server, conversation_with_history):
    how = await refusal(lambda: anonymous_socket(server, f"/ws/chat/{conversation_with_history}/"))
    assert how in {("close", 4401), ("handshake", 403)}, how
    assert how != ("close", 4404), "an anonymous client must not learn whether the conversation exists"


async def test_a_foreign_origin_is_refused(user, conversation_with_history):
    conversation = conversation_with_history
    for origin in ("http://evil.example", "https://127.0.0.1.evil.example", "null"):
        how = await refusal(lambda origin=origin: user.socket(conversation, origin=origin))
        assert how == ("handshake", 403), how
    # The same client with its own origin is served: the refusal was about the origin.
    sock = await user.socket(conversation)
    replay, sync = await sock.sync()
    await sock.close()
    assert events_only(replay) and sync["running"] is False


async def test_another_port_or_scheme_of_the_same_host_is_refused(user, server, conversation_with_history):
    conversation = conversation_with_history
    for origin in (
        "http://127.0.0.1:1",
        f"https://127.0.0.1:{server.port}",
        "http://127.0.0.1",
        f"http://localhost:{server.port}",
    ):
        how = await refusal(lambda origin=origin: user.socket(conversation, origin=origin))
        assert how == ("handshake", 403), (origin, how)
