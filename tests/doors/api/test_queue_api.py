"""Queued messages over HTTP (docs/protocol.md, "Runs over HTTP" and "Queued messages"): the
status of every start, the queue listed and withdrawn from, cancel with clearQueue, and another
user's conversation answering 404 with nothing stored."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from chat.models import Event, QueuedMessage, Run
from tests.fakellm import text_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


async def _client(user) -> AsyncClient:
    client = AsyncClient()
    await client.aforce_login(user)
    return client


async def _settled(registry, runs: int) -> None:
    async with asyncio.timeout(15):
        while (
            await Run.objects.exclude(status="running").acount() < runs
            or await Run.objects.filter(status="running").aexists()
        ):
            await registry.wait_idle()
            await asyncio.sleep(0.05)


async def test_http_queue_list_withdraw_and_cancel_clearing(conversation, registry, llm_settings):
    llm_settings.script(text_reply("slow " * 60, piece=1, delay=0.05))
    http = await _client(conversation.owner)
    base = f"/api/conversations/{conversation.pk}"
    started = await http.post(f"{base}/messages/", {"content": "one"}, content_type="application/json")
    assert started.status_code == 202
    body = started.json()
    assert body["status"] == "started" and body["seq"] == 1 and uuid.UUID(body["runId"])
    refused = await http.post(f"{base}/messages/", {"content": "two"}, content_type="application/json")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "RUN_IN_PROGRESS"
    answers = []
    for content in ("two", "three"):
        r = await http.post(
            f"{base}/messages/", {"content": content, "whileRunning": "queue"}, content_type="application/json"
        )
        assert r.status_code == 202
        answers.append(r.json())
    assert [a["status"] for a in answers] == ["queued", "queued"]
    seqs = dict(await sync_to_async(lambda: list(Event.objects.filter(type="queued").values_list("seq", "payload")))())
    assert [seqs[a["seq"]]["queueId"] for a in answers] == [a["queueId"] for a in answers]
    listed = await http.get(f"{base}/queue/")
    assert listed.status_code == 200
    queue = listed.json()
    assert queue["steers"] == []
    assert [(q["queueId"], q["content"], q["steered"]) for q in queue["queue"]] == [
        (answers[0]["queueId"], "two", False),
        (answers[1]["queueId"], "three", False),
    ]
    assert all(q["createdAt"].endswith("Z") and q["attachments"] == [] for q in queue["queue"])
    gone = await http.delete(f"{base}/queue/{answers[0]['queueId']}/")
    assert gone.status_code == 204
    for wrong in (answers[0]["queueId"], "not-an-id", str(uuid.uuid4())):
        again = await http.delete(f"{base}/queue/{wrong}/")
        assert again.status_code == 404 and again.json()["error"]["code"] == "NOT_QUEUED"
    bad = await http.post(f"{base}/cancel/", {"clearQueue": "yes"}, content_type="application/json")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "BAD_REQUEST"
    cancel = await http.post(f"{base}/cancel/", {"clearQueue": True}, content_type="application/json")
    assert cancel.status_code == 202 and cancel.json() == {"cancelled": True, "cleared": 1}
    await _settled(registry, 1)
    assert (await http.get(f"{base}/queue/")).json() == {"queue": [], "steers": []}
    nothing = await http.post(f"{base}/cancel/")  # no body, as before
    assert nothing.status_code == 202 and nothing.json() == {"cancelled": False, "cleared": 0}
    assert await Run.objects.acount() == 1


async def test_queue_full_over_http(conversation, registry, llm_settings, settings):
    settings.AGENT_MAX_QUEUED = 1
    llm_settings.script(text_reply("slow " * 40, piece=1, delay=0.05))
    http = await _client(conversation.owner)
    base = f"/api/conversations/{conversation.pk}"
    await http.post(f"{base}/messages/", {"content": "one"}, content_type="application/json")
    body = {"content": "w", "whileRunning": "queue"}
    assert (await http.post(f"{base}/messages/", body, content_type="application/json")).status_code == 202
    full = await http.post(f"{base}/messages/", body, content_type="application/json")
    assert full.status_code == 409 and full.json()["error"]["code"] == "QUEUE_FULL"
    await http.post(f"{base}/cancel/", {"clearQueue": True}, content_type="application/json")
    await _settled(registry, 1)


async def test_another_users_conversation_is_404_and_nothing_is_stored(conversation, registry, llm_settings, make_user):
    llm_settings.script(text_reply("slow " * 40, piece=1, delay=0.05))
    owner = await _client(conversation.owner)
    base = f"/api/conversations/{conversation.pk}"
    await owner.post(f"{base}/messages/", {"content": "one"}, content_type="application/json")
    waiting = await owner.post(
        f"{base}/messages/", {"content": "w", "whileRunning": "queue"}, content_type="application/json"
    )
    queue_id = waiting.json()["queueId"]
    mallory = await _client(await sync_to_async(make_user)("mallory"))
    before = await Event.objects.acount()
    answers = [
        await mallory.post(
            f"{base}/messages/", {"content": "x", "whileRunning": "queue"}, content_type="application/json"
        ),
        await mallory.get(f"{base}/queue/"),
        await mallory.delete(f"{base}/queue/{queue_id}/"),
        await mallory.post(f"{base}/cancel/", {"clearQueue": True}, content_type="application/json"),
    ]
    assert [(a.status_code, a.json()["error"]["code"]) for a in answers] == [(404, "NOT_FOUND")] * 4
    assert await QueuedMessage.objects.acount() == 1
    await owner.post(f"{base}/cancel/", {"clearQueue": True}, content_type="application/json")
    await _settled(registry, 1)
    assert await Event.objects.filter(seq__gt=before, type__in=("queued", "user_message")).acount() == 0


async def test_http_steer_is_listed_withdrawn_and_refused_to_another_user(
    conversation, registry, llm_settings, make_user
):
    llm_settings.script(text_reply("slow " * 60, piece=1, delay=0.05))
    http = await _client(conversation.owner)
    base = f"/api/conversations/{conversation.pk}"
    started = (await http.post(f"{base}/messages/", {"content": "one"}, content_type="application/json")).json()
    async with asyncio.timeout(10):  # its one model call under way: a steer now waits for the next
        while not llm_settings.requests:
            await asyncio.sleep(0.01)
    steer = {"content": "shorter", "whileRunning": "steer"}
    answer = await http.post(f"{base}/messages/", steer, content_type="application/json")
    assert answer.status_code == 202
    body = answer.json()
    assert (body["status"], body["runId"]) == ("steered", started["runId"])
    stored = await Event.objects.aget(seq=body["seq"], conversation=conversation)
    assert (stored.type, stored.payload["queueId"], str(stored.run_id)) == ("steer", body["queueId"], body["runId"])
    with_files = await http.post(
        f"{base}/messages/", {**steer, "attachments": ["a.txt"]}, content_type="application/json"
    )
    assert with_files.status_code == 400 and with_files.json()["error"]["code"] == "BAD_REQUEST"

    listed = (await http.get(f"{base}/queue/")).json()
    assert listed["queue"] == []
    assert [(s["queueId"], s["content"], s["runId"]) for s in listed["steers"]] == [
        (body["queueId"], "shorter", started["runId"])
    ]
    assert listed["steers"][0]["createdAt"].endswith("Z")

    mallory = await _client(await sync_to_async(make_user)("mallory"))
    refused = [
        await mallory.post(f"{base}/messages/", steer, content_type="application/json"),
        await mallory.delete(f"{base}/queue/{body['queueId']}/"),
    ]
    assert [(a.status_code, a.json()["error"]["code"]) for a in refused] == [(404, "NOT_FOUND")] * 2
    assert await Event.objects.filter(type="steer").acount() == 1

    assert (await http.delete(f"{base}/queue/{body['queueId']}/")).status_code == 204
    assert (await http.get(f"{base}/queue/")).json() == {"queue": [], "steers": []}
    await http.post(f"{base}/cancel/", content_type="application/json")
    await _settled(registry, 1)
    unqueued = await Event.objects.aget(type="unqueued")
    assert (unqueued.payload["queueId"], unqueued.payload["reason"], unqueued.run_id) == (
        body["queueId"],
        "withdrawn",
        None,
    )
    assert not await Event.objects.filter(type="steer_applied").aexists()
