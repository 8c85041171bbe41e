"""Budgets through a real daphne and the real openai SDK (docs/protocol.md, "Budgets"): eight
parallel `/v1` calls against a tiny user budget admit one run, which goes past it by at most its
one model call, and refuse the others with 429 `insufficient_quota` (OpenAI's type, Retry-After,
x-should-retry: false, so the SDK does not retry); a token budget stops a multi-call `/v1` run
between its model calls, not streamed (429, the answer so far in the conversation) and streamed
(an error chunk ends the stream)."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from tests.fakellm import text_reply, tool_call_reply

from .harness import shell
from .test_openai_api import sdk

pytestmark = pytest.mark.services

BURST = 8


def costing(reply: dict, tokens: int) -> dict:
    usage = {"prompt_tokens": tokens - 2, "completion_tokens": 2, "total_tokens": tokens}
    return {**reply, "chunks": [*reply["chunks"], {"usage": usage}]}


@pytest.fixture(scope="module")
def budget_server(databases, make_server):
    return make_server(databases.new(), name="budgets", AGENT_MESSAGES_PER_MINUTE="1000")


def budget(server, code: str) -> None:
    shell(server, "from chat.models import Budget; from django.contrib.auth.models import User; " + code)


async def completion(client, message: str, **more):
    try:
        return await client.chat.completions.create(
            model="default", messages=[{"role": "user", "content": message}], **more
        )
    except openai.APIError as exc:
        return exc


def refused(outcome) -> bool:
    return isinstance(outcome, openai.RateLimitError) and outcome.code == "insufficient_quota"


async def test_eight_parallel_completions_against_a_tiny_budget(budget_server, replies):
    owner, client = await sdk(budget_server)
    budget(
        budget_server,
        f"Budget.objects.create(scope='user', user=User.objects.get(username={owner.username!r}), tokens=20)",
    )
    message = replies.set("a budget burst", costing(text_reply("A long and costly answer.", piece=2, delay=0.1), 30))
    outcomes = await asyncio.gather(*(completion(client, message) for _ in range(BURST)))
    answered = [o for o in outcomes if not isinstance(o, Exception)]
    assert len(answered) == 1, outcomes
    assert all(refused(o) for o in outcomes if isinstance(o, Exception)), outcomes
    usage = (await owner.api("GET", "/api/usage/?days=1")).json()
    assert usage["today"]["totalTokens"] == 30  # past 20 by the one run's one model call
    (spent,) = [b for b in usage["budgets"] if b["scope"] == "user"]
    assert (spent["used"], spent["exhausted"], spent["reserved"]) == (30, True, 0)
    # The refusal as it is on the wire: OpenAI's type, and headers that keep the SDK from retrying.
    async with httpx.AsyncClient() as http:
        r = await http.post(
            f"{budget_server.base}/v1/chat/completions",
            headers={"Authorization": f"Bearer {client.api_key}"},
            json={"model": "default", "messages": [{"role": "user", "content": message}]},
        )
    assert r.status_code == 429 and r.headers["x-should-retry"] == "false" and int(r.headers["Retry-After"]) >= 1
    assert r.json()["error"] == {
        "message": r.json()["error"]["message"],
        "type": "insufficient_quota",
        "param": None,
        "code": "insufficient_quota",
    }
    conversations = (await owner.api("GET", "/api/conversations/")).json()
    assert len(conversations["conversations"]) == 1  # refused starts leave no conversation behind
    await client.close()
    await owner.aclose()


async def test_a_token_budget_stops_a_v1_run_between_its_model_calls(budget_server, replies):
    owner, client = await sdk(budget_server)
    budget(
        budget_server,
        f"from chat.models import ApiToken; t = ApiToken.objects.get(user__username={owner.username!r}); "
        "Budget.objects.create(scope='token', token=t, tokens=100)",
    )
    calc = costing(tool_call_reply(("calculator", {"expression": "6*7"})), 60)
    message = replies.set("count to the budget", calc, calc, costing(text_reply("never"), 5))
    raw = await client.chat.completions.with_raw_response.create(
        model="default", messages=[{"role": "user", "content": "hello"}]
    )  # a cheap start first: 100 reserved... and settled
    assert raw.http_response.status_code == 200
    stopped = await completion(client, message)
    assert refused(stopped), stopped
    assert stopped.response.headers["x-should-retry"] == "false"
    conversation = stopped.response.headers["X-Agentsite-Conversation"]
    events = (await owner.api("GET", f"/api/conversations/{conversation}/events/")).json()["events"]
    error, complete = events[-2], events[-1]
    assert error["code"] == "BUDGET_EXHAUSTED" and error["budget"]["scope"] == "token"
    assert complete["status"] == "failed" and complete["usage"]["totalTokens"] == 120
    # Streamed: the next run is refused at its start (the budget is used up).
    streamed = await completion(client, "more", stream=True)
    assert refused(streamed), streamed
    await client.close()
    await owner.aclose()


async def test_a_streamed_v1_run_that_runs_out_ends_with_an_error_chunk(budget_server, replies):
    owner, client = await sdk(budget_server)
    budget(
        budget_server,
        f"Budget.objects.create(scope='user', user=User.objects.get(username={owner.username!r}), tokens=100)",
    )
    calc = costing(tool_call_reply(("calculator", {"expression": "6*7"})), 60)
    message = replies.set("stream to the budget", calc, calc, costing(text_reply("never"), 5))
    stream = await client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": message}], stream=True
    )
    with pytest.raises(openai.APIError) as ended:
        async for _ in stream:
            pass
    assert ended.value.code == "insufficient_quota" and ended.value.type == "insufficient_quota"
    usage = (await owner.api("GET", "/api/usage/?days=1")).json()
    assert usage["today"]["totalTokens"] == 120
    await client.close()
    await owner.aclose()


async def test_a_burst_through_v1_and_the_socket_at_once_admits_one_run(budget_server, replies):
    """The reservation is the database's, whatever the door: four `/v1` calls and four socket
    messages at once against a 20-token budget start one run, which passes it by its one call."""
    owner, client = await sdk(budget_server)
    budget(
        budget_server,
        f"Budget.objects.create(scope='user', user=User.objects.get(username={owner.username!r}), tokens=20)",
    )
    message = replies.set("a mixed burst", costing(text_reply("A costly answer.", piece=2, delay=0.1), 30))
    sockets = []
    for _ in range(BURST // 2):
        sock = await owner.socket(await owner.create_conversation())
        await sock.sync()
        sockets.append(sock)

    async def by_socket(sock) -> dict:
        await sock.message(message)
        return (
            await sock.until(
                lambda f: (
                    f.get("type") in ("user_message", "error") and "seq" not in f or f.get("type") == "user_message"
                )
            )
        )[-1]

    outcomes = await asyncio.gather(
        *(completion(client, message) for _ in range(BURST // 2)), *(by_socket(sock) for sock in sockets)
    )
    answered = [o for o in outcomes[: BURST // 2] if not isinstance(o, Exception)]
    started = [o for o in outcomes[BURST // 2 :] if o["type"] == "user_message"]
    assert len(answered) + len(started) == 1, outcomes
    assert all(refused(o) for o in outcomes[: BURST // 2] if isinstance(o, Exception)), outcomes
    assert all(o["code"] == "QUOTA_EXCEEDED" for o in outcomes[BURST // 2 :] if o["type"] == "error"), outcomes
    for sock in sockets:
        if started and sock.frames and any(f.get("type") == "user_message" for f in sock.frames):
            await sock.until_complete()
        await sock.close()
    await asyncio.sleep(0.5)  # a run started through a socket settles its usage with its complete
    usage = (await owner.api("GET", "/api/usage/?days=1")).json()
    assert usage["today"]["totalTokens"] == 30  # past 20 by the one run's one model call
    await client.close()
    await owner.aclose()
