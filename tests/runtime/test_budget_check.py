"""The check before every model call (docs/protocol.md, "Budgets"): a run whose budget runs out
between its model calls ends with `error` BUDGET_EXHAUSTED (its budget, retryAfter, resetsAt)
and `complete` failed, what it said so far kept; a budget is exceeded by at most the one model
call under way; the cost of each call is fixed at its record. Real runs: the real socket and
runtime against the fake model, scripted with tool calls."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from chat.models import Budget, Event, ModelCall, Run
from tests.asgi_socket import Socket
from tests.fakellm import text_reply, tool_call_reply
from tests.ops.test_metrics import scrape

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def with_usage(reply: dict, prompt: int, completion: int, *, said: str = "") -> dict:
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    before = [{"delta": {"content": said}}] if said else []
    return {**reply, "chunks": [*before, *reply["chunks"], {"usage": usage}]}


async def run_message(conversation, content: str = "go") -> list[dict]:
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": content})
    frames = await socket.run_to_end()
    await socket.close()
    return [f for f in frames if "seq" in f]


def calculator(prompt: int, completion: int, said: str = "") -> dict:
    return with_usage(tool_call_reply(("calculator", {"expression": "6*7"})), prompt, completion, said=said)


async def test_a_run_stops_between_model_calls_once_its_budget_is_used_up(
    conversation, registry, llm_settings, settings
):
    settings.AGENT_MODEL_PRICES = {"fake-model": {"input": 1.0, "output": 2.0}}
    await Budget.objects.acreate(scope="user", user=conversation.owner, period="day", tokens=100)
    llm_settings.script(
        calculator(50, 10, said="Let me compute. "),  # 60: below 100, the next call is made
        calculator(50, 10),  # 120: past it, by this one call
        calculator(50, 10),  # never asked for
        with_usage(text_reply("never"), 1, 1),
    )
    frames = await run_message(conversation)
    error, complete = frames[-2], frames[-1]
    assert error["type"] == "error" and error["code"] == "BUDGET_EXHAUSTED", frames
    assert error["budget"]["scope"] == "user" and error["budget"]["used"] == 120 and error["budget"]["exhausted"]
    assert error["retryAfter"] >= 1 and error["resetsAt"] == error["budget"]["resetsAt"]
    assert complete["type"] == "complete" and complete["status"] == "failed"
    assert complete["usage"]["totalTokens"] == 120  # one call past the limit, not more
    assert "Let me compute." in "".join(f["content"] for f in frames if f["type"] == "text")
    run = await Run.objects.aget(pk=complete["runId"])
    assert await ModelCall.objects.filter(run=run).acount() == 2
    costs = [c async for c in ModelCall.objects.filter(run=run).values_list("cost", flat=True)]
    assert costs == [pytest.approx((50 * 1.0 + 10 * 2.0) / 1_000_000)] * 2
    stored = await Event.objects.filter(run=run, type="error").afirst()
    assert stored.payload["code"] == "BUDGET_EXHAUSTED" and stored.payload["budget"]["used"] == 120
    samples = await sync_to_async(scrape)()
    assert samples[("agentsite_budget_stops_total", (("scope", "user"),))] == 1
    # The next start is refused, and counted as a refusal.
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": "more"})
    refused = await socket.recv()
    await socket.close()
    assert refused["type"] == "error" and refused["code"] == "QUOTA_EXCEEDED" and "seq" not in refused
    assert refused["budget"]["exhausted"] and refused["retryAfter"] >= 1 and refused["resetsAt"]
    samples = await sync_to_async(scrape)()
    assert samples[("agentsite_budget_refusals_total", (("scope", "user"),))] == 1


async def test_a_cost_budget_stops_a_run_too(conversation, registry, llm_settings, settings):
    settings.AGENT_MODEL_PRICES = {"fake-model": {"input": 1000.0, "output": 1000.0}}  # $ per million
    await Budget.objects.acreate(scope="user", user=conversation.owner, period="month", cost=0.06)
    llm_settings.script(calculator(40, 10), calculator(40, 10), with_usage(text_reply("never"), 1, 1))
    frames = await run_message(conversation)
    assert frames[-2]["code"] == "BUDGET_EXHAUSTED" and frames[-2]["budget"]["unit"] == "cost", frames
    assert frames[-1]["usage"]["totalTokens"] == 100  # $0.05 of $0.06, then $0.10: stopped before a third call
