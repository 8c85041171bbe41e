"""The daily quota while runs are in flight, through real daphnes (issue 46, point 10;
docs/configuration.md, "The quota and runs in progress"): eight parallel `/v1` calls of the
real openai SDK against a 20-token quota, alone, mixed with WebSocket messages, and spread over
two daphnes on one PostgreSQL + Redis, admit one run (which goes past the quota) and refuse the
others with 429 `insufficient_quota` / `QUOTA_EXCEEDED`; a run in progress holds the quota until
it ends, and one that ends past it refuses the next start."""

from __future__ import annotations

import asyncio

import openai
import pytest

from tests.fakellm import text_reply, tool_call_reply

from .conftest import ON_POSTGRES, REDIS_URL
from .harness import Client, events_only
from .test_openai_api import sdk

pytestmark = pytest.mark.services

QUOTA = "20"
BURST = 8


def costing(reply: dict, tokens: int) -> dict:
    usage = {"prompt_tokens": tokens - 2, "completion_tokens": 2, "total_tokens": tokens}
    return {**reply, "chunks": [*reply["chunks"], {"usage": usage}]}


# One run spends 30 tokens: past the 20 of the quota on its own. Slow enough that the burst's
# other starts come while it is in flight (the counts asserted hold however they interleave).
OVERSPEND = costing(text_reply("A long and costly answer.", piece=2, delay=0.1), 30)


@pytest.fixture(scope="module")
def quota_server(databases, make_server):
    return make_server(
        databases.new(),
        name="quota-in-flight",
        AGENT_DAILY_TOKEN_QUOTA=QUOTA,
        AGENT_MESSAGES_PER_MINUTE="1000",
        AGENT_APPROVAL_TOOLS="calc*",
        AGENT_APPROVAL_TIMEOUT="120",
    )


async def completion(client, message: str):
    """The completion, or the error the SDK raised."""
    try:
        return await client.chat.completions.create(model="default", messages=[{"role": "user", "content": message}])
    except openai.APIError as exc:
        return exc


def refused(outcome) -> bool:
    return isinstance(outcome, openai.RateLimitError) and outcome.code == "insufficient_quota"


async def used_today(owner: Client) -> int:
    return (await owner.api("GET", "/api/usage/")).json()["today"]["totalTokens"]


async def test_eight_parallel_completions_admit_one_run_past_a_tiny_quota(quota_server, replies):
    owner, client = await sdk(quota_server)
    message = replies.set("a burst of completions", OVERSPEND)
    outcomes = await asyncio.gather(*(completion(client, message) for _ in range(BURST)))
    answered = [o for o in outcomes if not isinstance(o, Exception)]
    assert len(answered) == 1, outcomes
    assert answered[0].choices[0].message.content == "A long and costly answer."
    assert all(refused(o) for o in outcomes if isinstance(o, Exception)), outcomes
    # The one run ended past the quota: the next start is refused as used up.
    late = await completion(client, message)
    assert refused(late) and "quota is used up" in late.message
    assert await used_today(owner) == 30
    await client.close()
    await owner.aclose()


async def socket_outcome(owner: Client, message: str) -> str:
    """A message on a new conversation's socket: "answered", or the error frame's code."""
    sock = await owner.socket(await owner.create_conversation())
    await sock.sync()
    await sock.message(message)
    frames = await sock.until(lambda f: (f["type"] == "complete" and "seq" in f) or (f["type"] == "error"))
    await sock.close()
    return "answered" if frames[-1]["type"] == "complete" else frames[-1]["code"]


async def test_sockets_and_completions_at_once_admit_one_run(quota_server, replies):
    owner, client = await sdk(quota_server)
    message = replies.set("a mixed burst", OVERSPEND)
    outcomes = await asyncio.gather(
        *(socket_outcome(owner, message) for _ in range(BURST // 2)),
        *(completion(client, message) for _ in range(BURST // 2)),
    )
    on_sockets, on_v1 = outcomes[: BURST // 2], outcomes[BURST // 2 :]
    admitted = on_sockets.count("answered") + sum(not isinstance(o, Exception) for o in on_v1)
    assert admitted == 1, outcomes
    assert all(o in ("answered", "QUOTA_EXCEEDED") for o in on_sockets), on_sockets
    assert all(refused(o) for o in on_v1 if isinstance(o, Exception)), on_v1
    assert await used_today(owner) == 30
    await client.close()
    await owner.aclose()


async def test_a_run_in_progress_holds_the_quota_until_it_ends(quota_server, replies):
    owner, client = await sdk(quota_server)
    # A run that waits on an approval: in flight until its owner answers, 4 + 4 tokens.
    held = replies.set(
        "hold the quota",
        costing(tool_call_reply(("calculator", {"expression": "6*7"})), 4),
        costing(text_reply("42"), 4),
    )
    cheap = replies.set("a cheap completion", costing(text_reply("ok"), 14))
    sock = await owner.socket(await owner.create_conversation())
    await sock.sync()
    await sock.message(held)
    await sock.until(lambda f: f["type"] == "approval_request")
    # 4 of 20 used, but the run in progress may use the rest: refused, saying why.
    waiting = await completion(client, cheap)
    assert refused(waiting) and "in progress" in waiting.message, waiting
    # The same over runs over HTTP (`QUOTA_EXCEEDED`, 429).
    conversation = await owner.create_conversation()
    r = await owner.api("POST", f"/api/conversations/{conversation}/messages/", json_body={"content": cheap})
    assert (r.status_code, r.json()["error"]["code"]) == (429, "QUOTA_EXCEEDED")
    assert r.json()["error"]["detail"].startswith("4 of 20 tokens used today (UTC) and a run in progress")
    await sock.send({"type": "approve", "toolCallId": "call_0", "decision": "approve"})
    assert events_only(await sock.until_complete())[-1]["status"] == "succeeded"
    await sock.close()
    # It ended at 8 of 20: the next run starts, and ends past the quota (22 of 20) ...
    done = await completion(client, cheap)
    assert not isinstance(done, Exception) and done.choices[0].message.content == "ok"
    # ... which refuses the one after it.
    late = await completion(client, cheap)
    assert refused(late) and "quota is used up" in late.message
    assert await used_today(owner) == 22
    await client.close()
    await owner.aclose()


@pytest.mark.multiprocess
@pytest.mark.skipif(not (ON_POSTGRES and REDIS_URL), reason="needs DATABASE_URL=postgres://... and REDIS_URL")
async def test_two_daphnes_admit_one_run_of_a_parallel_burst(databases, make_server, replies):
    shared = databases.new()
    a = make_server(shared, name="quota-A", AGENT_DAILY_TOKEN_QUOTA=QUOTA, AGENT_MESSAGES_PER_MINUTE="1000")
    b = make_server(shared, name="quota-B", AGENT_DAILY_TOKEN_QUOTA=QUOTA, AGENT_MESSAGES_PER_MINUTE="1000")
    owner, on_a = await sdk(a)
    on_b = openai.AsyncOpenAI(base_url=f"{b.base}/v1", api_key=on_a.api_key, max_retries=0, timeout=60)
    message = replies.set("a burst over two processes", OVERSPEND)
    outcomes = await asyncio.gather(*(completion(on_a if i % 2 else on_b, message) for i in range(BURST)))
    answered = [o for o in outcomes if not isinstance(o, Exception)]
    assert len(answered) == 1, outcomes
    assert all(refused(o) for o in outcomes if isinstance(o, Exception)), outcomes
    assert await used_today(owner) == 30
    for client in (on_a, on_b):
        await client.close()
    await owner.aclose()
