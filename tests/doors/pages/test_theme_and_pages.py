"""The theme saved on the account and written into every page by the server (chat/doors/pages/theme.py),
the site's own 404 and 500 pages (chat/doors/errors.py) while the API keeps JSON, and sign-up
returning to where it was reached from (a shared link), never to another site."""

from __future__ import annotations

import re

import pytest
from django.contrib.sessions.backends.db import SessionStore
from django.db import OperationalError
from django.template.loader import render_to_string
from django.test import Client

from chat.models import AccountSettings

pytestmark = pytest.mark.django_db

PASSWORD = "pw-for-tests-123"


@pytest.fixture
def alice(make_user):
    return make_user("alice")


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def dark_sheet_media(page: str) -> str:
    return re.search(r'href="[^"]*theme-dark\.css" media="([^"]+)"', page).group(1)


def test_the_saved_theme_is_written_into_every_page(alice):
    client = signed_in(alice)
    page = client.get("/").content.decode()
    assert 'data-theme="system"' in page and dark_sheet_media(page) == "(prefers-color-scheme: dark)"
    assert '<meta name="color-scheme" content="light dark">' in page

    answer = client.post("/account/theme/", {"theme": "dark", "next": "/account/"})
    assert answer.status_code == 302 and answer["Location"] == "/account/"
    assert AccountSettings.objects.get(user=alice).theme == "dark"
    for path in ("/", "/account/", "/accounts/password_change/"):
        page = client.get(path).content.decode()
        assert 'data-theme="dark"' in page and dark_sheet_media(page) == "all", path
        assert '<meta name="color-scheme" content="dark">' in page
    # The code highlighter's light theme is off, its dark one on.
    page = client.get("/").content.decode()
    assert re.search(r'github\.min\.css" media="not all"', page) and re.search(
        r'github-dark\.min\.css" media="all"', page
    )

    assert client.post("/account/theme/", {"theme": "light"}).status_code == 204  # the page's script
    page = client.get("/").content.decode()
    assert 'data-theme="light"' in page and dark_sheet_media(page) == "not all"
    # Another browser of the same account opens in it too.
    assert 'data-theme="light"' in signed_in(alice).get("/account/").content.decode()


def test_a_bad_theme_or_an_outside_next_is_refused(alice):
    client = signed_in(alice)
    assert client.post("/account/theme/", {"theme": "neon"}).status_code == 400
    assert not AccountSettings.objects.filter(user=alice).exists()
    answer = client.post("/account/theme/", {"theme": "dark", "next": "https://evil.example/"})
    assert answer.status_code == 204 and AccountSettings.objects.get(user=alice).theme == "dark"
    assert client.get("/account/theme/").status_code == 405
    assert Client().post("/account/theme/", {"theme": "dark"}).status_code == 302  # to the sign-in page


def test_the_theme_keeps_the_other_settings(alice):
    AccountSettings.objects.create(user=alice, display_name="Alice L.", language="zh-hans")
    signed_in(alice).post("/account/theme/", {"theme": "dark"})
    saved = AccountSettings.objects.get(user=alice)
    assert (saved.display_name, saved.language, saved.theme) == ("Alice L.", "zh-hans", "dark")


def test_the_account_page_has_the_theme_switch_export_all_and_delete(alice):
    page = signed_in(alice).get("/account/").content.decode()
    assert 'action="/account/theme/"' in page and 'name="theme"' in page
    assert 'href="/api/conversations/export/"' in page
    assert 'id="delete-account-form"' in page and 'type="password"' in page
    chat = signed_in(alice).get("/").content.decode()
    assert 'action="/account/theme/"' in chat


@pytest.mark.parametrize("path", ["/no/such/page/", "/account/nope/", "/s/not-a-token/"])
def test_a_missing_page_is_the_sites_own_with_a_way_home(client, alice, path):
    for visitor in (client, signed_in(alice)):
        answer = visitor.get(path)
        page = answer.content.decode()
        assert answer.status_code == 404 and answer["Content-Type"].startswith("text/html")
        assert "chat/app.css" in page and 'class="auth-card error-card"' in page
        assert "<h1>Not Found</h1>" not in page
        assert re.search(r'<a class="btn btn-primary" href="/(accounts/login/)?">', page)


def test_a_revoked_or_unknown_share_link_says_so_and_leaks_no_referrer(client):
    answer = client.get("/s/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA/")
    assert answer.status_code == 404 and "This link is not shared" in answer.content.decode()
    assert answer["Referrer-Policy"] == "no-referrer"


def test_the_json_api_keeps_json_errors(alice):
    client = signed_in(alice)
    for path in ("/api/nope/", "/api/conversations/not-a-uuid/", "/v1/nope"):
        answer = client.get(path)
        assert answer.status_code == 404 and answer["Content-Type"] == "application/json", path


def test_the_500_page_renders_without_a_request_or_a_database(django_assert_num_queries):
    with django_assert_num_queries(0):
        page = render_to_string("500.html", {"message": "The server failed to answer this request."})
    assert "chat/app.css" in page and 'class="auth-card error-card"' in page and 'href="/"' in page
    assert 'data-theme="system"' in page and "(prefers-color-scheme: dark)" in page


def test_a_server_error_on_a_page_is_the_sites_own_page(make_user, monkeypatch):
    client = Client(raise_request_exception=False)
    client.force_login(make_user("dora"))

    def broken(self):
        raise ValueError("a bug")

    monkeypatch.setattr(SessionStore, "load", broken)
    answer = client.get("/")
    assert answer.status_code == 500 and 'class="auth-card error-card"' in answer.content.decode()
    assert "The server failed to answer this request." in answer.content.decode()

    def too_many(self):
        raise OperationalError("FATAL:  sorry, too many clients already")

    monkeypatch.setattr(SessionStore, "load", too_many)
    answer = client.get("/account/")
    assert answer.status_code == 503 and "cannot reach its database" in answer.content.decode()


def sign_up(client: Client, username: str, next_url: str | None, where: str = "post"):
    data = {"username": username, "password1": PASSWORD, "password2": PASSWORD}
    path = "/accounts/signup/"
    if next_url is not None and where == "post":
        data["next"] = next_url
    elif next_url is not None:
        path += f"?next={next_url}"
    return client.post(path, data)


def test_sign_up_from_a_shared_link_returns_to_it(client):
    page = client.get("/accounts/login/?next=/s/abc/").content.decode()
    assert 'href="/accounts/signup/?next=/s/abc/"' in page
    page = client.get("/accounts/signup/?next=/s/abc/").content.decode()
    assert '<input type="hidden" name="next" value="/s/abc/">' in page
    assert 'href="/accounts/login/?next=/s/abc/"' in page
    answer = sign_up(client, "newcomer", "/s/abc/")
    assert answer.status_code == 302 and answer["Location"] == "/s/abc/"


@pytest.mark.parametrize(
    "target", ["https://evil.example/", "//evil.example/", "/\\evil.example", "javascript:alert(1)", ""]
)
def test_sign_up_never_sends_the_browser_to_another_site(client, target):
    page = client.get(f"/accounts/signup/?next={target}").content.decode()
    assert '<input type="hidden" name="next"' not in page
    answer = sign_up(Client(), f"user{abs(hash(target)) % 10**6}", target)
    assert answer.status_code == 302 and answer["Location"] == "/"
