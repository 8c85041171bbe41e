"""A shared link is a snapshot (issue 46, point 9; chat/sharing/snapshot.py): it keeps the title
the conversation had when the link was made, and shows the branch its owner was looking at (the
one `leafSeq` names, else the version kept as `viewed_seq`, else the newest), never a version
edited away, on the page, its events and a copy alike, however the conversation goes on."""

from __future__ import annotations

import pytest
from django.test import Client

from chat.conversations.services import conversation_create
from chat.models import Conversation, ShareLink
from tests.sharing.builders import turn
from tests.sharing.test_links import create, csrf, token_of

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def edited(alice):
    """A first question answered, then edited (the first version edited away), and a follow-up
    on the edited branch. (conversation, seq of the first question, of its edit, of the follow-up)."""
    conversation = conversation_create(owner=alice, title="Holiday plans")
    first = turn(conversation, alice, "Go to Paris.", content="Where to, with a secret budget of 9000?")
    edit = turn(conversation, alice, "Go to Lisbon.", content="Where to, on a small budget?", edits=first)
    follow = turn(conversation, alice, "Three days.", content="How long?")
    return conversation, first, edit, follow


def shown(token: str) -> dict:
    return Client().get(f"/s/{token}/events/").json()


def contents(events: list) -> list[str]:
    return [e["content"] for e in events if e["type"] in ("user_message", "text")]


def rename(client, conversation, title: str) -> None:
    response = client.patch(
        f"/api/conversations/{conversation.pk}/", {"title": title}, content_type="application/json", **csrf(client)
    )
    assert response.status_code == 200, response.content


def test_a_share_keeps_the_title_it_had(owner, alice, make_user):
    conversation, *_ = edited(alice)
    made = create(owner, conversation)
    token = token_of(made)
    rename(owner, conversation, "Secret: leaving my job")
    assert shown(token)["conversation"] == {"title": "Holiday plans"}
    page = Client().get(f"/s/{token}/").content.decode()
    assert "Holiday plans" in page and "leaving my job" not in page
    visitor = Client(enforce_csrf_checks=True)
    visitor.force_login(make_user("bob"))
    visitor.get("/")
    copied = visitor.post(f"/s/{token}/copy/", **csrf(visitor))
    assert Conversation.objects.get(pk=copied.json()["id"]).title == "Holiday plans (shared)"
    assert made.json()["title"] == "Holiday plans"


def test_a_share_shows_the_branch_in_view_not_the_versions_edited_away(owner, alice, make_user):
    conversation, first, edit, follow = edited(alice)
    made = create(owner, conversation).json()
    token = made["url"].split("/")[2]
    events = shown(token)["events"]
    assert contents(events) == ["Where to, on a small budget?", "Go to Lisbon.", "How long?", "Three days."]
    assert made["leafSeq"] == follow
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    heads = [e for e in events if e["type"] == "user_message"]
    assert [e.get("parentSeq") for e in heads] == [None, heads[0]["seq"]]
    assert all("edits" not in e for e in heads)  # it names a version that is not shared
    assert "9000" not in Client().get(f"/s/{token}/").content.decode() + str(events)

    # The copy holds the snapshot, and continues from it.
    visitor = Client(enforce_csrf_checks=True)
    visitor.force_login(make_user("bob"))
    visitor.get("/")
    copied = visitor.post(f"/s/{token}/copy/", **csrf(visitor))
    assert copied.status_code == 201, copied.content
    copy = Conversation.objects.get(pk=copied.json()["id"])
    copy_events = list(copy.events.order_by("seq"))
    assert [e.payload["content"] for e in copy_events if e.type in ("user_message", "text")] == contents(events)
    assert "9000" not in str([e.payload for e in copy_events])

    # Later: the owner goes back to the first version and continues it; the link shows what it showed.
    turn(conversation, alice, "Then Rome.", content="And after Paris?", parent_seq=first)
    assert contents(shown(token)["events"]) == contents(events)


def test_the_client_names_the_branch_or_the_kept_version_does(owner, alice):
    conversation, first, edit, follow = edited(alice)
    # The first version named by the page: that branch, and nothing of the edited one.
    made = create(owner, conversation, {"leafSeq": first}).json()
    assert made["leafSeq"] == first
    assert contents(shown(made["url"].split("/")[2])["events"]) == [
        "Where to, with a secret budget of 9000?",
        "Go to Paris.",
    ]
    # No leafSeq: the version the owner chose to view (kept on the server), followed down its
    # newest turns as the chat page shows it.
    response = owner.patch(
        f"/api/conversations/{conversation.pk}/",
        {"viewed_seq": first},
        content_type="application/json",
        **csrf(owner),
    )
    assert response.status_code == 200
    assert create(owner, conversation).json()["leafSeq"] == first
    owner.patch(
        f"/api/conversations/{conversation.pk}/", {"viewed_seq": edit}, content_type="application/json", **csrf(owner)
    )
    assert create(owner, conversation).json()["leafSeq"] == follow
    # A turn in the middle of a branch: the branch through it, down to its newest turn.
    assert create(owner, conversation, {"leafSeq": edit}).json()["leafSeq"] == follow


def test_a_bad_leaf_seq_is_400_and_makes_no_link(owner, alice):
    conversation, first, *_ = edited(alice)
    answer = conversation.events.get(payload__content="Go to Paris.").seq
    for leaf in (answer, 999, 0, -1, "1", True, 1.5, 2**63):
        response = create(owner, conversation, {"leafSeq": leaf})
        assert response.status_code == 400, leaf
        assert response.json()["error"] == "bad_request"
    assert not ShareLink.objects.exists()
    assert create(owner, conversation, {"leafSeq": None}).status_code == 201
