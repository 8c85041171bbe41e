"""The account page (chat.doors.pages.pages.account_page, chat.accounts.account): settings, the language that follows
the account, signing out of the other sessions (their sockets too), the password change in the
app's style; and the admin's name and /favicon.ico."""

from __future__ import annotations

import importlib
import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore as DjangoSessionStore
from django.contrib.sessions.models import Session as DjangoSession
from django.test import Client

from agentsite.asgi import application
from chat.conversations.services import conversation_create
from chat.models import AccountSettings, UserSession

PASSWORD = "pw-for-tests-123"


@pytest.fixture
def alice(db):
    return get_user_model().objects.create_user(username="alice", password=PASSWORD, email="a@example.com")


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_page_needs_a_sign_in(client, db):
    answer = client.get("/account/")
    assert answer.status_code == 302 and answer["Location"].startswith("/accounts/login/")


def test_the_page_shows_the_settings_and_saves_them(alice):
    client = signed_in(alice)
    page = client.get("/account/").content.decode()
    assert 'class="account-card"' in page and "Django administration" not in page
    for name in ("display_name", "email", "language"):
        assert f'name="{name}"' in page
    assert 'value="a@example.com"' in page
    assert 'href="/accounts/password_change/"' in page
    answer = client.post("/account/", {"display_name": "Alice Liddell", "email": "alice@example.org", "language": ""})
    assert answer.status_code == 302 and answer["Location"] == "/account/"
    alice.refresh_from_db()
    assert alice.email == "alice@example.org"
    assert AccountSettings.objects.get(user=alice).display_name == "Alice Liddell"
    page = client.get("/account/").content.decode()
    assert "Your account is saved." in page and "Alice Liddell" in page
    # The sidebar shows the name and leads to the page.
    chat = client.get("/").content.decode()
    assert '<a class="user-name" id="account-link" href="/account/"' in chat and ">Alice Liddell</a>" in chat


def test_a_bad_email_is_refused_and_nothing_is_saved(alice):
    client = signed_in(alice)
    answer = client.post("/account/", {"display_name": "X", "email": "not an address", "language": "xx"})
    assert answer.status_code == 400
    page = answer.content.decode()
    assert 'class="field-error"' in page and "Enter a valid email address." in page
    alice.refresh_from_db()
    assert alice.email == "a@example.com" and not AccountSettings.objects.filter(user=alice).exists()


def test_the_language_follows_the_account_to_another_browser(alice):
    first = signed_in(alice)
    # The sidebar's language menu, while signed in.
    answer = first.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    assert answer.status_code == 302
    assert AccountSettings.objects.get(user=alice).language == "zh-hans"
    # Another browser: no language cookie, an English Accept-Language.
    second = Client(headers={"accept-language": "en"})
    assert '<html lang="en">' in second.get("/accounts/login/").content.decode()
    second.force_login(alice)
    page = second.get("/").content.decode()
    assert '<html lang="zh-hans">' in page
    # Chosen on the account page, back to English everywhere.
    first.post("/account/", {"display_name": "", "email": "a@example.com", "language": "en"})
    third = Client(headers={"accept-language": "zh-hans"})
    third.force_login(alice)
    assert '<html lang="en">' in third.get("/").content.decode()


def test_each_session_row_names_its_user_also_after_a_password_change(alice):
    client = Client()
    client.force_login(alice)
    key = client.cookies["sessionid"].value
    assert UserSession.objects.get(session_key=key).user_id == alice.pk
    answer = client.post(
        "/accounts/password_change/",
        {
            "old_password": PASSWORD,
            "new_password1": "a-new-pw-for-tests-456",
            "new_password2": "a-new-pw-for-tests-456",
        },
    )
    assert answer.status_code == 302
    new_key = client.cookies["sessionid"].value
    assert new_key != key and UserSession.objects.get(session_key=new_key).user_id == alice.pk


def test_the_password_change_is_in_the_app_style(alice):
    client = signed_in(alice)
    page = client.get("/accounts/password_change/").content.decode()
    assert 'class="auth-card"' in page and "Django administration" not in page
    assert 'href="/account/"' in page
    done = client.get("/accounts/password_change/done/").content.decode()
    assert 'class="auth-card"' in done and "Django administration" not in done


def test_the_admin_carries_the_product_name_and_the_favicon_is_served(admin_client):
    assert "agentsite administration" in admin_client.get("/admin/").content.decode()
    answer = admin_client.get("/favicon.ico")
    assert answer.status_code == 301
    icon = Client().get(answer["Location"])
    assert icon.status_code == 200 and icon["Content-Type"] == "image/svg+xml"


def test_the_upgrade_keeps_everyone_signed_in(alice, settings):
    """The migration copies the sessions of Django's engine, each with its user."""
    old = DjangoSessionStore()
    old.update({"_auth_user_id": str(alice.pk), "_auth_user_backend": settings.AUTHENTICATION_BACKENDS[-1]})
    old.create()
    anonymous = DjangoSessionStore()
    anonymous["cart"] = 1
    anonymous.create()
    migration = importlib.import_module("chat.migrations.0016_accounts")
    migration.copy_sessions(apps, None)
    assert UserSession.objects.get(session_key=old.session_key).user_id == alice.pk
    assert UserSession.objects.get(session_key=anonymous.session_key).user_id is None
    assert DjangoSession.objects.count() == 2


# -- sign out of all other sessions ---------------------------------------------------------------


async def open_socket(conversation_id, session_key: str) -> WebsocketCommunicator:
    comm = WebsocketCommunicator(
        application,
        f"/ws/chat/{conversation_id}/",
        headers=[
            (b"origin", b"http://localhost"),
            (b"host", b"localhost"),
            (b"cookie", f"sessionid={session_key}".encode()),
        ],
    )
    assert (await comm.connect(timeout=5))[0]
    while json.loads(await comm.receive_from(timeout=5))["type"] != "sync":
        pass
    return comm


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
async def test_signing_out_of_the_other_sessions_ends_them_and_closes_their_sockets(registry):
    alice = await sync_to_async(get_user_model().objects.create_user)(username="alice", password=PASSWORD)
    bob = await sync_to_async(get_user_model().objects.create_user)(username="bob", password=PASSWORD)
    conversation = await sync_to_async(conversation_create)(owner=alice, title="t")
    here, phone, laptop, bobs = [await sync_to_async(signed_in)(user) for user in (alice, alice, alice, bob)]
    keys = [client.cookies["sessionid"].value for client in (here, phone, laptop)]
    sockets = [await open_socket(conversation.pk, key) for key in keys]

    page = (await sync_to_async(here.get)("/account/")).content.decode()
    assert "2 other browsers or devices" in page
    answer = await sync_to_async(here.post)("/account/sign-out-others/")
    assert answer.status_code == 302 and answer["Location"] == "/account/"

    for comm in sockets[1:]:
        output = await comm.receive_output(timeout=5)
        assert output == {"type": "websocket.close", "code": 4401}
    await sockets[0].send_to(text_data=json.dumps({"type": "ping"}))
    assert json.loads(await sockets[0].receive_from(timeout=5)) == {"type": "pong"}
    for client in (phone, laptop):
        assert (await sync_to_async(client.get)("/")).status_code == 302
    assert (await sync_to_async(here.get)("/")).status_code == 200
    assert (await sync_to_async(bobs.get)("/")).status_code == 200  # another user's sessions are not touched
    page = (await sync_to_async(here.get)("/account/")).content.decode()
    assert "Signed out of 2 other sessions." in page and "You are not signed in anywhere else." in page
    for comm in sockets:
        await comm.disconnect()


def test_signing_out_needs_a_post(alice):
    assert signed_in(alice).get("/account/sign-out-others/").status_code == 405
