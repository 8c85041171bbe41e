"""Compaction on demand (docs/protocol.md, "Compaction"): the `compact` frame and POST
.../compact/ start a compaction run through the one front door; it summarizes the branch's turns
but the newest AGENT_COMPACT_KEEP_TURNS, whatever their size, and the next message starts from
the summary and the kept turns; its refusals (RUN_IN_PROGRESS first, NOTHING_TO_COMPACT,
BAD_REQUEST, another user's conversation 404), a failed compaction and a cancelled one."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from django.utils import timezone

from chat.agent.compaction import SUMMARY_HEADING
from chat.agent.estimate import estimate_usage
from chat.conversations.importing import ImportRefused, conversation_import, parse_import
from chat.eventlog.compacting import compaction_memory, compaction_refusal
from chat.eventlog.reads import events_after
from chat.eventlog.takeover import run_interrupt
from chat.models import Budget, Event, ModelCall, Run
from chat.runs.requests import StartRun
from chat.runs.starter import start_run
from tests.fakellm import text_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


@pytest.fixture
def roomy(llm_settings, settings):
    settings.AGENT_TOOLS = []
    settings.AGENT_SYSTEM_PROMPT = "You help."
    settings.AGENT_CONTEXT_TOKENS = 100_000  # nothing compacts by itself
    settings.AGENT_COMPACT_AT = 0.8
    settings.AGENT_COMPACT_KEEP_TURNS = 2
    settings.AGENT_COMPACT_MAX_MESSAGES = 0
    settings.AGENT_MAX_RETRIES = 0
    settings.AGENT_MESSAGES_PER_MINUTE = 0
    return llm_settings


def answered(text: str, prompt: int = 0, completion: int = 0) -> dict:
    reply = text_reply(text)
    reply["chunks"].append(
        {"usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}
    )
    return reply


async def ask(registry, conversation, content: str) -> Run:
    run, _ = await start_run(StartRun(conversation=conversation, user=conversation.owner, content=content))
    await registry.wait_idle()
    return run


async def turns(fake, registry, conversation, count: int) -> list[Run]:
    fake.script(*[answered(f"answer{i}") for i in range(count)])
    return [await ask(registry, conversation, f"alpha{i}") for i in range(count)]


async def client(user) -> AsyncClient:
    http = AsyncClient()
    await http.aforce_login(user)
    return http


def payloads(run_id) -> list[dict]:
    return list(Event.objects.filter(run_id=run_id).order_by("seq").values_list("payload", flat=True))


def seq_of(run_id, kind: str) -> int:
    return Event.objects.filter(run_id=run_id, type=kind).values_list("seq", flat=True).get()


def sent(body: dict) -> str:
    return json.dumps(body["messages"], ensure_ascii=False)


async def settled(registry) -> None:
    async with asyncio.timeout(15):
        while await Run.objects.filter(status="running").aexists():
            await registry.wait_idle()
            await asyncio.sleep(0.05)


async def compact(http, conversation, body: dict | None = None):
    return await http.post(
        f"/api/conversations/{conversation.pk}/compact/", body or {}, content_type="application/json"
    )


async def test_http_compacts_and_the_next_message_starts_from_the_summary(roomy, registry, conversation):
    fake = roomy
    runs = await turns(fake, registry, conversation, 4)
    fake.requests.clear()
    fake.script(answered("SUMMARY OF TURNS ZERO AND ONE", 40, 9))
    http = await client(conversation.owner)
    answer = await compact(http, conversation)
    assert answer.status_code == 202
    run_id = answer.json()["runId"]
    await settled(registry)

    (call,) = fake.requests
    assert "tools" not in call
    assert "alpha0" in sent(call) and "alpha1" in sent(call) and "alpha2" not in sent(call)
    events = await sync_to_async(payloads)(run_id)
    assert [e["type"] for e in events] == ["compaction", "complete"]
    compaction, complete = events
    assert compaction["trigger"] == "manual" and compaction["summary"] == "SUMMARY OF TURNS ZERO AND ONE"
    assert compaction["throughSeq"] == await sync_to_async(seq_of)(runs[1].pk, "complete")
    assert compaction["previousSeq"] is None and compaction["turns"] == 2
    assert compaction["tokensBefore"] > 0
    assert complete["status"] == "succeeded"
    assert complete["usage"] == {"promptTokens": 40, "completionTokens": 9, "totalTokens": 49}
    run = await Run.objects.aget(pk=run_id)
    assert run.status == "succeeded"
    # The summary covers all but the kept turns now: nothing more to compact.
    again = await compact(http, conversation)
    assert again.status_code == 409 and again.json()["error"]["code"] == "NOTHING_TO_COMPACT"

    fake.requests.clear()
    fake.script(answered("answer4"))
    await ask(registry, conversation, "alpha4")
    (request,) = fake.requests
    assert request["messages"][1]["content"] == f"{SUMMARY_HEADING}\nSUMMARY OF TURNS ZERO AND ONE"
    assert "alpha0" not in sent(request) and "alpha1" not in sent(request)
    assert "alpha2" in sent(request) and "alpha3" in sent(request) and "alpha4" in sent(request)
    assert "SUMMARY" not in json.dumps(request["messages"][3:])  # the compaction run is no turn
    # tokensAfter: the memory that message started from (without the message itself).
    assert compaction["tokensAfter"] == estimate_usage(request["messages"][:-1], [], "").prompt_tokens


async def test_the_frame_compacts_the_branch_ending_at_seq(roomy, registry, conversation):
    from tests.asgi_socket import Socket

    fake = roomy
    runs = await turns(fake, registry, conversation, 4)
    third = await sync_to_async(seq_of)(runs[2].pk, "user_message")
    fake.requests.clear()
    fake.script(answered("SUMMARY OF TURN ZERO"))
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "compact", "seq": third})
    frames = await socket.run_to_end()
    compaction = next(f for f in frames if f["type"] == "compaction")
    assert compaction["trigger"] == "manual" and compaction["turns"] == 1
    assert compaction["throughSeq"] == await sync_to_async(seq_of)(runs[0].pk, "complete")
    assert frames[-1]["status"] == "succeeded"
    (call,) = fake.requests
    assert "alpha0" in sent(call) and "alpha1" not in sent(call)
    await socket.send({"type": "compact", "seq": 10_000})
    error = (await socket.until(lambda f: f["type"] == "error"))[-1]
    assert error["code"] == "BAD_REQUEST"
    await socket.close()


async def test_refusals(roomy, registry, conversation, make_user, settings):
    fake = roomy
    runs = await turns(fake, registry, conversation, 2)
    http = await client(conversation.owner)
    fake.requests.clear()
    count = await Run.objects.acount()
    nothing = await compact(http, conversation)
    assert nothing.status_code == 409 and nothing.json()["error"]["code"] == "NOTHING_TO_COMPACT"
    answer_seq = await sync_to_async(seq_of)(runs[0].pk, "complete")
    for seq in (answer_seq, 10_000, "one"):
        bad = await compact(http, conversation, {"seq": seq})
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "BAD_REQUEST"
    stranger = await client(await sync_to_async(make_user)("mallory"))
    gone = await compact(stranger, conversation)
    assert gone.status_code == 404
    assert await Run.objects.acount() == count and fake.requests == []

    fake.script(text_reply("slow " * 60, piece=1, delay=0.05))
    await start_run(StartRun(conversation=conversation, user=conversation.owner, content="busy"))
    busy = await compact(http, conversation, {"seq": 10_000})  # RUN_IN_PROGRESS decided first
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "RUN_IN_PROGRESS"
    await http.post(f"/api/conversations/{conversation.pk}/cancel/")
    await settled(registry)
    settings.AGENT_MESSAGES_PER_MINUTE = await Run.objects.acount()  # a compaction run counts as any start
    limited = await compact(http, conversation, {"seq": await sync_to_async(seq_of)(runs[1].pk, "user_message")})
    assert limited.status_code == 429 and limited.json()["error"]["code"] == "RATE_LIMITED"
    settings.AGENT_MESSAGES_PER_MINUTE = 0
    await Budget.objects.acreate(scope="user", user=conversation.owner, period="day", tokens=5)
    await ModelCall.objects.acreate(run=runs[0], iteration=1, attempt=1, started_at=timezone.now(), total_tokens=5)
    spent = await compact(http, conversation)
    assert spent.status_code == 429 and spent.json()["error"]["code"] == "QUOTA_EXCEEDED"
    assert spent["Retry-After"] and spent.json()["error"]["budget"]["scope"] == "user"
    assert await Run.objects.filter(status="running").acount() == 0


async def test_a_failed_compaction_fails_its_run_and_compacts_nothing(roomy, registry, conversation):
    fake = roomy
    await turns(fake, registry, conversation, 4)
    fake.script({"status": 500, "body": {"error": {"message": "down"}}})
    http = await client(conversation.owner)
    answer = await compact(http, conversation)
    assert answer.status_code == 202
    await settled(registry)
    events = await sync_to_async(payloads)(answer.json()["runId"])
    assert [e["type"] for e in events] == ["error", "complete"]
    assert events[0]["code"] == "COMPACTION_FAILED" and events[1]["status"] == "failed"
    fake.requests.clear()
    fake.script(answered("answer4"))
    await ask(registry, conversation, "alpha4")
    (request,) = fake.requests
    assert "alpha0" in sent(request) and SUMMARY_HEADING not in sent(request)


async def test_cancel_stops_a_compaction_run(roomy, registry, conversation):
    from tests.asgi_socket import Socket

    fake = roomy
    await turns(fake, registry, conversation, 4)
    fake.script(text_reply("slow " * 80, piece=1, delay=0.05))
    http = await client(conversation.owner)
    answer = await compact(http, conversation)
    assert answer.status_code == 202
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    sync = (await socket.history())[-1]
    assert sync["running"] is True  # the sync frame shows the compaction run
    await asyncio.sleep(0.2)
    await socket.send({"type": "cancel"})
    frames = await socket.run_to_end()
    assert frames[-1]["status"] == "cancelled" and frames[-1]["runId"] == answer.json()["runId"]
    await socket.close()
    await settled(registry)
    events = await sync_to_async(payloads)(answer.json()["runId"])
    assert [e["type"] for e in events] == ["error", "complete"]
    assert events[0]["code"] == "CANCELLED" and events[1]["status"] == "cancelled"


def test_a_compaction_run_whose_process_died_is_closed_never_resumed(conversation):
    run = Run.objects.create(conversation=conversation, user=conversation.owner, model="m", worker="runs.dead")
    taken = run_interrupt(run_id=run.pk, message="gone", worker="runs.new", max_resumes=3)
    assert taken is not None and not taken.resumed
    assert [f["type"] for f in taken.frames] == ["error", "complete"]
    run.refresh_from_db()
    assert run.status == "interrupted"


async def test_until_complete_is_not_ended_by_a_compaction_run(roomy, registry, conversation):
    from tests.asgi_http import RawStream
    from tests.asgi_socket import session_cookie

    fake = roomy
    await turns(fake, registry, conversation, 4)
    last = await Event.objects.filter(conversation=conversation).order_by("-seq").values_list("seq", flat=True).afirst()
    key = await sync_to_async(session_cookie)(conversation.owner)
    stream = RawStream(
        f"/api/conversations/{conversation.pk}/stream/?until=complete&after={last}",
        [(b"cookie", f"sessionid={key}".encode())],
    )
    await stream.open()
    assert (await stream.chunk()).startswith(b"event: sync")
    fake.script(answered("SUMMARY"), answered("answer4"))
    http = await client(conversation.owner)
    assert (await compact(http, conversation)).status_code == 202
    await settled(registry)
    await ask(registry, conversation, "alpha4")
    body = b""
    while (chunk := await stream.chunk()) is not None:
        body += chunk
    await stream.close()
    kinds = [line.split(b": ", 1)[1] for line in body.split(b"\n") if line.startswith(b"event: ")]
    assert kinds[:2] == [b"compaction", b"complete"]
    assert kinds[2] == b"user_message" and kinds[-1] == b"complete"


async def test_import_accepts_a_compaction_run(roomy, registry, conversation):
    fake = roomy
    await turns(fake, registry, conversation, 4)
    fake.script(answered("SUMMARY"))
    http = await client(conversation.owner)
    run_id = (await compact(http, conversation)).json()["runId"]
    await settled(registry)
    events = await sync_to_async(events_after)(conversation_id=conversation.pk)
    document = {"conversation": {"title": "t"}, "events": events}
    imported = parse_import(json.dumps(document).encode())
    assert [e[1]["type"] for e in imported.runs[-1].events] == ["compaction", "complete"]
    failed = [dict(e) for e in events]
    at = next(i for i, e in enumerate(failed) if e["runId"] == run_id)
    failed[at] = {"type": "error", "code": "COMPACTION_FAILED", "message": "m", "detail": "", **_frame(failed[at])}
    parse_import(json.dumps({"conversation": {"title": "t"}, "events": failed}).encode())
    failed[at]["code"] = "CANCELLED"
    with pytest.raises(ImportRefused):
        parse_import(json.dumps({"conversation": {"title": "t"}, "events": failed}).encode())


def _frame(event: dict) -> dict:
    return {k: event[k] for k in ("seq", "runId", "ts") if k in event}


def test_a_branch_read_from_the_log_compacts_too(make_user, settings):
    """An imported run with two user_messages stops the checkpoint walk: the compaction run's
    branch is then read from the log, from the turn it ends at."""
    settings.AGENT_COMPACT_KEEP_TURNS = 2
    frames: list[dict] = []

    def add(run: str, kind: str, **fields) -> int:
        frames.append({"seq": len(frames) + 1, "runId": run, "type": kind, **fields})
        return len(frames)

    first = add("r0", "user_message", content="q0", parentSeq=None)
    add("r0", "text", content="a0")
    add("r0", "complete", status="succeeded")
    second = add("r1", "user_message", content="q1", parentSeq=first)
    add("r1", "user_message", content="again", parentSeq=first)
    add("r1", "text", content="a1")
    add("r1", "complete", status="succeeded")
    third = add("r2", "user_message", content="q2", parentSeq=second)
    add("r2", "text", content="a2")
    add("r2", "complete", status="succeeded")
    add("r3", "user_message", content="q3", parentSeq=third)
    add("r3", "text", content="a3")
    add("r3", "complete", status="succeeded")
    imported = conversation_import(
        owner=make_user("alice"), imported=parse_import(json.dumps({"conversation": {}, "events": frames}).encode())
    )
    assert compaction_refusal(conversation_id=imported.pk, run_id=uuid.uuid4(), seq=None) is None
    found = compaction_memory(conversation_id=imported.pk, run_id=uuid.uuid4(), seq=None)
    assert len(found.layout.turns) >= 3 and "q3" in json.dumps(found.messages)
