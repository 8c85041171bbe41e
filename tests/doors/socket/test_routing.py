"""Where a WebSocket goes (chat.doors.socket.routing): the chat path to the consumer with its route,
any other path refused at the handshake, and no router's frame kept per socket."""

from __future__ import annotations

import uuid

import pytest
from channels.testing import WebsocketCommunicator

from agentsite.asgi import application, by_protocol
from chat.doors.socket.routing import SocketRouter, websocket_urlpatterns

HEADERS = [(b"host", b"localhost"), (b"origin", b"http://localhost")]
REFUSED = (False, 1000)  # closed before it was accepted: daphne answers the handshake 403


@pytest.mark.django_db(transaction=True)  # the application's run registry may look at the database
@pytest.mark.parametrize(
    "path",
    [
        "/ws/chat/not-a-uuid/",
        f"/ws/chat/{uuid.uuid4()}",  # no trailing slash
        f"/ws/chat/{uuid.uuid4()}/extra/",
        "/ws/other/",
        "/",
    ],
)
async def test_a_path_of_no_route_is_refused_at_the_handshake(path):
    comm = WebsocketCommunicator(application, path, headers=HEADERS)
    connected, code = await comm.connect()
    assert (connected, code) == REFUSED  # a refusal, not an exception in the server
    await comm.wait()


class Recorder:
    """A consumer class of the router's kind: made with its route's values, then called."""

    seen: list = []

    def __init__(self, **route) -> None:
        self.route = route

    async def __call__(self, scope, receive, send):
        Recorder.seen.append((self.route, scope))
        await send({"type": "websocket.close", "code": 4000})


@pytest.fixture
def routes():
    Recorder.seen = []
    return [type(websocket_urlpatterns[0])(websocket_urlpatterns[0].pattern, Recorder)]


async def test_the_chat_path_makes_its_consumer_with_the_conversation(routes):
    conversation = uuid.uuid4()
    comm = WebsocketCommunicator(SocketRouter(routes), f"/ws/chat/{conversation}/", headers=HEADERS)
    assert await comm.connect() == (False, 4000)
    [(route, scope)] = Recorder.seen
    assert route == {"conversation_id": conversation}
    assert scope is comm.scope  # the scope as it came: no copy per socket


async def test_a_root_path_is_taken_off_before_matching(routes):
    conversation = uuid.uuid4()
    router = SocketRouter(routes)
    comm = WebsocketCommunicator(router, f"/chat/ws/chat/{conversation}/", headers=HEADERS)
    comm.scope["root_path"] = "/chat"
    assert await comm.connect() == (False, 4000)
    assert [route for route, _ in Recorder.seen] == [{"conversation_id": conversation}]
    outside = WebsocketCommunicator(router, f"/ws/chat/{conversation}/", headers=HEADERS)
    outside.scope["root_path"] = "/chat"
    assert await outside.connect() == REFUSED


def test_no_router_frame_waits_above_the_consumer(routes):
    """The routers hand back the consumer's coroutine itself: while a socket lives, nothing of
    theirs is suspended above it (each such frame cost every idle socket)."""
    scope = {"type": "websocket", "path": f"/ws/chat/{uuid.uuid4()}/", "headers": HEADERS}
    handed = SocketRouter(routes)(scope, None, None)
    assert handed.cr_code is Recorder.__call__.__code__
    handed.close()
    with pytest.raises(ValueError, match="lifespan"):
        by_protocol({"type": "lifespan"}, None, None)


def test_servers_that_ask_see_an_asgi3_application():
    """uvicorn asks whether the application's __call__ is a coroutine function: the plain-call
    wrappers (no frame per connection) were taken for ASGI 2 and every connection failed."""
    from uvicorn.config import Config

    config = Config(app=application)
    config.load()
    assert config.interface == "asgi3"
