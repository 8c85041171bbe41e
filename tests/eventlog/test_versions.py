"""Edit and regenerate with versions (docs/protocol.md, "Versions: edits, regenerated answers and branches") through the real ASGI application,
the run registry and the real `openai` SDK against the fake model: what is stored, and what the
model is sent as memory (only the branch that leads to the run)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from chat.conversations.services import conversation_create
from chat.eventlog import history
from chat.eventlog.append import events_append
from chat.eventlog.reads import runs_memory_events
from chat.eventlog.types import RunOutcome
from chat.models import Conversation, Event
from chat.runs.starts import run_start
from tests.asgi_socket import Socket
from tests.fakellm import text_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def user_messages(frames) -> list[dict]:
    return [f for f in frames if f["type"] == "user_message"]


def conversation_of(messages) -> list[tuple[str, str]]:
    """The model request's messages without the system prompt, as (role, content)."""
    return [(m["role"], m["content"]) for m in messages if m["role"] != "system"]


async def open_socket(conversation) -> Socket:
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    return socket


async def turn(socket: Socket, frame: dict) -> list[dict]:
    await socket.send(frame)
    return await socket.run_to_end()


async def three_turns(socket: Socket, llm) -> list[dict]:
    llm.script(text_reply("A1"), text_reply("A2"), text_reply("A3"))
    frames = []
    for content in ("one", "two", "three"):
        frames += await turn(socket, {"type": "message", "content": content})
    return frames


async def test_messages_carry_parent_seq_of_the_turn_before(conversation, registry, llm_settings):
    socket = await open_socket(conversation)
    frames = await three_turns(socket, llm_settings)
    one, two, three = user_messages(frames)
    assert one["parentSeq"] is None and "edits" not in one and "regenerates" not in one
    assert two["parentSeq"] == one["seq"] and three["parentSeq"] == two["seq"]
    await socket.close()


async def test_edit_of_the_first_turn_sends_only_the_edited_turn(conversation, registry, llm_settings):
    socket = await open_socket(conversation)
    one, _, _ = user_messages(await three_turns(socket, llm_settings))
    llm_settings.script(text_reply("edited answer"))
    frames = await turn(socket, {"type": "edit", "seq": one["seq"], "content": "one, edited"})
    edited = frames[0]
    assert edited["type"] == "user_message"
    assert edited["content"] == "one, edited" and edited["edits"] == one["seq"] and edited["parentSeq"] is None
    assert conversation_of(llm_settings.requests[-1]["messages"]) == [("user", "one, edited")]
    # Append-only: the three old turns are all still there, untouched.
    stored = await sync_to_async(lambda: list(Event.objects.filter(type="user_message").order_by("seq")))()
    assert [e.payload["content"] for e in stored] == ["one", "two", "three", "one, edited"]
    await socket.close()


async def test_edit_of_a_middle_turn_keeps_the_turns_before_it(conversation, registry, llm_settings):
    socket = await open_socket(conversation)
    one, two, _ = user_messages(await three_turns(socket, llm_settings))
    llm_settings.script(text_reply("B2"))
    frames = await turn(socket, {"type": "edit", "seq": two["seq"], "content": "two, edited"})
    assert frames[0]["parentSeq"] == one["seq"] and frames[0]["edits"] == two["seq"]
    assert conversation_of(llm_settings.requests[-1]["messages"]) == [
        ("user", "one"),
        ("assistant", "A1"),
        ("user", "two, edited"),
    ]
    await socket.close()


async def test_regenerate_sends_the_same_request_as_the_original(conversation, registry, llm_settings):
    socket = await open_socket(conversation)
    _, two, _ = user_messages(await three_turns(socket, llm_settings))
    original = llm_settings.requests[1]["messages"]
    llm_settings.script(text_reply("A2 again"))
    frames = await turn(socket, {"type": "regenerate", "seq": two["seq"]})
    again = frames[0]
    assert again["content"] == "two" and again["regenerates"] == two["seq"] and again["parentSeq"] == two["parentSeq"]
    assert llm_settings.requests[-1]["messages"] == original
    await socket.close()


async def test_a_message_after_switching_to_an_older_version_continues_that_branch(
    conversation, registry, llm_settings
):
    socket = await open_socket(conversation)
    one, two, _ = user_messages(await three_turns(socket, llm_settings))
    llm_settings.script(text_reply("B2"), text_reply("on the old branch"), text_reply("on the new branch"))
    edited = (await turn(socket, {"type": "edit", "seq": two["seq"], "content": "two, edited"}))[0]
    # The client shows the older version of turn two again and writes under it.
    four = (await turn(socket, {"type": "message", "content": "four", "parentSeq": two["seq"]}))[0]
    assert four["parentSeq"] == two["seq"]
    assert conversation_of(llm_settings.requests[-1]["messages"]) == [
        ("user", "one"),
        ("assistant", "A1"),
        ("user", "two"),
        ("assistant", "A2"),
        ("user", "four"),
    ]
    # Without parentSeq a message follows the newest user_message of the log: "four".
    frames = await turn(socket, {"type": "message", "content": "five"})
    assert frames[0]["parentSeq"] == four["seq"]
    sent = conversation_of(llm_settings.requests[-1]["messages"])
    assert ("user", "two, edited") not in sent and ("user", "three") not in sent
    assert sent[-3:] == [("user", "four"), ("assistant", "on the old branch"), ("user", "five")]
    assert edited["seq"] < frames[0]["seq"]
    await socket.close()


async def test_two_tabs_and_a_reconnecting_client_get_the_same_versions(conversation, registry, llm_settings):
    first, second = await open_socket(conversation), await open_socket(conversation)
    one, two, _ = user_messages(await three_turns(first, llm_settings))
    llm_settings.script(text_reply("B2"))
    edited = (await turn(first, {"type": "edit", "seq": two["seq"], "content": "two, edited"}))[0]
    seen_by_second = await second.until(lambda f: f["type"] == "complete" and f["runId"] == edited["runId"])
    reconnecting = Socket(conversation.owner, conversation.pk, after=0)
    await reconnecting.connect()
    replayed = [f for f in await reconnecting.history() if f["type"] != "sync"]
    versions = [(f["seq"], f["parentSeq"], f.get("edits")) for f in user_messages(replayed)]
    assert versions == [(f["seq"], f["parentSeq"], f.get("edits")) for f in user_messages(seen_by_second)]
    assert versions[-1] == (edited["seq"], one["seq"], two["seq"])
    for socket in (first, second, reconnecting):
        await socket.close()


def other_conversation_with_turns(owner, *, turns: int):
    other = conversation_create(owner=owner, title="other")
    for _ in range(turns):
        run, _ = run_start(conversation=other, user=owner, content="x", model="m", worker="")
        events_append(
            conversation_id=other.pk,
            run_id=run.pk,
            payloads=[{"type": "complete", "status": "succeeded"}],
            outcome=RunOutcome(status="succeeded"),
        )
    return other


def user_message_seqs(conversation) -> list[int]:
    return list(Event.objects.filter(conversation=conversation, type="user_message").values_list("seq", flat=True))


async def test_edit_and_regenerate_naming_anything_but_a_user_message_are_bad_requests(
    conversation, registry, llm_settings
):
    socket = await open_socket(conversation)
    llm_settings.script(text_reply("A1"))
    frames = await turn(socket, {"type": "message", "content": "one"})
    answer = next(f for f in frames if f["type"] == "text")
    other = await sync_to_async(other_conversation_with_turns)(conversation.owner, turns=3)
    bad = [
        {"type": "edit", "seq": answer["seq"], "content": "x"},  # not a user_message
        {"type": "regenerate", "seq": 99},  # no such seq
        {"type": "message", "content": "x", "parentSeq": answer["seq"]},
        {"type": "edit", "seq": "1", "content": "x"},
        {"type": "edit", "seq": True, "content": "x"},
        {"type": "edit", "seq": 0, "content": "x"},
        {"type": "edit", "seq": 2**70, "content": "x"},
        {"type": "regenerate"},
        {"type": "edit", "seq": 1},
        {"type": "edit", "seq": 1, "content": "   "},
        {"type": "message", "content": "x", "parentSeq": 1.5},
    ]
    for frame in bad:
        await socket.send(frame)
        reply = await socket.recv()
        assert reply["type"] == "error" and reply["code"] == "BAD_REQUEST" and "seq" not in reply, frame
    # A seq that is a user_message in another conversation of the same user is not one here.
    mine = {f["seq"] for f in frames}
    foreign = [s for s in await sync_to_async(user_message_seqs)(other) if s in mine and s != 1]
    assert foreign
    for seq in foreign:
        await socket.send({"type": "regenerate", "seq": seq})
        reply = await socket.recv()
        assert reply["code"] == "BAD_REQUEST"
    count = await sync_to_async(Event.objects.filter(conversation=conversation).count)()
    assert count == len(frames)  # nothing stored for any of them
    assert await socket.silent()
    await socket.close()


async def test_edit_while_a_run_is_going_is_run_in_progress(conversation, registry, llm_settings):
    socket = await open_socket(conversation)
    llm_settings.script(text_reply("A1"), text_reply("slow", piece=1, delay=0.2))
    first = (await turn(socket, {"type": "message", "content": "one"}))[0]
    await socket.send({"type": "message", "content": "two"})
    await socket.until(lambda f: f["type"] == "user_message")
    for frame in ({"type": "edit", "seq": first["seq"], "content": "x"}, {"type": "regenerate", "seq": first["seq"]}):
        await socket.send(frame)
        reply = await socket.until(lambda f: "seq" not in f)
        assert reply[-1]["code"] == "RUN_IN_PROGRESS"
    await socket.send({"type": "cancel"})
    await socket.run_to_end()
    await socket.close()


def test_old_conversations_without_parent_seq_are_one_linear_branch(conversation):
    """User messages stored before versions existed have no parentSeq: each follows the one before."""
    runs = []
    for content in ("one", "two"):
        run, frames = run_start(
            conversation=conversation, user=conversation.owner, content=content, model="m", worker=""
        )
        Event.objects.filter(conversation=conversation, seq=frames[0]["seq"]).update(
            payload={"type": "user_message", "content": content}
        )
        events_append(
            conversation_id=conversation.pk,
            run_id=run.pk,
            payloads=[{"type": "complete", "status": "succeeded"}],
            outcome=RunOutcome(status="succeeded"),
        )
        runs.append(run)
    run, frames = run_start(
        conversation=conversation, user=conversation.owner, content="", model="m", worker="", regenerates=3
    )
    assert frames[0]["parentSeq"] == 1 and frames[0]["content"] == "two"
    memory = runs_memory_events(runs={conversation.pk: run.pk})[conversation.pk]
    assert [f["content"] for f in memory if f["type"] == "user_message"] == ["one", "two"]
    assert {f["runId"] for f in memory} == {str(runs[0].pk), str(run.pk)}


def test_branch_walk_stops_at_a_parent_that_is_not_earlier():
    rows = [(1, "a", None, True), (2, "b", 5, True), (3, "c", 2, True), (4, "d", "x", True)]
    assert history.branch_run_ids(rows, run_id="c") == ["b", "c"]
    assert history.branch_run_ids(rows, run_id="d") == ["d"]
    assert history.branch_run_ids(rows, run_id="missing") == []


# -- the version a user chose to view, kept on the conversation ---------------------------------
def finished_turn(conversation, **version) -> int:
    """A finished run (edits=S / regenerates=S / parent_seq=S, or a new message); its seq."""
    run, frames = run_start(
        conversation=conversation,
        user=conversation.owner,
        content=version.pop("content", "q"),
        model="m",
        worker="",
        **version,
    )
    events_append(
        conversation_id=conversation.pk,
        run_id=run.pk,
        payloads=[{"type": "text", "content": "a"}, {"type": "complete", "status": "succeeded"}],
        outcome=RunOutcome(status="succeeded"),
    )
    return frames[0]["seq"]


@pytest.fixture
def owner_api(conversation):
    client = Client()
    client.force_login(conversation.owner)
    return client


def patch(client, conversation, body):
    return client.patch(f"/api/conversations/{conversation.pk}/", body, content_type="application/json")


def test_the_chosen_version_is_kept_returned_and_cleared_by_the_next_turn(conversation, owner_api):
    one = finished_turn(conversation)
    again = finished_turn(conversation, regenerates=one)
    url = f"/api/conversations/{conversation.pk}/"
    assert owner_api.get(url).json()["viewed_seq"] is None  # nothing chosen: the newest branch
    before = Conversation.objects.get(pk=conversation.pk).updated_at

    response = patch(owner_api, conversation, {"viewed_seq": one})
    assert response.status_code == 200 and response.json()["viewed_seq"] == one
    # Another device reads it, in the list too; choosing is not activity: the list order stays.
    assert owner_api.get(url).json()["viewed_seq"] == one
    listed = owner_api.get("/api/conversations/").json()["conversations"]
    assert [c["viewed_seq"] for c in listed if c["id"] == str(conversation.pk)] == [one]
    assert Conversation.objects.get(pk=conversation.pk).updated_at == before

    # A new turn is the one to show: the choice is cleared by the run that adds it.
    finished_turn(conversation, regenerates=again)
    assert owner_api.get(url).json()["viewed_seq"] is None
    assert patch(owner_api, conversation, {"viewed_seq": one}).status_code == 200
    assert patch(owner_api, conversation, {"viewed_seq": None}).json()["viewed_seq"] is None


def test_a_bad_chosen_version_is_a_400_and_changes_nothing(conversation, owner_api, make_user):
    one = finished_turn(conversation)
    answer = Event.objects.get(conversation=conversation, type="text").seq
    assert patch(owner_api, conversation, {"viewed_seq": one}).status_code == 200
    for bad in (answer, 99, 0, -1, True, "1", 1.0, 2**70, [one]):
        response = patch(owner_api, conversation, {"viewed_seq": bad, "title": "renamed"})
        assert response.status_code == 400, bad
        assert "viewed_seq" in response.json()["message"] or "user_message" in response.json()["message"]
    stored = Conversation.objects.get(pk=conversation.pk)
    assert (stored.viewed_seq, stored.title) == (one, "test")  # the title with it was not taken either
    # Someone else's conversation is not found, and keeps its choice.
    bob = Client()
    bob.force_login(make_user("bob"))
    assert patch(bob, conversation, {"viewed_seq": None}).status_code == 404
    assert Conversation.objects.get(pk=conversation.pk).viewed_seq == one
