"""The second line of socket revocation (chat.accounts.revocation): every client frame that acts
re-checks the session (a ping does not: it costs nothing), and so does every socket when the layer
comes back after an outage, so a session that ends without a signal (a lost push, a queryset
update, a deleted session row) still closes the socket before it starts anything; and the check
itself."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import override_settings

from agentsite.asgi import application
from chat.accounts import held_credentials
from chat.accounts.revocation import session_is_current
from chat.models import Event, Run
from chat.models import UserSession as Session  # the sessions of SESSION_ENGINE (chat.accounts.sessions)
from tests.asgi_socket import session_cookie

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


class KeyedSocket:
    """A socket opened with a session whose key the test knows."""

    def __init__(self, conversation):
        self.conversation = conversation

    async def connect(self):
        self.session_key = await sync_to_async(session_cookie)(self.conversation.owner)
        self.comm = WebsocketCommunicator(
            application,
            f"/ws/chat/{self.conversation.pk}/",
            headers=[
                (b"origin", b"http://localhost"),
                (b"host", b"localhost"),
                (b"cookie", f"sessionid={self.session_key}".encode()),
            ],
        )
        assert (await self.comm.connect(timeout=5))[0]
        while json.loads(await self.comm.receive_from(timeout=5))["type"] != "sync":
            pass
        return self

    async def send(self, frame: dict) -> None:
        await self.comm.send_to(text_data=json.dumps(frame))

    async def recv(self) -> dict:
        return json.loads(await self.comm.receive_from(timeout=5))

    async def closed_with(self) -> int:
        output = await self.comm.receive_output(timeout=5)
        assert output["type"] == "websocket.close", output
        return output["code"]


@pytest.fixture
async def socket(conversation, registry):
    sock = await KeyedSocket(conversation).connect()
    yield sock
    await sock.comm.disconnect()


@pytest.fixture
def no_recheck_window(monkeypatch):
    """As if the socket's last session check were older than the window."""
    monkeypatch.setattr(held_credentials, "SESSION_RECHECK_SECONDS", 0.0)


async def test_a_message_on_a_session_deleted_without_a_signal_closes_4401_and_starts_nothing(
    socket, llm_settings, no_recheck_window
):
    await Session.objects.filter(session_key=socket.session_key).adelete()
    await socket.send({"type": "message", "content": "run on a dead session"})
    assert await socket.closed_with() == 4401
    assert await Run.objects.acount() == 0 and await Event.objects.acount() == 0


async def test_a_password_changed_by_a_queryset_update_closes_on_the_next_message(
    socket, conversation, no_recheck_window
):
    await get_user_model().objects.filter(pk=conversation.owner.pk).aupdate(password="pbkdf2_sha256$1$x$y")
    await socket.send({"type": "message", "content": "hello"})
    assert await socket.closed_with() == 4401
    assert await Run.objects.acount() == 0


async def test_pings_never_look_the_credential_up_and_the_next_message_does(socket, monkeypatch, llm_settings):
    """An idle socket's pings cost nothing (the push is the first line); a session that ended
    without a push is found by the next frame that acts, before it starts anything."""
    calls = []
    real = held_credentials.session_is_current

    def counting(**kwargs):
        calls.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(held_credentials, "session_is_current", counting)
    monkeypatch.setattr(held_credentials, "SESSION_RECHECK_SECONDS", 0.0)  # every check due
    await Session.objects.filter(session_key=socket.session_key).adelete()
    for _ in range(100):
        await socket.send({"type": "ping"})
        assert await socket.recv() == {"type": "pong"}
    assert calls == []
    await socket.send({"type": "message", "content": "run on a dead session"})
    assert await socket.closed_with() == 4401
    assert len(calls) == 1
    assert await Run.objects.acount() == 0


async def test_the_layer_coming_back_rechecks_the_credential(socket, conversation):
    """A revocation pushed while the layer was down is lost with it: when the layer answers again
    (chat.realtime.hub), each socket re-checks its credential as well as reading what it missed."""
    from chat.realtime.hub import get_hub

    await Session.objects.filter(session_key=socket.session_key).adelete()
    get_hub()._layer_back()
    assert await socket.closed_with() == 4401


async def test_a_revocation_push_for_another_session_leaves_the_socket_open(socket, conversation):
    from channels.layers import get_channel_layer

    from chat.accounts.revocation import REVOKED, user_group

    layer, group = get_channel_layer(), user_group(conversation.owner.pk)
    # As chat.accounts.revocation pushes it: the group named (chat.realtime.hub)
    await layer.group_send(group, {"type": REVOKED, "session_key": "someone-else", "group": group})
    await socket.send({"type": "ping"})
    assert await socket.recv() == {"type": "pong"}
    await layer.group_send(group, {"type": REVOKED, "session_key": socket.session_key, "group": group})
    assert await socket.closed_with() == 4401


# -- session_is_current ------------------------------------------------------------------------


def test_session_is_current(make_user):
    alice, bob = make_user("alice"), make_user("bob")
    key = session_cookie(alice)
    assert session_is_current(session_key=key, user_id=alice.pk)
    assert not session_is_current(session_key=key, user_id=bob.pk)
    assert not session_is_current(session_key="no-such-session", user_id=alice.pk)
    assert not session_is_current(session_key=None, user_id=alice.pk)
    alice.is_active = False
    alice.save()
    assert not session_is_current(session_key=key, user_id=alice.pk)


def test_session_users_signs_many_keys_in_by_the_same_rules_in_two_queries(make_user, django_assert_num_queries):
    """A reconnect storm's handshakes signed in together (chat.doors.socket.arrivals): each key as
    session_user would, the sessions in one query and their users in another."""
    from django.utils import timezone

    from chat.accounts.session_users import session_users

    alice, bob, carol = make_user("alice"), make_user("bob"), make_user("carol")
    good, again, expired, bobs, carols = (session_cookie(u) for u in (alice, alice, alice, bob, carol))
    Session.objects.filter(session_key=expired).update(expire_date=timezone.now())
    get_user_model().objects.filter(pk=bob.pk).update(is_active=False)
    get_user_model().objects.filter(pk=carol.pk).update(password="pbkdf2_sha256$1$x$y")  # no signal
    keys = [good, again, expired, bobs, carols, "no-such-session", None, ""]
    with django_assert_num_queries(2):
        users = session_users(keys)
    assert {k: (u.pk if u else None) for k, u in users.items()} == {
        good: alice.pk,
        again: alice.pk,
        expired: None,
        bobs: None,
        carols: None,
        "no-such-session": None,
    }
    for key in keys[:6]:
        assert session_is_current(session_key=key, user_id=alice.pk) == (users[key] is not None)


def test_a_rotated_secret_key_keeps_sessions_and_the_check_changes_nothing(make_user, settings):
    alice = make_user("alice")
    key = session_cookie(alice)
    rotated = {"SECRET_KEY": "a-new-secret-key-for-this-test-0123456789", "SECRET_KEY_FALLBACKS": [settings.SECRET_KEY]}
    with override_settings(**rotated):
        assert session_is_current(session_key=key, user_id=alice.pk)
    # Django's get_user would have moved the session to a new key the browser never learns.
    assert Session.objects.filter(session_key=key).exists()


def test_which_user_saves_push_a_revocation(make_user, monkeypatch):
    """The pushes themselves are tested end to end (tests/e2e/test_revocation.py); here, which
    saves send one: none for a save that leaves password and is_active alone (the last_login
    update of every login among them), none for a change rolled back."""
    from django.db import transaction

    from chat.accounts import revocation

    pushed = []
    monkeypatch.setattr(revocation, "sessions_revoke", lambda **kwargs: pushed.append(kwargs))
    alice, bob = make_user("alice"), make_user("bob")
    alice.first_name = "Alice"
    alice.save()
    alice.save(update_fields=["last_login"])
    assert pushed == []
    alice.set_password("another-pw-for-tests-456")
    alice.save()
    # A new password ends the sessions; the API tokens, which it does not sign, still hold.
    assert pushed == [{"user_id": alice.pk, "tokens": False}]
    with pytest.raises(RuntimeError), transaction.atomic():
        bob.is_active = False
        bob.save()
        raise RuntimeError("rolled back")
    assert pushed == [{"user_id": alice.pk, "tokens": False}]
    # A user who can no longer sign in at all: their tokens' sockets and streams end too.
    bob.is_active = False
    bob.save(update_fields=["is_active"])
    bob_id = bob.pk
    bob.delete()
    assert pushed == [
        {"user_id": alice.pk, "tokens": False},
        {"user_id": bob_id, "tokens": True},
        {"user_id": bob_id, "tokens": True},
    ]
