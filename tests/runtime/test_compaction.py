"""Compaction (docs/protocol.md, "Compaction") with the fake model: a run whose request would pass
AGENT_COMPACT_AT of its context first has its older turns summarized by its model; the request
then holds the summary and the kept turns, not the oldest, and fits; later runs of the branch
start from the summary; a failed compaction trims instead and never fails the run; a branch
that left before the summarized turns never gets the summary."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from chat.agent.compaction import SUMMARY_HEADING
from chat.agent.estimate import estimate_usage
from chat.models import Event, MetricTally, ModelCall, Run
from chat.ops.metrics import series_key
from chat.runs.requests import StartRun
from chat.runs.starter import start_run
from tests.fakellm import text_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]

LIMIT = 300  # AGENT_CONTEXT_TOKENS 600 x AGENT_COMPACT_AT 0.5


@pytest.fixture
def small_context(llm_settings, settings):
    settings.AGENT_TOOLS = []  # no tool schemas: the sizes below are the messages'
    settings.AGENT_SYSTEM_PROMPT = "You help."
    settings.AGENT_CONTEXT_TOKENS = 600
    settings.AGENT_COMPACT_AT = 0.5
    settings.AGENT_COMPACT_KEEP_TURNS = 2
    settings.AGENT_COMPACT_MAX_MESSAGES = 0
    settings.AGENT_MAX_RETRIES = 0
    settings.AGENT_MESSAGES_PER_MINUTE = 0
    return llm_settings


def question(i: int) -> str:
    return f"alpha{i} " + "x" * 400  # about 100 tokens


def answered(text: str, prompt: int = 0, completion: int = 0) -> dict:
    reply = text_reply(text)
    reply["chunks"].append(
        {"usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}
    )
    return reply


async def ask(registry, conversation, content: str, **version) -> Run:
    run, _ = await start_run(StartRun(conversation=conversation, user=conversation.owner, content=content, **version))
    await registry.wait_idle()
    return run


def tally(name: str, **labels) -> float:
    """A counter of /metrics kept as it happens (chat.ops.metrics.MetricTally)."""
    return MetricTally.objects.filter(series=series_key(name, labels)).values_list("value", flat=True).first() or 0


def payloads(run_id) -> list[dict]:
    return list(Event.objects.filter(run_id=run_id).order_by("seq").values_list("payload", flat=True))


def seq_of(run_id, kind: str) -> int:
    return Event.objects.filter(run_id=run_id, type=kind).values_list("seq", flat=True).get()


def sent(body: dict) -> str:
    return json.dumps(body["messages"], ensure_ascii=False)


def size(body: dict) -> int:
    return estimate_usage(body["messages"], body.get("tools") or [], "").prompt_tokens


async def test_older_turns_are_summarized_and_the_next_request_holds_the_summary_and_fits(
    small_context, registry, conversation, settings
):
    fake = small_context
    fake.script(answered("y" * 200), answered("z" * 200))
    first = await ask(registry, conversation, question(0))
    await ask(registry, conversation, question(1))
    fake.requests.clear()
    fake.script(answered("SUMMARY OF TURN ZERO", 300, 7), answered("answer two", 200, 3))
    third = await ask(registry, conversation, question(2))

    compaction_call, agent_call = fake.requests
    assert "tools" not in compaction_call
    assert compaction_call["messages"][-1] == {"role": "user", "content": settings.AGENT_COMPACT_PROMPT}
    assert "alpha0" in sent(compaction_call) and "alpha1" not in sent(compaction_call)
    assert agent_call["messages"][1]["content"] == f"{SUMMARY_HEADING}\nSUMMARY OF TURN ZERO"
    assert "alpha0" not in sent(agent_call)
    assert "alpha1" in sent(agent_call) and "alpha2" in sent(agent_call)
    assert size(agent_call) <= LIMIT

    events = await sync_to_async(payloads)(third.pk)
    assert [e["type"] for e in events] == ["user_message", "compaction", *["text"] * (len(events) - 3), "complete"]
    compaction = events[1]
    through = await sync_to_async(seq_of)(first.pk, "complete")
    assert compaction == {
        "type": "compaction",
        "summary": "SUMMARY OF TURN ZERO",
        "throughSeq": through,
        "previousSeq": None,
        "turns": 1,
        "tokensBefore": compaction["tokensBefore"],
        "tokensAfter": size(agent_call),
        "trigger": "auto",
    }
    assert compaction["tokensBefore"] > LIMIT
    # The compaction call is one of the run's: in the inspector (purpose) and in its usage.
    calls = await sync_to_async(list)(
        ModelCall.objects.filter(run=third).order_by("started_at").values_list("purpose", "total_tokens")
    )
    assert calls == [("compaction", 307), ("agent", 203)]
    assert events[-1]["usage"] == {"promptTokens": 500, "completionTokens": 10, "totalTokens": 510}
    assert events[-1]["context"]["limit"] == 600 and 0 < events[-1]["context"]["tokens"] <= 600
    assert await sync_to_async(tally)("agentsite_compactions_total", trigger="auto", outcome="ok") == 1

    # The next run starts from the summary; full again, it summarizes the summary and turn 1,
    # never turn 0 again.
    fake.requests.clear()
    fake.script(answered("SUMMARY OF TURNS ZERO AND ONE"), answered("answer three"))
    fourth = await ask(registry, conversation, question(3))
    compaction_call, agent_call = fake.requests
    assert "SUMMARY OF TURN ZERO" in sent(compaction_call) and "alpha1" in sent(compaction_call)
    assert "alpha0" not in sent(compaction_call) and "alpha2" not in sent(compaction_call)
    assert agent_call["messages"][1]["content"].endswith("SUMMARY OF TURNS ZERO AND ONE")
    assert "alpha1" not in sent(agent_call) and "alpha2" in sent(agent_call) and "alpha3" in sent(agent_call)
    second_compaction = (await sync_to_async(payloads)(fourth.pk))[1]
    assert second_compaction["previousSeq"] == await sync_to_async(seq_of)(third.pk, "compaction")
    assert second_compaction["turns"] == 2

    # A run under the limit is sent the summary and its turns as they are, and compacts nothing.
    fake.requests.clear()
    fake.script(answered("short"))
    fifth = await ask(registry, conversation, "alpha4 short")
    (agent_call,) = fake.requests
    assert agent_call["messages"][1]["content"].endswith("SUMMARY OF TURNS ZERO AND ONE")
    assert "alpha2" in sent(agent_call) and "alpha3" in sent(agent_call)
    assert "compaction" not in [e["type"] for e in await sync_to_async(payloads)(fifth.pk)]


async def test_a_failed_compaction_trims_and_the_run_goes_on(small_context, registry, conversation):
    fake = small_context
    fake.script(answered("y" * 200), answered("z" * 200))
    await ask(registry, conversation, question(0))
    await ask(registry, conversation, question(1))
    fake.requests.clear()
    fake.script({"status": 500, "body": {"error": {"message": "down"}}}, answered("still answered"))
    run = await ask(registry, conversation, question(2))

    events = await sync_to_async(payloads)(run.pk)
    errors = [e for e in events if e["type"] == "error"]
    assert [e["code"] for e in errors] == ["COMPACTION_FAILED"]  # its failed attempt is no LLM_CALL_FAILED
    assert "compaction" not in [e["type"] for e in events]
    assert events[-1]["status"] == "succeeded"
    agent_call = fake.requests[-1]
    assert "alpha0" not in sent(agent_call) and "alpha2" in sent(agent_call)  # the oldest turn trimmed
    assert size(agent_call) <= LIMIT
    assert (await sync_to_async(Run.objects.get)(pk=run.pk)).status == "succeeded"
    assert await sync_to_async(tally)("agentsite_compactions_total", trigger="auto", outcome="failed") == 1


async def test_a_branch_that_left_before_the_summarized_turn_never_gets_the_summary(
    small_context, registry, conversation
):
    fake = small_context
    fake.script(answered("y" * 200), answered("z" * 200))
    first = await ask(registry, conversation, question(0))
    second = await ask(registry, conversation, question(1))
    fake.script(answered("SUMMARY OF TURN ZERO"), answered("answer two"))
    third = await ask(registry, conversation, question(2))
    first_seq = await sync_to_async(seq_of)(first.pk, "user_message")
    third_seq = await sync_to_async(seq_of)(third.pk, "user_message")

    # An edit of the summarized message: a branch without turn 0, so without its summary.
    fake.requests.clear()
    fake.script(answered("edited"))
    await ask(registry, conversation, "alpha0 edited", edits=first_seq)
    (request,) = fake.requests
    assert "SUMMARY" not in sent(request) and "alpha1" not in sent(request)

    # An edit of the message whose run compacted: its branch holds turn 0, the summary stands for it.
    fake.requests.clear()
    fake.script(answered("edited again"))
    await ask(registry, conversation, "alpha2 edited", edits=third_seq)
    (request,) = fake.requests
    assert request["messages"][1]["content"].endswith("SUMMARY OF TURN ZERO")
    assert "alpha0" not in sent(request) and "alpha1" in sent(request)
    assert second.pk != third.pk
