"""The JSON API (PROTOCOL.md section 2): shapes, ownership, CSRF."""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import Client

from chat import services
from chat.models import Conversation, Run

pytestmark = [pytest.mark.django_db, pytest.mark.services]


@pytest.fixture
def alice(make_user):
    return make_user("alice")


@pytest.fixture
def api(alice):
    client = Client()
    client.force_login(alice)
    return client


def test_anonymous_gets_401(client):
    assert client.get("/api/conversations/").status_code == 401
    assert client.get(f"/api/conversations/{uuid.uuid4()}/events/").status_code == 401


def test_create_list_get_rename_delete(api, alice):
    created = api.post("/api/conversations/", {"title": "  Plans  "}, content_type="application/json")
    assert created.status_code == 201
    body = created.json()
    assert set(body) == {"id", "title", "created_at", "updated_at", "running"}
    assert body["title"] == "Plans" and body["running"] is False
    second = api.post("/api/conversations/", content_type="application/json").json()
    listed = api.get("/api/conversations/").json()["conversations"]
    assert [c["id"] for c in listed] == [second["id"], body["id"]]  # newest first
    assert api.get(f"/api/conversations/{body['id']}/").json()["title"] == "Plans"
    renamed = api.patch(f"/api/conversations/{body['id']}/", {"title": "New"}, content_type="application/json")
    assert renamed.status_code == 200 and renamed.json()["title"] == "New"
    assert api.delete(f"/api/conversations/{body['id']}/").status_code == 204
    assert api.get(f"/api/conversations/{body['id']}/").status_code == 404
    assert not Conversation.objects.filter(pk=body["id"]).exists()


def test_running_mark(api, alice):
    conversation = services.conversation_create(owner=alice)
    services.run_start(conversation=conversation, user=alice, content="hi", model="m", worker="")
    listed = api.get("/api/conversations/").json()["conversations"]
    assert listed[0]["running"] is True
    Run.objects.update(status="succeeded")
    assert api.get(f"/api/conversations/{conversation.pk}/").json()["running"] is False


@pytest.mark.parametrize(
    "body, message",
    [("[]", "JSON object"), ("{bad", "not valid JSON"), ('{"title": 5}', "string"), ('{"title": "' + "x" * 201 + '"}', "longer")],
)
def test_bad_bodies_are_400(api, body, message):
    response = api.post("/api/conversations/", body, content_type="application/json")
    assert response.status_code == 400 and message in response.json()["message"]


def test_patch_requires_title(api, alice):
    conversation = services.conversation_create(owner=alice)
    assert api.patch(f"/api/conversations/{conversation.pk}/", {}, content_type="application/json").status_code == 400


def test_events_after(api, alice):
    conversation = services.conversation_create(owner=alice)
    run, frames = services.run_start(conversation=conversation, user=alice, content="hi", model="m", worker="")
    frames += services.events_append(
        conversation_id=conversation.pk, run_id=run.pk,
        payloads=[{"type": "text", "content": "a"}, {"type": "complete", "status": "succeeded"}],
    )
    url = f"/api/conversations/{conversation.pk}/events/"
    assert api.get(url).json()["events"] == frames
    assert api.get(url + "?after=1").json()["events"] == frames[1:]
    assert api.get(url + "?after=3").json()["events"] == []
    assert api.get(url + "?after=x").status_code == 400


def test_another_user_gets_404_on_every_path(api, alice, make_user):
    mallory = Client()
    mallory.force_login(make_user("mallory"))
    conversation = services.conversation_create(owner=alice, title="secret")
    base = f"/api/conversations/{conversation.pk}/"
    missing = f"/api/conversations/{uuid.uuid4()}/"
    for url in (base, missing):
        responses = [
            mallory.get(url),
            mallory.patch(url, {"title": "pwned"}, content_type="application/json"),
            mallory.delete(url),
            mallory.get(url + "events/"),
        ]
        assert [r.status_code for r in responses] == [404] * 4
        assert all(r.json() == responses[0].json() for r in responses)  # missing and foreign look alike
    assert mallory.get("/api/conversations/").json() == {"conversations": []}
    conversation.refresh_from_db()
    assert conversation.title == "secret"


def test_csrf_is_enforced_on_unsafe_methods(alice):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post("/api/conversations/", "{}", content_type="application/json").status_code == 403
    client.get("/accounts/login/")  # a page with a form sets the csrftoken cookie
    token = client.cookies["csrftoken"].value
    response = client.post("/api/conversations/", "{}", content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 201


def test_healthz(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "channel_layer": "ok"}


def test_chat_page_requires_login(client):
    response = client.get("/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_signup_logs_in(client, settings):
    response = client.post("/accounts/signup/", {"username": "newbie", "password1": "a-long-pass-9981",
                                                  "password2": "a-long-pass-9981"})
    assert response.status_code == 302
    assert client.get("/").status_code == 200


def test_signup_can_be_closed(client, settings):
    settings.ALLOW_SIGNUP = False
    assert client.get("/accounts/signup/").status_code == 404


def test_content_security_policy(api):
    policy = api.get("/")["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "ws://testserver" in policy and "object-src 'none'" in policy
    assert json.loads(api.get("/api/conversations/").content)  # the API works under the same middleware


def test_admin_pages_render_with_workspace_files(alice, settings, tmp_path):
    from django.contrib.auth import get_user_model

    settings.AGENT_WORKSPACE_ROOT = tmp_path
    admin_user = get_user_model().objects.create_superuser("root", password="pw-for-tests-123")
    conversation = services.conversation_create(owner=alice, title="with files")
    run, _ = services.run_start(conversation=conversation, user=alice, content="hi", model="m", worker="")
    workspace = tmp_path / str(conversation.pk)
    workspace.mkdir()
    (workspace / "<img src=x onerror=alert(1)>.txt").write_text("hello")
    client = Client()
    client.force_login(admin_user)
    page = client.get(f"/admin/chat/conversation/{conversation.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "&lt;img src=x onerror=alert(1)&gt;.txt" in html and "5 bytes" in html
    assert "<img src=x" not in html
    for url in ("/admin/chat/conversation/", "/admin/chat/run/", "/admin/chat/event/", "/admin/chat/toolrecord/",
                f"/admin/chat/run/{run.pk}/change/"):
        assert client.get(url).status_code == 200, url
    assert client.get("/admin/chat/event/add/").status_code == 403  # read-mostly


def test_static_files_are_served_by_the_app(client):
    response = client.get("/static/chat/app.js")
    assert response.status_code == 200
    assert b"import" in b"".join(response.streaming_content) if response.streaming else response.content


@pytest.mark.parametrize("body", ["[" * 100_000 + "]" * 100_000, '{"title":' * 100_000 + '"x"' + "}" * 100_000])
def test_deeply_nested_bodies_are_400_not_500(api, body):
    response = api.post("/api/conversations/", body, content_type="application/json")
    assert response.status_code == 400 and "nested too deeply" in response.json()["message"]
