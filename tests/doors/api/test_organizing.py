"""Titles, pinning and archiving over the JSON API (docs/protocol.md, "Titles, pinning, archiving"):
`titleSource`, `pinned` and `archived` in every conversation object, the list pinned first with the
archived ones apart, PATCH refusing what is not a boolean, and export/import carrying all three."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from chat.conversations.services import conversation_create
from chat.eventlog.append import events_append
from chat.models import Conversation
from chat.runs.starts import run_start
from tests.http_body import response_body

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def _patch(api, conversation_id, body):
    return api.patch(f"/api/conversations/{conversation_id}/", body, content_type="application/json")


def _listed(api, **params) -> list[str]:
    response = api.get("/api/conversations/", params)
    assert response.status_code == 200, response.content
    return [c["title"] for c in response.json()["conversations"]]


def _aged(owner, titles: list[str]) -> list[Conversation]:
    """Conversations titled in order from the newest to the oldest, an hour apart."""
    now = timezone.now()
    made = []
    for n, title in enumerate(titles):
        conversation = conversation_create(owner=owner, title=title)
        Conversation.objects.filter(pk=conversation.pk).update(updated_at=now - timedelta(hours=n))
        made.append(conversation)
    return made


def test_every_conversation_object_says_who_titled_it_and_how_it_is_organized(api, alice):
    untitled = api.post("/api/conversations/", {}, content_type="application/json").json()
    assert (untitled["titleSource"], untitled["pinned"], untitled["archived"]) == ("default", False, False)
    named = api.post("/api/conversations/", {"title": "Plans"}, content_type="application/json").json()
    assert named["titleSource"] == "user"

    # The first message stands in for a title: still "default", cut at 60 characters.
    conversation = Conversation.objects.get(pk=untitled["id"])
    run_start(conversation=conversation, user=alice, content="word " * 40, model="m", worker="w")
    got = api.get(f"/api/conversations/{untitled['id']}/").json()
    assert got["titleSource"] == "default" and got["title"] == ("word " * 12).strip()

    renamed = _patch(api, untitled["id"], {"title": "Mine"}).json()
    assert (renamed["title"], renamed["titleSource"]) == ("Mine", "user")
    # Even an empty title is the user's choice: nothing generated takes its place.
    cleared = _patch(api, named["id"], {"title": ""}).json()
    assert (cleared["title"], cleared["titleSource"]) == ("", "user")
    listed = api.get("/api/conversations/").json()["conversations"]
    assert all({"titleSource", "pinned", "archived"} <= set(c) for c in listed)


def test_pinned_ones_come_first_and_pinning_moves_nothing_else(api, alice):
    old, middle, new = _aged(alice, ["new", "middle", "old"])[::-1]
    before = Conversation.objects.get(pk=old.pk).updated_at
    pinned = _patch(api, old.pk, {"pinned": True}).json()
    assert pinned["pinned"] is True and pinned["archived"] is False
    assert Conversation.objects.get(pk=old.pk).updated_at == before  # organizing is not activity
    assert _listed(api) == ["old", "new", "middle"]
    _patch(api, middle.pk, {"pinned": True})
    assert _listed(api) == ["middle", "old", "new"]  # the pinned ones newest first, then the rest
    _patch(api, middle.pk, {"pinned": False})
    assert _listed(api) == ["old", "new", "middle"]


def test_pages_keep_pinned_ones_first_across_the_cursor(api, alice):
    titles = [f"c{n}" for n in range(7)]  # c0 newest
    made = _aged(alice, titles)
    for n in (2, 5):
        _patch(api, made[n].pk, {"pinned": True})
    seen, before = [], None
    while True:
        params = {"limit": "2", **({"before": before} if before else {})}
        page = api.get("/api/conversations/", params).json()
        seen += [c["title"] for c in page["conversations"]]
        before = page["next"]
        if before is None:
            break
    assert seen == ["c2", "c5", "c0", "c1", "c3", "c4", "c6"]


def test_archived_ones_are_listed_apart_and_searched_apart(api, alice):
    kept, archived = _aged(alice, ["kept pancakes", "archived pancakes"])
    response = _patch(api, archived.pk, {"archived": True, "pinned": True})
    assert response.json()["archived"] is True
    assert _listed(api) == ["kept pancakes"]
    assert _listed(api, archived="1") == ["archived pancakes"]
    assert _listed(api, archived="0") == ["kept pancakes"]
    assert _listed(api, q="pancakes") == ["kept pancakes"]
    assert _listed(api, q="pancakes", archived="1") == ["archived pancakes"]
    # Opening it still works, by its address: archived is not deleted.
    assert api.get(f"/api/conversations/{archived.pk}/").json()["archived"] is True
    _patch(api, archived.pk, {"archived": False})
    assert _listed(api) == ["archived pancakes", "kept pancakes"]  # pinned, back in the list
    refused = api.get("/api/conversations/", {"archived": "yes"})
    assert refused.status_code == 400 and "archived must be 1" in refused.json()["message"]


@pytest.mark.parametrize(
    "body",
    [
        {"pinned": "true"},
        {"pinned": 1},
        {"pinned": None},
        {"archived": 0},
        {"archived": "yes"},
        {"archived": [True]},
        {"title": "renamed", "pinned": "no"},  # nothing of a refused body is applied
    ],
)
def test_a_patch_of_something_not_a_boolean_is_400_and_changes_nothing(api, alice, body):
    conversation = conversation_create(owner=alice, title="kept")
    response = _patch(api, conversation.pk, body)
    assert response.status_code == 400
    name = "pinned" if "pinned" in body else "archived"
    assert response.json() == {"error": "bad_request", "message": f"{name} must be true or false"}
    stored = Conversation.objects.get(pk=conversation.pk)
    assert (stored.title, stored.pinned, stored.archived) == ("kept", False, False)


def test_another_users_conversation_cannot_be_pinned_or_archived(api, make_user):
    theirs = conversation_create(owner=make_user("bob"), title="bob's")
    assert _patch(api, theirs.pk, {"pinned": True}).status_code == 404
    assert _patch(api, theirs.pk, {"archived": True}).status_code == 404
    assert not Conversation.objects.get(pk=theirs.pk).pinned


def test_export_and_import_carry_the_title_source_and_the_organization(api, alice):
    conversation = conversation_create(owner=alice)
    run = run_start(conversation=conversation, user=alice, content="hello there", model="m", worker="w")[0]
    run.status = "succeeded"
    run.save()
    events_append(
        conversation_id=conversation.pk,
        run_id=run.pk,
        payloads=[{"type": "complete", "status": "succeeded", "durationMs": 1}],
    )
    Conversation.objects.filter(pk=conversation.pk).update(title="Greetings", title_source="generated")
    _patch(api, conversation.pk, {"pinned": True, "archived": True})
    exported = json.loads(response_body(api.get(f"/api/conversations/{conversation.pk}/export/")))
    assert {k: exported["conversation"][k] for k in ("title", "titleSource", "pinned", "archived")} == {
        "title": "Greetings",
        "titleSource": "generated",
        "pinned": True,
        "archived": True,
    }
    imported = api.post("/api/conversations/import/", exported, content_type="application/json")
    assert imported.status_code == 201, imported.content
    body = imported.json()
    assert (body["titleSource"], body["pinned"], body["archived"]) == ("generated", True, True)

    # An export from before these fields: imported as untitled, unpinned, in the list.
    for name in ("titleSource", "pinned", "archived"):
        del exported["conversation"][name]
    older = api.post("/api/conversations/import/", exported, content_type="application/json").json()
    assert (older["titleSource"], older["pinned"], older["archived"]) == ("default", False, False)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("titleSource", "model", "conversation.titleSource must be one of"),
        ("titleSource", 3, "conversation.titleSource must be one of"),
        ("pinned", "true", "conversation.pinned must be true or false"),
        ("archived", 1, "conversation.archived must be true or false"),
    ],
)
def test_an_import_with_a_wrong_organization_is_refused_and_creates_nothing(api, alice, field, value, message):
    document = {
        "conversation": {"title": "t", field: value},
        "events": [
            {"type": "user_message", "content": "hi", "seq": 1, "runId": "r1"},
            {"type": "complete", "status": "succeeded", "seq": 2, "runId": "r1"},
        ],
    }
    response = api.post("/api/conversations/import/", document, content_type="application/json")
    assert response.status_code == 400 and message in response.json()["message"]
    assert not Conversation.objects.filter(owner=alice).exists()
