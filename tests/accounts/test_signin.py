"""Sign-in lockout (django-axes), the sign-up limit per address, password reset only with mail.

Each test uses addresses of its own (documentation ranges, never contacted), so that the
counters of one test, kept in Redis on the PostgreSQL + Redis pass, never meet another's.
"""

from __future__ import annotations

import importlib
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client
from django.urls import clear_url_caches, reverse

import agentsite.urls

pytestmark = [pytest.mark.django_db, pytest.mark.services]

PASSWORD = "right-Pass-w0rd-long"  # noqa: S105 - a test account
LOCKED = "Too many failed sign-in attempts"


def address() -> str:
    return f"2001:db8::{uuid.uuid4().hex[:4]}:{uuid.uuid4().hex[:4]}"


@pytest.fixture
def lockout(settings):
    settings.AXES_FAILURE_LIMIT = 3
    return settings


def sign_in(client: Client, username: str, password: str, ip: str):
    return client.post(reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=ip)


def user(name: str | None = None):
    return get_user_model().objects.create_user(username=name or f"u{uuid.uuid4().hex[:8]}", password=PASSWORD)


def test_wrong_passwords_lock_the_username_even_with_the_right_password(lockout):
    alice = user()
    attacker = address()
    codes = [sign_in(Client(), alice.username, "wrong", attacker).status_code for _ in range(3)]
    assert codes == [200, 200, 429]  # the third failure reaches the limit
    # From anywhere else too: the account is locked, not only the attacker's address.
    client = Client()
    response = sign_in(client, alice.username, PASSWORD, address())
    assert response.status_code == 429
    page = response.content.decode()
    assert LOCKED in page and "15 minutes" in page and 'name="password"' in page
    assert "sessionid" not in client.cookies
    # Another account from that second address is not affected.
    bob = user()
    assert sign_in(Client(), bob.username, PASSWORD, address()).status_code == 302


def test_failures_from_one_address_lock_that_address_only(lockout):
    alice = user()
    attacker = address()
    # A different (unknown) username each time: only the address adds up.
    codes = [sign_in(Client(), f"guess{n}-{uuid.uuid4().hex[:6]}", "wrong", attacker).status_code for n in range(3)]
    assert codes == [200, 200, 429]
    assert sign_in(Client(), alice.username, PASSWORD, attacker).status_code == 429
    client = Client()
    assert sign_in(client, alice.username, PASSWORD, address()).status_code == 302
    assert client.get(reverse("chat")).status_code == 200


def test_a_success_does_not_wipe_the_failures_of_another_account(lockout):
    """With axes' reset-on-success, signing in to one's own account from the attacking
    address would delete the victim's failures from it: guessing could go on for ever."""
    victim, own = user(), user()
    attacker = address()
    for _ in range(2):
        sign_in(Client(), victim.username, "wrong", attacker)
    assert sign_in(Client(), own.username, PASSWORD, attacker).status_code == 302
    sign_in(Client(), victim.username, "wrong", address())
    assert sign_in(Client(), victim.username, PASSWORD, address()).status_code == 429


def test_a_forged_forwarded_for_does_not_escape_the_address_lockout(lockout):
    """X-Forwarded-For from a peer that is not a trusted proxy is not believed."""
    lockout.TRUSTED_PROXIES = ["127.0.0.1"]
    alice = user()
    attacker = address()
    for n in range(3):
        Client().post(
            reverse("login"),
            {"username": f"guess{n}-{uuid.uuid4().hex[:6]}", "password": "x"},
            REMOTE_ADDR=attacker,
            HTTP_X_FORWARDED_FOR=address(),
        )
    response = Client().post(
        reverse("login"),
        {"username": alice.username, "password": PASSWORD},
        REMOTE_ADDR=attacker,
        HTTP_X_FORWARDED_FOR=address(),
    )
    assert response.status_code == 429


def test_behind_a_trusted_proxy_the_forwarded_address_is_the_client(lockout):
    lockout.TRUSTED_PROXIES = ["127.0.0.1"]
    alice = user()
    attacker = address()
    for n in range(3):  # all through the proxy at 127.0.0.1, from one client address
        Client().post(
            reverse("login"),
            {"username": f"guess{n}-{uuid.uuid4().hex[:6]}", "password": "x"},
            REMOTE_ADDR="127.0.0.1",
            HTTP_X_FORWARDED_FOR=attacker,
        )

    def through_proxy(client_ip):
        return Client().post(
            reverse("login"),
            {"username": alice.username, "password": PASSWORD},
            REMOTE_ADDR="127.0.0.1",
            HTTP_X_FORWARDED_FOR=client_ip,
        )

    assert through_proxy(attacker).status_code == 429
    # The proxy's own address was never locked: other clients behind it still sign in.
    assert through_proxy(address()).status_code == 302


def signup(client: Client, ip: str, username: str | None = None):
    username = username or f"n{uuid.uuid4().hex[:10]}"
    return client.post(
        reverse("signup"), {"username": username, "password1": PASSWORD, "password2": PASSWORD}, REMOTE_ADDR=ip
    ), username


def test_signups_per_address_are_limited(settings):
    settings.SIGNUP_RATE_LIMIT = 2
    ip = address()
    for _ in range(2):
        response, _name = signup(Client(), ip)
        assert response.status_code == 302
    response, name = signup(Client(), ip)
    assert response.status_code == 429
    assert "Too many accounts were created from your network" in response.content.decode()
    assert not get_user_model().objects.filter(username=name).exists()
    # Another address is not affected; an invalid form does not count.
    response, _name = signup(Client(), address())
    assert response.status_code == 302
    other = address()
    for _ in range(3):
        bad = Client().post(reverse("signup"), {"username": "x", "password1": "a", "password2": "b"}, REMOTE_ADDR=other)
        assert bad.status_code == 200
    assert signup(Client(), other)[0].status_code == 302


@pytest.fixture
def reload_urls(settings):
    """agentsite.urls decides at import which account pages exist: import it again."""

    def load(**overrides):
        for name, value in overrides.items():
            setattr(settings, name, value)
        importlib.reload(agentsite.urls)
        clear_url_caches()

    yield load
    settings.PASSWORD_RESET_ENABLED = False
    load()


def test_password_reset_is_not_offered_without_a_mail_server(client, reload_urls):
    reload_urls(PASSWORD_RESET_ENABLED=False)
    assert client.get("/accounts/password_reset/").status_code == 404
    assert client.get("/accounts/reset/MQ/set-password/").status_code == 404
    page = client.get(reverse("login")).content.decode()
    assert "/accounts/password_reset/" not in page and "Forgot" not in page
    # The other account pages are still there.
    assert client.get("/accounts/login/").status_code == 200


def test_password_reset_works_with_a_mail_server(client, reload_urls):
    reload_urls(PASSWORD_RESET_ENABLED=True)
    page = client.get(reverse("login")).content.decode()
    assert 'href="/accounts/password_reset/"' in page
    alice = get_user_model().objects.create_user(username="alice", email="alice@example.com", password=PASSWORD)
    response = client.post("/accounts/password_reset/", {"email": alice.email})
    assert response.status_code == 302
    assert len(mail.outbox) == 1 and "/accounts/reset/" in mail.outbox[0].body
