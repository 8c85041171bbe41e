"""The server-rendered pages, without a browser: access, sign-up, banner, CSP, translations."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import translation

from chat.script_strings import JS_STRINGS

STATIC_CHAT = Path(__file__).resolve().parents[2] / "static" / "chat"
MESSAGE_CALL = re.compile(r'\btf?\("((?:[^"\\]|\\.)*)"')


def test_every_script_message_is_handed_to_the_page():
    used = set()
    for script in STATIC_CHAT.glob("*.js"):
        used |= set(MESSAGE_CALL.findall(script.read_text()))
    assert used - set(JS_STRINGS) == set(), "add these to chat.script_strings.JS_STRINGS"
    assert set(JS_STRINGS) - used == set(), "no longer used by the scripts"


def test_every_script_message_has_a_chinese_translation():
    with translation.override("zh-hans"):
        untranslated = [m for m in JS_STRINGS if translation.gettext(m) == m]
    assert untranslated == []


@pytest.mark.django_db
def test_chat_page_needs_login(client):
    response = client.get(reverse("chat"))
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


@pytest.mark.django_db
def test_signup_logs_in_and_redirects(client):
    page = client.get(reverse("signup"))
    assert page.status_code == 200
    assert b'autocomplete="new-password"' in page.content
    response = client.post(
        reverse("signup"), {"username": "newcomer", "password1": "a-Long-pass-123", "password2": "a-Long-pass-123"}
    )
    assert response.status_code == 302 and response["Location"] == reverse("chat")
    assert get_user_model().objects.filter(username="newcomer").exists()
    assert client.get(reverse("chat")).status_code == 200


@pytest.mark.django_db
def test_signup_errors_are_shown(client):
    response = client.post(reverse("signup"), {"username": "x", "password1": "a", "password2": "b"})
    assert response.status_code == 200
    assert b'class="field-error"' in response.content


@pytest.mark.django_db
def test_signup_closed(client, settings):
    settings.ALLOW_SIGNUP = False
    assert client.get(reverse("signup")).status_code == 404
    assert b"/accounts/signup/" not in client.get(reverse("login")).content


@pytest.mark.django_db
@pytest.mark.parametrize(("model", "banner"), [("demo", True), ("gpt-4o-mini", False)])
def test_demo_banner(client, settings, django_user_model, model, banner):
    settings.AGENT_MODEL = model
    client.force_login(django_user_model.objects.create_user("viewer", password="x-Long-pass-1"))
    content = client.get(reverse("chat")).content.decode()
    assert ("banner-demo" in content) is banner
    if banner:
        assert "OPENAI_API_KEY" in content and "AGENT_MODEL" in content


@pytest.mark.django_db
def test_chat_page_has_no_inline_script_or_style(client, django_user_model):
    client.force_login(django_user_model.objects.create_user("viewer", password="x-Long-pass-1"))
    response = client.get(reverse("chat"))
    html = response.content.decode()
    policy = response["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "'unsafe-inline'" not in policy
    for tag in re.findall(r"<script\b[^>]*>", html):
        assert 'src="' in tag or 'type="application/json"' in tag, tag
    assert not re.search(r"""\sstyle\s*=""", html)
    assert not re.search(r"""\son[a-z]+\s*=""", html)


@pytest.mark.django_db
def test_pages_in_chinese_from_accept_language(client):
    response = client.get(reverse("login"), HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9")
    content = response.content.decode()
    assert '<html lang="zh-hans">' in content
    assert "登录" in content
