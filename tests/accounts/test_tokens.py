"""Personal API tokens (docs/protocol.md, "API tokens"): made by a session and shown once,
stored as a hash, listed and revoked; `Authorization: Bearer` on /api/ without CSRF and on the
WebSocket without a cookie or an Origin; refused when unknown, expired, revoked or its user is
deactivated, with `401` and `WWW-Authenticate`; never opening the admin or the inspector;
failed attempts throttled like passwords; a revoked token's sockets closed at once."""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.utils import timezone

from chat.accounts import held_credentials
from chat.accounts.bearer import socket_token_user
from chat.accounts.process_cache import cache
from chat.accounts.sessions import SessionStore
from chat.accounts.token_lockout import ADDRESS_LIMIT_FACTOR, token_check, token_checks
from chat.accounts.tokens import token_create
from chat.conversations.services import conversation_create
from chat.models import ApiToken, UserSession
from serving.proxy import socket_client_address
from tests.asgi_socket import Socket

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fresh_failure_counts():
    cache.clear()  # the failed-attempt counters live in the cache
    yield
    cache.clear()


def session_client(user) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/account/")  # the csrftoken cookie
    return client


def csrf(client: Client) -> dict:
    return {"HTTP_X_CSRFTOKEN": client.cookies["csrftoken"].value}


def random_token() -> str:
    return "as_" + secrets.token_urlsafe(32)


def bearer(value: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {value}"}


def make_token(client: Client, **body) -> dict:
    response = client.post("/api/tokens/", json.dumps(body), content_type="application/json", **csrf(client))
    assert response.status_code == 201, response.content
    return response.json()


def test_a_token_is_made_by_a_session_shown_once_and_stored_as_a_hash(make_user):
    alice = make_user("alice")
    client = session_client(alice)
    made = make_token(client, name="CI job", expiresInDays=30)
    value = made["token"]
    assert re.fullmatch(r"as_[A-Za-z0-9_-]{43}", value)
    assert made["name"] == "CI job" and made["lastUsedAt"] is None
    assert (
        timedelta(days=29) < timezone.datetime.fromisoformat(made["expiresAt"]) - timezone.now() <= timedelta(days=30)
    )
    row = ApiToken.objects.get(pk=made["id"])
    assert row.digest == hashlib.sha256(value.encode()).hexdigest()
    assert value not in json.dumps(list(ApiToken.objects.values()), default=str)  # the value is nowhere
    listed = client.get("/api/tokens/").json()["tokens"]
    assert [t["id"] for t in listed] == [made["id"]] and "token" not in listed[0]
    assert listed[0]["hint"] == value[:7]


def test_bad_bodies_are_refused_with_400(make_user):
    client = session_client(make_user("alice"))
    for body, why in [
        ({}, "name is required"),
        ({"name": "   "}, "name is required"),
        ({"name": 5}, "name must be a string"),
        ({"name": "x" * 101}, "longer than 100"),
        ({"name": "x", "expiresInDays": 0}, "expiresInDays"),
        ({"name": "x", "expiresInDays": True}, "expiresInDays"),
        ({"name": "x", "expiresInDays": 99999}, "expiresInDays"),
        ({"name": "a\x00b"}, "cannot be stored"),
    ]:
        response = client.post("/api/tokens/", json.dumps(body), content_type="application/json", **csrf(client))
        assert response.status_code == 400 and why in response.json()["message"], (body, response.content)
    assert not ApiToken.objects.exists()


def test_bearer_authenticates_the_api_without_csrf_and_session_requests_keep_it(make_user):
    alice = make_user("alice")
    _, value = token_create(user=alice, name="script")
    program = Client(enforce_csrf_checks=True)  # no cookie at all
    made = program.post(
        "/api/conversations/", json.dumps({"title": "from a script"}), "application/json", **bearer(value)
    )
    assert made.status_code == 201 and made.json()["title"] == "from a script"
    listed = program.get("/api/conversations/", **bearer(value)).json()["conversations"]
    assert [c["title"] for c in listed] == ["from a script"]
    # A session without the CSRF token is still refused.
    session = Client(enforce_csrf_checks=True)
    session.force_login(alice)
    assert session.post("/api/conversations/", "{}", content_type="application/json").status_code == 403
    # The token's user, whatever cookie comes with it.
    bob = make_user("bob")
    session.force_login(bob)
    assert [c["title"] for c in session.get("/api/conversations/", **bearer(value)).json()["conversations"]] == [
        "from a script"
    ]
    assert ApiToken.objects.get().last_used_at is not None


def test_unknown_expired_revoked_and_deactivated_tokens_get_401(make_user):
    alice = make_user("alice")
    expired, expired_value = token_create(user=alice, name="old", expires_in_days=1)
    ApiToken.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    revoked, revoked_value = token_create(user=alice, name="gone")
    revoked.delete()
    carol = make_user("carol")
    _, inactive_value = token_create(user=carol, name="hers")
    carol.is_active = False
    carol.save()
    client = Client()
    for value in ["as_" + "x" * 43, "nonsense", expired_value, revoked_value, inactive_value, ""]:
        response = client.get("/api/conversations/", **bearer(value))
        assert response.status_code == 401, value
        assert response.json()["error"] == "not_authenticated"
        assert response["WWW-Authenticate"].startswith("Bearer")


def test_a_token_cannot_make_tokens_but_can_list_and_revoke(make_user):
    alice = make_user("alice")
    token, value = token_create(user=alice, name="script")
    program = Client()
    refused = program.post("/api/tokens/", json.dumps({"name": "more"}), "application/json", **bearer(value))
    assert refused.status_code == 403 and ApiToken.objects.count() == 1
    assert [t["name"] for t in program.get("/api/tokens/", **bearer(value)).json()["tokens"]] == ["script"]
    assert program.delete(f"/api/tokens/{token.pk}/", **bearer(value)).status_code == 204
    assert program.get("/api/tokens/", **bearer(value)).status_code == 401  # revoked at once


def test_another_users_token_is_not_found(make_user):
    alice, bob = make_user("alice"), make_user("bob")
    token, _ = token_create(user=alice, name="hers")
    bobs = session_client(bob)
    assert bobs.delete(f"/api/tokens/{token.pk}/", **csrf(bobs)).status_code == 404
    assert bobs.get("/api/tokens/").json()["tokens"] == []
    assert ApiToken.objects.filter(pk=token.pk).exists()


def test_a_staff_token_never_opens_the_admin_or_the_inspector(make_user):
    staff = get_user_model().objects.create_user(username="ops", password="pw-for-tests-123", is_staff=True)
    _, value = token_create(user=staff, name="ops script")
    client = Client()
    admin = client.get("/admin/", **bearer(value))
    assert admin.status_code == 302 and "/admin/login/" in admin["Location"]
    assert client.get("/inspect/", **bearer(value)).status_code in (302, 404)
    assert client.get("/", **bearer(value)).status_code == 302  # the chat page wants a session


def test_a_guesser_is_stopped_without_locking_out_its_neighbours(make_user, settings):
    """One address (a NAT) with a client guessing tokens and a program with a good one: past the
    address's limit the guesses get 429, the good token still works (docs/protocol.md)."""
    settings.LOGIN_FAILURE_LIMIT = 3
    alice = make_user("alice")
    _, value = token_create(user=alice, name="good")
    nat = Client(REMOTE_ADDR="198.51.100.4")
    address_limit = 3 * ADDRESS_LIMIT_FACTOR
    for _ in range(address_limit):
        assert nat.get("/api/conversations/", **bearer(random_token())).status_code == 401
    throttled = nat.get("/api/conversations/", **bearer(random_token()))
    assert throttled.status_code == 429 and throttled.json()["error"] == "rate_limited"
    assert nat.get("/api/conversations/", **bearer("not even a token")).status_code == 429
    assert nat.get("/api/conversations/", **bearer(value)).status_code == 200  # the neighbour's token
    # The socket's handshake counts and takes tokens the same way.
    scope = {"client": ("198.51.100.4", 5000), "headers": []}
    assert socket_token_user(scope, random_token()) == (None, None)
    assert socket_token_user(scope, value)[0] == alice


def test_attempts_at_one_tokens_prefix_lock_that_token_out_from_everywhere(make_user, settings):
    settings.LOGIN_FAILURE_LIMIT = 3
    alice = make_user("alice")
    _, value = token_create(user=alice, name="aimed at")
    _, other = token_create(user=alice, name="another")
    for n in range(3):  # a wrong secret under its prefix, from a new address each time
        aimed = Client(REMOTE_ADDR=f"203.0.113.{n}")
        assert aimed.get("/api/conversations/", **bearer(value[:7] + random_token()[7:])).status_code == 401
    for address in ("203.0.113.0", "192.0.2.1"):  # the token itself is held back, wherever it comes from
        held = Client(REMOTE_ADDR=address).get("/api/conversations/", **bearer(value))
        assert held.status_code == 429 and held.json()["error"] == "rate_limited"
    assert Client(REMOTE_ADDR="203.0.113.0").get("/api/conversations/", **bearer(other)).status_code == 200
    assert cache.get(f"token-failures:prefix:{value[:7]}") == 3
    # Wrong secrets under a prefix no token has count against the address only.
    unknown = "as_" + ("A" if value[3] != "A" else "B") * 4
    for _ in range(5):
        Client(REMOTE_ADDR="192.0.2.7").get("/api/conversations/", **bearer(unknown + random_token()[7:]))
    assert cache.get(f"token-failures:prefix:{unknown}") is None and cache.get("token-failures:192.0.2.7") == 5


async def test_a_program_opens_a_socket_with_its_token_and_revoking_closes_it(make_user, registry):
    alice = await sync_to_async(make_user)("alice")
    conversation = await sync_to_async(conversation_create)(owner=alice, title="t")
    token, value = await sync_to_async(token_create)(user=alice, name="bot")
    sock = Socket(None, conversation.pk, origin=None, token=value)  # no cookie, no Origin
    assert await sock.connect() == (True, None)
    assert (await sock.history())[-1]["type"] == "sync"
    # A page's socket of the same user stays open when the token goes.
    page = Socket(alice, conversation.pk)
    await page.connect()
    await page.history()
    await sync_to_async(token.delete)()
    assert await sock.comm.receive_output(timeout=5) == {"type": "websocket.close", "code": 4401}
    await page.send({"type": "ping"})
    assert await page.recv() == {"type": "pong"}
    await page.close()


async def test_a_socket_with_a_bad_token_is_closed_4401_and_without_one_needs_an_origin(make_user, registry):
    alice = await sync_to_async(make_user)("alice")
    conversation = await sync_to_async(conversation_create)(owner=alice, title="t")
    bad = Socket(alice, conversation.pk, origin=None, token="as_wrong")  # the cookie is not used either
    assert await bad.connect() == (True, None)
    assert await bad.comm.receive_output(timeout=5) == {"type": "websocket.close", "code": 4401}
    no_origin = Socket(alice, conversation.pk, origin=None)  # a cookie without an origin: refused
    assert (await no_origin.connect())[0] is False


async def test_a_token_socket_re_checks_its_token(make_user, registry, monkeypatch):
    """A revocation push that got lost: the re-check of its token by the next frame that acts (a
    ping checks nothing) closes it."""
    monkeypatch.setattr(held_credentials, "SESSION_RECHECK_SECONDS", 0)
    alice = await sync_to_async(make_user)("alice")
    conversation = await sync_to_async(conversation_create)(owner=alice, title="t")
    token, value = await sync_to_async(token_create)(user=alice, name="bot")
    sock = Socket(None, conversation.pk, origin=None, token=value)
    await sock.connect()
    await sock.history()
    await sync_to_async(ApiToken.objects.filter(pk=token.pk).update)(expires_at=timezone.now())
    await sock.send({"type": "ping"})
    assert await sock.recv() == {"type": "pong"}
    await sock.send({"type": "cancel"})
    assert await sock.comm.receive_output(timeout=5) == {"type": "websocket.close", "code": 4401}


def rows_holding(text: str) -> list[str]:
    """Every table of the database read whole, session rows decoded: where `text` is found."""
    found = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            found += [f"{table}: {row}" for row in cursor.fetchall() if text in repr(row)]
    for session in UserSession.objects.all():
        if text in repr(SessionStore().decode(session.session_data)):
            found.append(f"session {session.session_key}")
    return found


def test_the_account_page_makes_shows_once_lists_and_revokes(make_user):
    alice = make_user("alice")
    client = Client()
    client.force_login(alice)
    created = client.post("/account/tokens/", {"name": "laptop script", "expires_in_days": "30"})
    # The answer to the POST shows the value, and only that answer: nothing at rest holds it.
    assert created.status_code == 201 and created["Cache-Control"] == "no-store"
    page = created.content.decode()
    value = re.search(r'id="new-token"[^>]*value="(as_[^"]+)"', page).group(1)
    assert hashlib.sha256(value.encode()).hexdigest() == ApiToken.objects.get().digest
    assert "laptop script" in page and 'data-copy="new-token"' in page and 'data-page-url="/account/"' in page
    assert UserSession.objects.filter(user_id=alice.pk).exists()
    assert rows_holding(value) == [] and rows_holding(value[10:30]) == []
    again = client.get("/account/").content.decode()
    assert value not in again and "laptop script" in again  # shown once
    assert client.get("/account/tokens/")["Location"] == "/account/"  # the address bar's URL, reloaded
    assert client.get("/api/conversations/", **bearer(value)).status_code == 200
    token = ApiToken.objects.get()
    assert client.post(f"/account/tokens/{token.pk}/revoke/").status_code == 302
    assert not ApiToken.objects.exists()
    assert client.get("/api/conversations/", **bearer(value)).status_code == 401


def test_staff_see_and_revoke_tokens_in_the_admin_without_their_values(make_user):
    alice = make_user("alice")
    token, value = token_create(user=alice, name="hers")
    staff = get_user_model().objects.create_superuser(username="root", password="pw-for-tests-123")
    client = Client()
    client.force_login(staff)
    listing = client.get("/admin/chat/apitoken/").content.decode()
    assert "hers" in listing and value not in listing and token.digest not in listing
    detail = client.get(f"/admin/chat/apitoken/{token.pk}/change/").content.decode()
    assert token.digest not in detail and value not in detail
    assert client.post(f"/admin/chat/apitoken/{token.pk}/delete/", {"post": "yes"}).status_code == 302
    assert Client().get("/api/conversations/", **bearer(value)).status_code == 401


def test_a_sockets_address_is_believed_from_trusted_proxies_only(settings):
    scope = {"client": ("10.0.0.2", 5000), "headers": [(b"x-forwarded-for", b"203.0.113.7, 198.51.100.1")]}
    settings.TRUSTED_PROXIES = []
    assert socket_client_address(scope) == "10.0.0.2"  # no proxy trusted: the peer
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    assert socket_client_address(scope) == "198.51.100.1"  # the first address a trusted proxy vouches for
    settings.TRUSTED_PROXIES = ["10.0.0.0/8", "198.51.100.0/24"]
    assert socket_client_address(scope) == "203.0.113.7"


def test_checks_of_a_group_answer_as_each_alone_and_a_revoked_token_is_refused_by_the_next(make_user):
    """The bearer checks of concurrent requests go to the database as one group
    (chat.accounts.token_checks): each answers as its own check would, the same token twice
    included, and nothing is kept between groups."""
    ada, bob = make_user("ada"), make_user("bob")
    (ada_token, ada_value), (_, bob_value) = token_create(user=ada, name="a"), token_create(user=bob, name="b")
    asked = [(ada_value, "10.0.0.1"), (bob_value, "10.0.0.2"), ("as_" + "x" * 43, "10.0.0.3"), (ada_value, "10.0.0.4")]
    checks = token_checks(asked)
    assert [check.user for check in checks] == [ada, bob, None, ada]
    assert checks[0].user is not checks[3].user  # no two requests share a user object
    assert [token_check(value, address) for value, address in asked] == checks
    assert ApiToken.objects.get(pk=ada_token.pk).last_used_at is not None
    ada_token.delete()
    assert [check.user for check in token_checks(asked)] == [None, bob, None, None]
