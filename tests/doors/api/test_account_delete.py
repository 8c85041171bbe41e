"""Deleting one's account (POST /api/account/delete/, chat.doors.api.account_api): a wrong password
changes nothing; the right one takes the user and everything of theirs (conversations, files on
disk, tokens, shares, sessions), closes their sockets and streams, signs the browser out, and
leaves a log line with the id only. Only a signed-in session, with its CSRF token, may."""

from __future__ import annotations

import json
import logging

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.test import Client

from chat.accounts.tokens import token_create
from chat.conversations.services import conversation_create
from chat.models import AccountSettings, ApiToken, Conversation, Event, OidcIdentity, Run, ShareLink, UserSession
from chat.sharing.links import share_create
from chat.tools.confine import workspace_path
from tests.accounts.test_account import open_socket
from tests.asgi_http import RawStream
from tests.conversations.test_transfer import run_with

PASSWORD = "pw-for-tests-123"
URL = "/api/account/delete/"

pytestmark = pytest.mark.services


@pytest.fixture
def workspaces(settings, tmp_path):
    settings.AGENT_WORKSPACE_ROOT = tmp_path / "workspaces"
    return settings.AGENT_WORKSPACE_ROOT


def with_everything(username: str, workspaces) -> dict:
    """A user with a conversation that has a run, a file on disk and a shared link, a token and settings."""
    user = get_user_model().objects.create_user(username=username, password=PASSWORD, email=f"{username}@example.com")
    conversation = conversation_create(owner=user, title=f"{username}'s")
    run_with(conversation, user, "q", [{"type": "text", "content": "a"}])
    folder = workspace_path(workspaces, conversation.pk)
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("private")
    share_create(conversation=conversation)
    _token, value = token_create(user=user, name="script")
    AccountSettings.objects.create(user=user, display_name=username.title())
    return {"user": user, "conversation": conversation, "folder": folder, "token": value}


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def remains(user) -> dict:
    return {
        "user": get_user_model().objects.filter(pk=user.pk).exists(),
        "conversations": Conversation.objects.filter(owner=user).count(),
        "runs": Run.objects.filter(conversation__owner=user).count(),
        "events": Event.objects.filter(conversation__owner=user).count(),
        "shares": ShareLink.objects.filter(conversation__owner=user).count(),
        "tokens": ApiToken.objects.filter(user=user).count(),
        "sessions": UserSession.objects.filter(user_id=user.pk).count(),
        "settings": AccountSettings.objects.filter(user=user).count(),
    }


def post(client: Client, body) -> object:
    return client.post(URL, json.dumps(body), content_type="application/json")


@pytest.mark.django_db
def test_a_wrong_password_is_403_and_changes_nothing(workspaces):
    alice = with_everything("alice", workspaces)
    client = signed_in(alice["user"])
    before = remains(alice["user"])
    answer = post(client, {"password": "not-the-password"})
    assert answer.status_code == 403 and answer.json()["error"] == "wrong_password"
    assert remains(alice["user"]) == before and before["user"] and before["conversations"] == 1
    assert (alice["folder"] / "notes.txt").read_text() == "private"
    assert client.get("/").status_code == 200  # still signed in
    assert client.get("/api/tokens/", HTTP_AUTHORIZATION=f"Bearer {alice['token']}").status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("body", [{}, {"password": ""}, {"password": 12}, {"username": "alice"}])
def test_no_password_is_400_and_changes_nothing(workspaces, body):
    alice = with_everything("alice", workspaces)
    client = signed_in(alice["user"])
    before = remains(alice["user"])
    answer = post(client, body)
    assert answer.status_code == 400 and "password" in answer.json()["message"]
    assert remains(alice["user"]) == before


@pytest.mark.django_db
def test_a_token_cannot_delete_the_account(workspaces):
    alice = with_everything("alice", workspaces)
    answer = Client().post(
        URL,
        json.dumps({"password": PASSWORD}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {alice['token']}",
    )
    assert answer.status_code == 403 and answer.json()["error"] == "forbidden"
    assert remains(alice["user"])["user"]


@pytest.mark.django_db
def test_a_session_needs_its_csrf_token(workspaces):
    alice = with_everything("alice", workspaces)
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice["user"])
    answer = post(client, {"password": PASSWORD})
    assert answer.status_code == 403 and answer.json()["error"] == "csrf_failed"
    assert remains(alice["user"])["user"]


@pytest.mark.django_db
def test_signed_out_is_401_and_get_is_405(db):
    assert post(Client(), {"password": PASSWORD}).status_code == 401
    alice = get_user_model().objects.create_user(username="alice", password=PASSWORD)
    assert signed_in(alice).get(URL).status_code == 405


@pytest.mark.django_db
def test_a_user_who_signs_in_only_with_openid_connect_confirms_with_their_username(workspaces):
    carol = get_user_model().objects.create_user(username="carol")  # no usable password
    OidcIdentity.objects.create(user=carol, issuer="https://id.example.com", subject="c-1")
    client = signed_in(carol)
    assert post(client, {"password": ""}).status_code == 400
    wrong = post(client, {"username": "Carol"})
    assert wrong.status_code == 403 and wrong.json()["error"] == "wrong_username"
    assert post(client, {"username": "carol"}).status_code == 204
    assert not get_user_model().objects.filter(username="carol").exists()
    assert not OidcIdentity.objects.exists()


@pytest.mark.django_db
def test_with_password_sign_in_turned_off_everyone_confirms_with_their_username(workspaces, settings):
    settings.ALLOW_PASSWORD_LOGIN = False
    alice = with_everything("alice", workspaces)
    client = signed_in(alice["user"])
    assert post(client, {"password": PASSWORD}).status_code == 400
    assert post(client, {"username": "alice"}).status_code == 204


@pytest.mark.django_db(transaction=True)
async def test_the_right_password_takes_everything_and_closes_every_socket_and_stream(workspaces, registry, caplog):
    alice = await sync_to_async(with_everything)("alice", workspaces)
    bob = await sync_to_async(with_everything)("bob", workspaces)
    user = alice["user"]
    here, phone = [await sync_to_async(signed_in)(user) for _ in range(2)]
    bobs = await sync_to_async(signed_in)(bob["user"])
    sockets = [await open_socket(alice["conversation"].pk, c.cookies["sessionid"].value) for c in (here, phone)]
    stream = RawStream(
        f"/api/conversations/{alice['conversation'].pk}/stream/?after=3",
        [(b"authorization", f"Bearer {alice['token']}".encode())],
    )
    assert (await stream.open())["status"] == 200
    assert (await stream.chunk()).startswith(b"event: sync")

    with caplog.at_level(logging.INFO, logger="chat.accounts.account"):
        answer = await sync_to_async(post)(here, {"password": PASSWORD})
    assert answer.status_code == 204, answer.content

    for comm in sockets:
        assert await comm.receive_output(timeout=5) == {"type": "websocket.close", "code": 4401}
    assert await stream.chunk() is None  # the stream ended
    await stream.close()
    gone = await sync_to_async(remains)(user)
    assert gone == {k: (False if k == "user" else 0) for k in gone}
    assert not alice["folder"].exists()  # the workspace on disk
    for client in (here, phone):
        answer = await sync_to_async(client.get)("/")
        assert answer.status_code == 302 and answer["Location"].startswith("/accounts/login/")
    refused = await sync_to_async(Client().get)("/api/tokens/", HTTP_AUTHORIZATION=f"Bearer {alice['token']}")
    assert refused.status_code == 401
    # The log names the user by id, and nothing of theirs.
    lines = [r.getMessage() for r in caplog.records if r.name == "chat.accounts.account"]
    assert lines == [f"user {user.pk} deleted their account"]
    assert not any(word in lines[0] for word in ("alice", "Alice", "example.com"))
    # Bob has everything still.
    assert await sync_to_async(remains)(bob["user"]) == {
        "user": True,
        "conversations": 1,
        "runs": 1,
        "events": 3,
        "shares": 1,
        "tokens": 1,
        "sessions": 1,
        "settings": 1,
    }
    assert (bob["folder"] / "notes.txt").read_text() == "private"
    assert (await sync_to_async(bobs.get)("/")).status_code == 200
