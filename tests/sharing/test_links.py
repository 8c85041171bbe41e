"""Shared links over HTTP (chat/sharing, chat/doors/pages/shares.py; docs/protocol.md, "Shared links"):
made, listed and revoked by the owner only; opened anonymously, up to the snapshot; every closed
link 404 at once; the token stored only as a digest."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from chat.accounts.tokens import token_create
from chat.conversations.services import conversation_create
from chat.models import AccountSettings, Conversation, ShareLink
from chat.runs.starts import run_start
from chat.sharing.links import ACTIVE_MAX, CLOSED_KEPT
from tests.sharing.builders import HOSTILE, shareable, turn

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def csrf(client) -> dict:
    return {"HTTP_X_CSRFTOKEN": client.cookies["csrftoken"].value}


def create(client, conversation, body=None, **extra):
    return client.post(
        f"/api/conversations/{conversation.pk}/shares/",
        body if body is not None else {},
        content_type="application/json",
        **csrf(client),
        **extra,
    )


def token_of(response) -> str:
    assert response.status_code == 201, response.content
    return response.json()["url"].removeprefix("/s/").removesuffix("/")


def test_make_open_and_read_anonymously(owner, alice):
    conversation = shareable(alice)
    made = create(owner, conversation)
    data = made.json()
    assert data["url"].startswith("/s/sh_") and data["expiresAt"] is None and data["active"] is True
    assert data["upToSeq"] == conversation.events.order_by("-seq").first().seq
    token = token_of(made)
    assert len(token) == 46  # sh_ and 256 random bits
    # Only the digest is stored: the database holds no token.
    link = ShareLink.objects.get()
    assert link.digest == hashlib.sha256(token.encode()).hexdigest()
    assert token not in str(list(ShareLink.objects.values()))

    anonymous = Client()
    page = anonymous.get(f"/s/{token}/")
    assert page.status_code == 200
    assert "Content-Security-Policy" in page and "script-src 'self'" in page["Content-Security-Policy"]
    assert page["Referrer-Policy"] == "no-referrer"
    body = page.content.decode()
    assert "Sums and a trap" in body and "Shared by alice" in body
    for absent in ('id="composer"', 'id="sidebar"', 'id="files-panel"', "usage-line", "/api/"):
        assert absent not in body
    events = anonymous.get(f"/s/{token}/events/").json()
    assert events["conversation"] == {"title": "Sums and a trap"}
    kinds = [e["type"] for e in events["events"]]
    # The branch in view: the regenerated answer's newest version only.
    assert kinds.count("user_message") == 3 and "tool_start" in kinds and "thinking" in kinds
    assert "Green, version two." in str(events) and "Blue, version one." not in str(events)
    assert [e["seq"] for e in events["events"]] == list(range(1, len(events["events"]) + 1))
    assert all("usage" not in e for e in events["events"])
    assert any(e.get("content") == HOSTILE for e in events["events"])  # sent as text; the page renders it inert


def test_the_snapshot_excludes_later_messages(owner, alice):
    conversation = shareable(alice)
    token = token_of(create(owner, conversation))
    turn(conversation, alice, "A later secret answer.", content="a later question")
    events = Client().get(f"/s/{token}/events/").json()["events"]
    assert "A later secret answer." not in str(events) and "a later question" not in str(events)
    assert max(e["seq"] for e in events) < conversation.events.order_by("-seq").first().seq


def test_a_running_answer_is_not_shared(owner, alice):
    conversation = shareable(alice)
    last = conversation.events.order_by("-seq").first().seq
    run, _ = run_start(conversation=conversation, user=alice, content="still being answered", model="m", worker="")
    made = create(owner, conversation).json()
    assert made["upToSeq"] == last  # the run in progress is left out
    token = made["url"].split("/")[2]
    assert "still being answered" not in str(Client().get(f"/s/{token}/events/").json())


def test_nothing_to_share_before_a_finished_answer(owner, alice):
    empty = conversation_create(owner=alice, title="empty")
    response = create(owner, empty)
    assert response.status_code == 409 and response.json()["error"] == "nothing_to_share"


def test_list_and_revoke(owner, alice):
    conversation = shareable(alice)
    first = create(owner, conversation, {"expiresInDays": 7}).json()
    token = first["url"].split("/")[2]
    second = create(owner, conversation).json()
    listed = owner.get(f"/api/conversations/{conversation.pk}/shares/").json()["shares"]
    assert [s["id"] for s in listed] == [second["id"], first["id"]]
    assert all(s["url"] is None for s in listed)  # the token is not stored, so not shown again
    assert listed[1]["expiresAt"] is not None and listed[1]["hint"] == token[:8]
    assert Client().get(f"/s/{token}/").status_code == 200
    assert owner.delete(f"/api/shares/{first['id']}/", **csrf(owner)).status_code == 204
    for path in ("", "events/"):
        assert Client().get(f"/s/{token}/{path}").status_code == 404
    listed = owner.get(f"/api/conversations/{conversation.pk}/shares/").json()["shares"]
    assert [s["id"] for s in listed] == [second["id"]]
    assert owner.delete(f"/api/shares/{first['id']}/", **csrf(owner)).status_code == 404  # already revoked


def test_expired_links_are_gone(owner, alice):
    conversation = shareable(alice)
    token = token_of(create(owner, conversation, {"expiresInDays": 1}))
    ShareLink.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert Client().get(f"/s/{token}/").status_code == 404
    assert Client().get(f"/s/{token}/events/").status_code == 404
    assert owner.get(f"/api/conversations/{conversation.pk}/shares/").json()["shares"][0]["active"] is False


def test_deleted_conversations_links_are_gone(owner, alice):
    conversation = shareable(alice)
    token = token_of(create(owner, conversation))
    assert owner.delete(f"/api/conversations/{conversation.pk}/", **csrf(owner)).status_code == 204
    assert Client().get(f"/s/{token}/").status_code == 404
    assert not ShareLink.objects.exists()


def test_sharing_off_closes_every_link(owner, alice, settings):
    conversation = shareable(alice)
    token = token_of(create(owner, conversation))
    share_id = ShareLink.objects.get().pk
    settings.AGENT_SHARING = False
    assert Client().get(f"/s/{token}/").status_code == 404
    assert Client().get(f"/s/{token}/events/").status_code == 404
    assert create(owner, conversation).status_code == 404
    assert owner.get(f"/api/conversations/{conversation.pk}/shares/").status_code == 404
    assert owner.delete(f"/api/shares/{share_id}/", **csrf(owner)).status_code == 404
    assert 'id="share-open"' not in owner.get("/").content.decode()
    settings.AGENT_SHARING = True
    assert 'id="share-open"' in owner.get("/").content.decode()
    assert Client().get(f"/s/{token}/").status_code == 200


@pytest.mark.parametrize(
    "token",
    [
        "nonsense",
        "sh_" + "A" * 43,  # the right length and form, but no link
        "sh_" + "A" * 44,
        "as_" + "A" * 43,
        "sh_" + "é" * 43,
        "x" * 5000,
    ],
)
def test_wrong_tokens_are_404(owner, alice, token):
    token_of(create(owner, shareable(alice)))
    for path in ("", "events/"):
        assert Client().get(f"/s/{token}/{path}").status_code == 404


def test_other_users_conversations_and_links_are_404(owner, alice, make_user):
    conversation = shareable(alice)
    share_id = create(owner, conversation).json()["id"]
    mallory = Client(enforce_csrf_checks=True)
    mallory.force_login(make_user("mallory"))
    mallory.get("/")
    assert create(mallory, conversation).status_code == 404
    assert mallory.get(f"/api/conversations/{conversation.pk}/shares/").status_code == 404
    assert mallory.delete(f"/api/shares/{share_id}/", **csrf(mallory)).status_code == 404
    assert ShareLink.objects.get().revoked_at is None


def test_api_auth_csrf_and_bad_bodies(owner, alice):
    conversation = shareable(alice)
    anonymous = Client()
    assert anonymous.post(f"/api/conversations/{conversation.pk}/shares/").status_code == 401
    assert anonymous.get(f"/api/conversations/{conversation.pk}/shares/").status_code == 401
    assert anonymous.delete("/api/shares/1/").status_code == 401
    no_csrf = owner.post(f"/api/conversations/{conversation.pk}/shares/", {}, content_type="application/json")
    assert no_csrf.status_code == 403
    for body in ({"expiresInDays": 0}, {"expiresInDays": 366}, {"expiresInDays": "7"}, {"expiresInDays": True}):
        assert create(owner, conversation, body).status_code == 400
    assert create(owner, conversation, {"other": 1}).status_code == 400
    raw = owner.post(
        f"/api/conversations/{conversation.pk}/shares/", "{not json", content_type="application/json", **csrf(owner)
    )
    assert raw.status_code == 400
    assert create(owner, conversation, [1, 2]).status_code == 400
    assert owner.get("/api/conversations/00000000-0000-0000-0000-000000000000/shares/").status_code == 404
    assert owner.delete("/api/shares/99999999/", **csrf(owner)).status_code == 404
    assert owner.delete("/api/shares/99999999999999999999999/", **csrf(owner)).status_code == 404  # past bigint
    for raw in ("x" * 5_000_000, "[" * 100_000, '{"expiresInDays": 1e400}'):
        response = owner.post(
            f"/api/conversations/{conversation.pk}/shares/", raw, content_type="application/json", **csrf(owner)
        )
        assert response.status_code == 400, raw[:20]
    assert owner.put(f"/api/conversations/{conversation.pk}/shares/", **csrf(owner)).status_code == 405
    assert not ShareLink.objects.exists()


def test_api_tokens_work_as_for_the_rest_of_the_api(alice):
    conversation = shareable(alice)
    _, value = token_create(user=alice, name="script")
    bearer = Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {value}")
    made = bearer.post(f"/api/conversations/{conversation.pk}/shares/", {}, content_type="application/json")
    assert made.status_code == 201
    assert bearer.delete(f"/api/shares/{made.json()['id']}/").status_code == 204


def test_links_per_conversation_are_capped(owner, alice):
    conversation = shareable(alice)
    ids = [create(owner, conversation).json()["id"] for _ in range(ACTIVE_MAX)]
    refused = create(owner, conversation)
    assert refused.status_code == 409 and refused.json()["error"] == "too_many_shares"
    # Revoked links make room, and the rows kept stay bounded.
    for share_id in ids:
        assert owner.delete(f"/api/shares/{share_id}/", **csrf(owner)).status_code == 204
    for _ in range(ACTIVE_MAX):
        assert create(owner, conversation).status_code == 201
    assert ShareLink.objects.filter(conversation=conversation).count() <= ACTIVE_MAX + CLOSED_KEPT


def test_attachments_are_listed_by_name_not_served(owner, alice):
    conversation = shareable(alice)
    first = conversation.events.get(seq=1)
    first.payload = {**first.payload, "attachments": [{"path": "notes/plan.txt", "size": 12, "textPath": "x.txt"}]}
    first.save()
    token = token_of(create(owner, conversation))
    events = Client().get(f"/s/{token}/events/").json()["events"]
    assert events[0]["attachments"] == [{"path": "notes/plan.txt", "size": 12}]
    # The conversation's files stay the owner's: anonymous and other users get nothing.
    assert Client().get(f"/api/conversations/{conversation.pk}/files/notes/plan.txt").status_code == 401
    assert Client().get(f"/api/conversations/{conversation.pk}/events/").status_code == 401
    assert Client().get(f"/s/{token}/files/notes/plan.txt").status_code == 404


def test_copy_needs_a_session_and_csrf_and_an_open_link(owner, alice, make_user):
    conversation = shareable(alice)
    made = create(owner, conversation).json()
    token = made["url"].split("/")[2]
    assert Client().post(f"/s/{token}/copy/").status_code == 401
    visitor = Client(enforce_csrf_checks=True)
    visitor.force_login(make_user("bob"))
    visitor.get("/")
    assert visitor.post(f"/s/{token}/copy/").status_code == 403  # no CSRF token
    assert visitor.get(f"/s/{token}/copy/").status_code == 405
    copied = visitor.post(f"/s/{token}/copy/", **csrf(visitor))
    assert copied.status_code == 201
    copy = Conversation.objects.get(pk=copied.json()["id"])
    assert copy.owner.username == "bob" and copy.title == "Sums and a trap (shared)"
    # The snapshot's branch, numbered from 1: the answer regenerated away is not in it.
    copied_events = list(copy.events.order_by("seq"))
    replaced = conversation.events.get(payload__content="Blue, version one.").run_id
    shared = conversation.events.filter(seq__lte=made["upToSeq"]).exclude(run_id=replaced).order_by("seq")
    assert [e.seq for e in copied_events] == list(range(1, shared.count() + 1))
    turns = [e for e in copied_events if e.type == "user_message"]
    assert [(e.payload["content"], e.payload["parentSeq"]) for e in turns] == [
        ("What is 6*7?", None),
        ("Name a colour.", turns[0].seq),
        ("Show me some markup.", turns[1].seq),
    ]
    assert all("regenerates" not in e.payload for e in turns)
    assert [e.payload for e in copied_events if e.type != "user_message"] == [
        e.payload for e in shared if e.type != "user_message"
    ]
    assert owner.delete(f"/api/shares/{made['id']}/", **csrf(owner)).status_code == 204
    assert visitor.post(f"/s/{token}/copy/", **csrf(visitor)).status_code == 404


def test_a_deactivated_owners_links_are_gone(owner, alice):
    token = token_of(create(owner, shareable(alice)))
    alice.is_active = False
    alice.save()
    assert Client().get(f"/s/{token}/").status_code == 404


def test_the_owner_is_shown_by_display_name(owner, alice):
    AccountSettings.objects.create(user=alice, display_name="Alice Liddell")
    token = token_of(create(owner, shareable(alice)))
    body = Client().get(f"/s/{token}/").content.decode()
    assert "Shared by Alice Liddell" in body and "alice" not in body.replace("Alice Liddell", "")


def test_staff_see_and_revoke_links_in_the_admin(owner, alice, make_user):
    token = token_of(create(owner, shareable(alice)))
    link = ShareLink.objects.get()
    staff = Client()
    staff.force_login(get_user_model().objects.create_superuser("admin", "a@example.com", "pw-for-tests-123"))
    listing = staff.get("/admin/chat/sharelink/")
    assert listing.status_code == 200 and link.hint in listing.content.decode()
    assert token not in listing.content.decode() and link.digest not in listing.content.decode()
    revoked = staff.post("/admin/chat/sharelink/", {"action": "revoke", "_selected_action": [link.pk]}, follow=True)
    assert revoked.status_code == 200 and "Revoked 1 link" in revoked.content.decode()
    assert Client().get(f"/s/{token}/").status_code == 404
    assert staff.get(f"/admin/chat/sharelink/{link.pk}/change/").status_code == 200


def test_the_page_and_the_dialog_are_translated(owner, alice):
    token = token_of(create(owner, shareable(alice)))
    page = Client(HTTP_ACCEPT_LANGUAGE="zh-hans").get(f"/s/{token}/").content.decode()
    assert "由 alice 于" in page and "登录后继续此对话" in page
    chinese = Client(HTTP_ACCEPT_LANGUAGE="zh-hans")
    chinese.force_login(alice)
    chat = chinese.get("/").content.decode()
    assert "分享此对话" in chat and "创建链接" in chat and "此对话的链接" in chat
