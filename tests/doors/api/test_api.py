"""The JSON API (docs/protocol.md, "The JSON API"): shapes, ownership, CSRF."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
from django.test import Client

from chat.conversations.services import conversation_create
from chat.eventlog.append import events_append
from chat.models import Conversation, Run
from chat.runs.starts import run_start

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def test_anonymous_gets_401(client):
    assert client.get("/api/conversations/").status_code == 401
    assert client.get(f"/api/conversations/{uuid.uuid4()}/events/").status_code == 401


def test_create_list_get_rename_delete(api, alice):
    created = api.post("/api/conversations/", {"title": "  Plans  "}, content_type="application/json")
    assert created.status_code == 201
    body = created.json()
    assert set(body) == {
        "id", "title", "titleSource", "pinned", "archived", "agent", "created_at", "updated_at", "running", "viewed_seq"
    }  # fmt: skip
    assert body["agent"] == "default" and body["viewed_seq"] is None  # nothing chosen: the newest branch
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
    conversation = conversation_create(owner=alice)
    run_start(conversation=conversation, user=alice, content="hi", model="m", worker="")
    listed = api.get("/api/conversations/").json()["conversations"]
    assert listed[0]["running"] is True
    Run.objects.update(status="succeeded")
    assert api.get(f"/api/conversations/{conversation.pk}/").json()["running"] is False


@pytest.mark.parametrize(
    "body, message",
    [
        ("[]", "JSON object"),
        ("{bad", "not valid JSON"),
        ('{"title": 5}', "string"),
        ('{"title": "' + "x" * 201 + '"}', "longer"),
    ],
)
def test_bad_bodies_are_400(api, body, message):
    response = api.post("/api/conversations/", body, content_type="application/json")
    assert response.status_code == 400 and message in response.json()["message"]


def test_patch_requires_title(api, alice):
    conversation = conversation_create(owner=alice)
    assert api.patch(f"/api/conversations/{conversation.pk}/", {}, content_type="application/json").status_code == 400


def test_events_after(api, alice):
    conversation = conversation_create(owner=alice)
    run, frames = run_start(conversation=conversation, user=alice, content="hi", model="m", worker="")
    frames += events_append(
        conversation_id=conversation.pk,
        run_id=run.pk,
        payloads=[{"type": "text", "content": "a"}, {"type": "complete", "status": "succeeded"}],
    )
    url = f"/api/conversations/{conversation.pk}/events/"

    def events(query: str = "") -> list[dict]:
        return json.loads(b"".join(api.get(url + query)))["events"]  # streamed (chat.doors.api.event_pages)

    assert events() == frames
    assert events("?after=1") == frames[1:]
    assert events("?after=3") == []
    assert api.get(url + "?after=x").status_code == 400


def test_another_user_gets_404_on_every_path(api, alice, make_user):
    mallory = Client()
    mallory.force_login(make_user("mallory"))
    conversation = conversation_create(owner=alice, title="secret")
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
    assert mallory.get("/api/conversations/").json() == {"conversations": [], "next": None}
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
    assert response.json() == {"status": "ok", "database": "ok", "event_writer": "ok", "channel_layer": "ok"}


def test_chat_page_requires_login(client):
    response = client.get("/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_signup_logs_in(client, settings):
    response = client.post(
        "/accounts/signup/", {"username": "newbie", "password1": "a-long-pass-9981", "password2": "a-long-pass-9981"}
    )
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
    conversation = conversation_create(owner=alice, title="with files")
    run, _ = run_start(conversation=conversation, user=alice, content="hi", model="m", worker="")
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
    for url in (
        "/admin/chat/conversation/",
        "/admin/chat/run/",
        "/admin/chat/event/",
        "/admin/chat/toolrecord/",
        f"/admin/chat/run/{run.pk}/change/",
    ):
        assert client.get(url).status_code == 200, url
    assert client.get("/admin/chat/event/add/").status_code == 403  # read-mostly


def test_static_files_are_served_by_the_app(client):
    response = client.get("/static/chat/app.js")
    assert response.status_code == 200
    assert b"import" in b"".join(response.streaming_content) if response.streaming else response.content


def _page(api, **params):
    response = api.get("/api/conversations/", params)
    assert response.status_code == 200, response.content
    body = response.json()
    return [c["id"] for c in body["conversations"]], body["next"]


def test_the_list_is_paged_newest_first(api, alice, make_user):
    from django.utils import timezone

    now = timezone.now()
    ids = []
    for minutes in range(7):
        conversation = conversation_create(owner=alice)
        Conversation.objects.filter(pk=conversation.pk).update(updated_at=now - timedelta(minutes=minutes))
        ids.append(str(conversation.pk))
    conversation_create(owner=make_user("bob"))  # never in alice's pages
    first, cursor = _page(api, limit=3)
    assert first == ids[:3] and cursor
    second, cursor = _page(api, limit=3, before=cursor)
    assert second == ids[3:6] and cursor
    third, cursor = _page(api, limit=3, before=cursor)
    assert third == ids[6:] and cursor is None
    everything, cursor = _page(api)
    assert everything == ids and cursor is None


def test_pages_are_stable_when_conversations_share_updated_at(api, alice):
    from django.utils import timezone

    same = timezone.now()
    for _ in range(9):
        conversation_create(owner=alice)
    Conversation.objects.update(updated_at=same)
    seen, cursor = [], None
    while True:
        page, cursor = _page(api, limit=2, **({"before": cursor} if cursor else {}))
        seen += page
        if cursor is None:
            break
    assert len(seen) == 9 and len(set(seen)) == 9
    assert seen == sorted(seen, reverse=True)  # ties in id order, newest first


def test_a_conversation_that_moves_to_the_top_leaves_the_pages_to_come(api, alice):
    from django.utils import timezone

    now = timezone.now()
    ids = []
    for minutes in range(4):
        conversation = conversation_create(owner=alice)
        Conversation.objects.filter(pk=conversation.pk).update(updated_at=now - timedelta(minutes=minutes))
        ids.append(str(conversation.pk))
    first, cursor = _page(api, limit=2)
    Conversation.objects.filter(pk=ids[3]).update(updated_at=now + timedelta(minutes=1))  # a new message
    rest, cursor = _page(api, limit=2, before=cursor)
    assert first == ids[:2] and rest == [ids[2]] and cursor is None


def test_limit_is_capped_at_200(api, alice):
    Conversation.objects.bulk_create(Conversation(owner=alice) for _ in range(201))
    page, cursor = _page(api, limit=1000)
    assert len(page) == 200 and cursor
    page, cursor = _page(api, before=cursor)
    assert len(page) == 1 and cursor is None


@pytest.mark.parametrize(
    "params, message",
    [
        ({"limit": "0"}, "limit must be a whole number"),
        ({"limit": "-5"}, "limit must be a whole number"),
        ({"limit": "ten"}, "limit must be a whole number"),
        ({"limit": "9" * 5000}, "limit must be a whole number"),
        ({"limit": "²"}, "limit must be a whole number"),
        ({"before": "not-a-cursor"}, "before is not a cursor"),
        ({"before": "2026-12-01T07:00:00+00:00"}, "before is not a cursor"),
        ({"before": "MjAyNi0xMi0wMVQwNzowMDowMHw"}, "before is not a cursor"),  # a time, no id
        ({"before": "MjAyNi0xMi0wMVQwNzowMDowMHw0ZjNkOGJkNi1mYzA0LTQ1MjMtYjRkYS1mOTE0ZDY0MWI5NGM"}, "before is not"),
        ({"before": "x" * 5000}, "before is not a cursor"),
        ({"before": "%%%"}, "before is not a cursor"),
    ],
)
def test_bad_paging_parameters_are_400(api, alice, params, message):
    conversation_create(owner=alice)
    response = api.get("/api/conversations/", params)
    assert response.status_code == 400
    assert response.json()["error"] == "bad_request" and message in response.json()["message"]


def _cursor(stamp: str, *, ranked: bool) -> str:
    """A cursor of the list's shape (time, id, pinned; and rank for a search) around `stamp`."""
    import base64

    raw = f"{stamp}|{uuid.uuid4()}|0" + ("|1" if ranked else "")
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


# ISO times that parse but leave Python's range once made UTC (an OverflowError, not a ValueError).
OUT_OF_RANGE_TIMES = ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"]


@pytest.mark.parametrize("stamp", OUT_OF_RANGE_TIMES)
@pytest.mark.parametrize("q", ["", "pancake"])
def test_a_cursor_holding_a_time_out_of_range_is_400(api, alice, stamp, q):
    """The list and the search read `before` through the one parser of client times."""
    conversation_create(owner=alice, title="pancake")
    response = api.get("/api/conversations/", {"before": _cursor(stamp, ranked=bool(q)), "q": q})
    assert response.status_code == 400, response.content
    assert "before is not a cursor" in response.json()["message"]


@pytest.mark.parametrize("body", ["[" * 100_000 + "]" * 100_000, '{"title":' * 100_000 + '"x"' + "}" * 100_000])
def test_deeply_nested_bodies_are_400_not_500(api, body):
    response = api.post("/api/conversations/", body, content_type="application/json")
    assert response.status_code == 400 and "nested too deeply" in response.json()["message"]


def test_bodies_are_held_to_the_nesting_limit_of_frames_and_imports(api):
    from chat.nesting import MAX_NESTING

    within = {"title": "t", "extra": json.loads("[" * (MAX_NESTING - 1) + "]" * (MAX_NESTING - 1))}
    assert api.post("/api/conversations/", within, content_type="application/json").status_code == 201
    past = '{"title": "t", "extra": ' + "[" * MAX_NESTING + "]" * MAX_NESTING + "}"
    response = api.post("/api/conversations/", past, content_type="application/json")
    assert response.status_code == 400 and "nested too deeply" in response.json()["message"]
