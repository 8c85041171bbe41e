"""The OpenAI-compatible endpoint through a real daphne
(docs/protocol.md, "OpenAI-compatible endpoint"): the official `openai` SDK is the client of our /v1, a personal API token its key,
and the fake OpenAI-compatible model answers the agent. What the SDK reads is checked against
the stored events, the request the model received, the user's list and the inspector."""

from __future__ import annotations

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from tests.fakellm import text_reply, tool_call_reply

from .harness import Client, shell

pytestmark = pytest.mark.services

USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


@pytest.fixture(scope="module")
def v1_server(databases, make_server):
    return make_server(databases.new(), name="v1", AGENT_APPROVAL_TOOLS="calc*", AGENT_MESSAGES_PER_MINUTE="1000")


@pytest.fixture(scope="module")
def limits_server(databases, make_server):
    return make_server(databases.new(), name="v1-limits", AGENT_DAILY_TOKEN_QUOTA="1", AGENT_MAX_ITERATIONS="1")


def with_usage(reply: dict) -> dict:
    return {**reply, "chunks": [*reply["chunks"], {"usage": USAGE}]}


async def sdk(server) -> tuple[Client, AsyncOpenAI]:
    owner = await Client(server).signup()
    r = await owner.api("POST", "/api/tokens/", json_body={"name": "sdk"})
    assert r.status_code == 201, r.text
    return owner, AsyncOpenAI(base_url=f"{server.base}/v1", api_key=r.json()["token"], max_retries=0, timeout=60)


def answer_of(events: list[dict]) -> tuple[str, str]:
    text = "".join(e["content"] for e in events if e["type"] == "text")
    thinking = "".join(e["content"] for e in events if e["type"] == "thinking")
    return text, thinking


async def test_models_list_the_agents_default_first(v1_server):
    owner, client = await sdk(v1_server)
    page = await client.models.list()
    assert [m.id for m in page.data] == ["default"]
    assert page.data[0].object == "model" and page.data[0].owned_by == "agentsite"
    assert isinstance(page.data[0].created, int)
    await client.close()
    await owner.aclose()


async def test_a_completion_is_the_runs_answer_on_a_new_api_conversation(v1_server, replies, e2e_llm):
    owner, client = await sdk(v1_server)
    replies.set("v1 plain", with_usage(text_reply("The answer is 42.", thinking="Let me think.")))
    raw = await client.chat.completions.with_raw_response.create(
        model="default",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "earlier question"},
            {"role": "assistant", "content": "earlier answer"},
            {"role": "user", "content": "v1 plain"},
        ],
        temperature=0.2,
        max_tokens=100,
    )
    conversation, run = raw.headers["x-agentsite-conversation"], raw.headers["x-agentsite-run"]
    completion = raw.parse()
    assert completion.object == "chat.completion" and completion.model == "default"
    choice = completion.choices[0]
    assert choice.message.content == "The answer is 42."
    assert choice.message.model_extra["reasoning_content"] == "Let me think."
    assert choice.finish_reason == "stop"
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (11, 7)
    assert completion.usage.total_tokens == 18
    events = await owner.events(conversation)
    assert events[0]["type"] == "user_message" and events[0]["runId"] == run
    assert events[0]["content"] == "v1 plain"
    assert [m["content"] for m in events[0]["history"]] == ["Be brief.", "earlier question", "earlier answer"]
    assert answer_of(events) == ("The answer is 42.", "Let me think.")
    # The earlier messages were the run's memory: the model received them before the last one.
    sent = next(body for body in e2e_llm.requests if body["messages"][-1].get("content") == "v1 plain")
    tail = [(m["role"], m["content"]) for m in sent["messages"][-4:]]
    assert tail == [
        ("system", "Be brief."),
        ("user", "earlier question"),
        ("assistant", "earlier answer"),
        ("user", "v1 plain"),
    ]
    # The user's list shows it, marked as from the API.
    r = await owner.api("GET", "/api/conversations/")
    listed = {c["id"]: c for c in r.json()["conversations"]}
    assert listed[conversation]["source"] == "api" and listed[conversation]["title"] == "v1 plain"
    # Staff inspect it like any other run.
    staff = await Client(v1_server).signup()
    shell(
        v1_server,
        "from django.contrib.auth.models import User; "
        f"User.objects.filter(username={staff.username!r}).update(is_staff=True)",
    )
    page = await staff.http.get(staff.url(f"/inspect/?conversation={conversation}"))
    assert page.status_code == 200 and run in page.text and "tag-api" in page.text
    page = await staff.http.get(staff.url(f"/inspect/runs/{run}/"))
    assert page.status_code == 200 and "OpenAI-compatible endpoint" in page.text
    await staff.aclose()
    await client.close()
    await owner.aclose()


async def test_a_streamed_completion_is_the_stored_answer_delta_by_delta(v1_server, replies):
    owner, client = await sdk(v1_server)
    replies.set("v1 stream", with_usage(text_reply("Streaming " * 12, thinking="Hmm, streaming.", piece=5)))
    raw = await client.chat.completions.with_raw_response.create(
        model="default",
        messages=[{"role": "user", "content": "v1 stream"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    assert raw.headers["content-type"].startswith("text/event-stream")
    conversation = raw.headers["x-agentsite-conversation"]
    content, reasoning, finish, usage, count = "", "", [], None, 0
    async for chunk in raw.parse():
        assert chunk.object == "chat.completion.chunk"
        if chunk.usage is not None:
            assert chunk.choices == []
            usage = chunk.usage
            continue
        delta = chunk.choices[0].delta
        count += bool(delta.content)
        content += delta.content or ""
        reasoning += (delta.model_extra or {}).get("reasoning_content") or ""
        if chunk.choices[0].finish_reason:
            finish.append(chunk.choices[0].finish_reason)
    events = await owner.events(conversation)
    assert (content, reasoning) == answer_of(events) == ("Streaming " * 12, "Hmm, streaming.")
    assert finish == ["stop"] and usage is not None and usage.total_tokens == 18
    assert count == sum(e["type"] == "text" for e in events)  # a chunk per stored text event
    # [DONE] ends the stream (read raw: the SDK consumes it).
    r = await client.chat.completions.with_raw_response.create(
        model="default", messages=[{"role": "user", "content": "v1 stream"}], stream=True
    )
    body = b"".join([part async for part in r.http_response.aiter_bytes()])
    assert body.rstrip().endswith(b"data: [DONE]") and b'"usage"' not in body
    await client.close()
    await owner.aclose()


async def test_a_tool_needing_approval_is_denied_with_a_tool_error(v1_server, replies):
    owner, client = await sdk(v1_server)
    replies.set("v1 approve", tool_call_reply(("calculator", {"expression": "6*7"})), text_reply("It was denied."))
    raw = await client.chat.completions.with_raw_response.create(
        model="default", messages=[{"role": "user", "content": "v1 approve"}]
    )
    assert raw.parse().choices[0].message.content == "It was denied."
    events = await owner.events(raw.headers["x-agentsite-conversation"])
    kinds = [e["type"] for e in events]
    assert "approval_request" in kinds and "tool_start" not in kinds
    result = next(e for e in events if e["type"] == "approval_result")
    assert result["decision"] == "denied"
    assert events[-1]["status"] == "succeeded"
    await client.close()
    await owner.aclose()


async def test_refusals_take_openais_shape(v1_server):
    owner, client = await sdk(v1_server)
    with pytest.raises(openai.NotFoundError) as caught:
        await client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
    assert caught.value.code == "model_not_found" and caught.value.body["type"] == "invalid_request_error"
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(model="default", messages=[{"role": "user", "content": "x"}], tools=[tool])
    assert caught.value.code == "tools_not_supported"
    with pytest.raises(openai.BadRequestError):
        await client.chat.completions.create(model="default", messages=[{"role": "assistant", "content": "x"}])
    with pytest.raises(openai.BadRequestError):
        await client.chat.completions.create(model="default", messages=[])
    bad = AsyncOpenAI(base_url=f"{v1_server.base}/v1", api_key="as_not-a-token", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        await bad.models.list()
    assert caught.value.code == "invalid_api_key" and caught.value.body["type"] == "authentication_error"
    async with httpx.AsyncClient() as http:
        r = await http.get(f"{v1_server.base}/v1/models")  # no token, no session
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    await bad.close()
    await client.close()
    await owner.aclose()


async def test_the_iteration_limit_is_length_and_the_quota_429(limits_server, replies):
    owner, client = await sdk(limits_server)
    replies.set("v1 loop", with_usage(tool_call_reply(("calculator", {"expression": "1+1"}))))
    completion = await client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": "v1 loop"}]
    )
    assert completion.choices[0].finish_reason == "length"
    assert completion.usage.total_tokens == 18
    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(model="default", messages=[{"role": "user", "content": "again"}])
    assert caught.value.code == "insufficient_quota"
    await client.close()
    await owner.aclose()
