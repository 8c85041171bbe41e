"""The OpenAI-compatible endpoint with the SYNC `openai.OpenAI` client against a real daphne
(docs/protocol.md, "OpenAI-compatible endpoint"): whole and streamed answers, the run's headers
through `with_raw_response`, the SDK's own error classes; a browser session calling /v1 (with its
CSRF token it works, without it a clear 403); and the request's `temperature` and `max_tokens`
reaching the model's request, under the agent's own cap, while a WebSocket run keeps the
agent's options. Plain sync tests: no event loop of theirs to fight the one the browser tests
leave in the main thread."""

from __future__ import annotations

import json

import openai
import pytest
from openai import OpenAI
from websockets.sync.client import connect

from tests.fakellm import text_reply

from .harness import SyncUser

pytestmark = pytest.mark.services


@pytest.fixture(scope="module")
def sync_server(databases, make_server):
    # The agent's own options: a WebSocket run keeps them, a /v1 call may replace the temperature
    # and lower (never raise) the max_tokens cap.
    return make_server(
        databases.new(),
        name="v1-sync",
        AGENT_MESSAGES_PER_MINUTE="1000",
        AGENT_TEMPERATURE="0.7",
        AGENT_MAX_TOKENS="50",
    )


@pytest.fixture(scope="module")
def one_a_minute(databases, make_server):
    return make_server(databases.new(), name="v1-sync-limited", AGENT_MESSAGES_PER_MINUTE="1")


@pytest.fixture
def user(sync_server):
    person = SyncUser(sync_server)
    yield person
    person.close()


def sdk(person: SyncUser) -> OpenAI:
    return OpenAI(base_url=f"{person.server.base}/v1", api_key=person.token(), max_retries=0, timeout=60)


def model_request(e2e_llm, content: str) -> dict:
    return next(body for body in reversed(e2e_llm.requests) if body["messages"][-1].get("content") == content)


def test_a_whole_answer_with_the_runs_headers(user, replies):
    client = sdk(user)
    replies.set("sync plain", text_reply("Sync answer.", thinking="Sync thought."))
    raw = client.chat.completions.with_raw_response.create(
        model="default", messages=[{"role": "user", "content": "sync plain"}]
    )
    conversation, run = raw.headers["X-Agentsite-Conversation"], raw.headers["X-Agentsite-Run"]
    completion = raw.parse()
    assert completion.choices[0].message.content == "Sync answer."
    assert completion.choices[0].message.model_extra["reasoning_content"] == "Sync thought."
    events = user.events(conversation)
    assert events[0]["runId"] == run and events[-1]["type"] == "complete" and events[-1]["runId"] == run
    assert [m.id for m in client.models.list().data] == ["default"]
    client.close()


def test_a_streamed_answer_delta_by_delta(user, replies):
    client = sdk(user)
    replies.set("sync stream", text_reply("Piece " * 10, piece=6))
    raw = client.chat.completions.with_raw_response.create(
        model="default", messages=[{"role": "user", "content": "sync stream"}], stream=True
    )
    conversation = raw.headers["X-Agentsite-Conversation"]
    chunks = list(raw.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    stored = user.events(conversation)
    assert text == "".join(e["content"] for e in stored if e["type"] == "text") == "Piece " * 10
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
    client.close()


def test_the_sdks_error_classes(user, one_a_minute):
    client = sdk(user)
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
    assert caught.value.status_code == 404 and caught.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="default", messages=[{"role": "user", "content": "x"}], temperature=3)
    assert caught.value.status_code == 400 and caught.value.body["param"] == "temperature"
    bad = OpenAI(base_url=f"{user.server.base}/v1", api_key="as_wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        bad.models.list()
    assert caught.value.status_code == 401 and caught.value.code == "invalid_api_key"
    limited = SyncUser(one_a_minute)
    client2 = sdk(limited)
    client2.chat.completions.create(model="default", messages=[{"role": "user", "content": "first"}])
    with pytest.raises(openai.RateLimitError) as caught:
        client2.chat.completions.create(model="default", messages=[{"role": "user", "content": "second"}])
    assert caught.value.status_code == 429 and caught.value.code == "rate_limit_exceeded"
    # The refused call's conversation went again: only the first call's remains.
    assert len(limited.http.get("/api/conversations/").json()["conversations"]) == 1
    for each in (client, bad, client2):
        each.close()
    limited.close()


def test_a_session_calls_v1_with_its_csrf_token_and_is_refused_without(user, replies):
    replies.set("from a session", text_reply("Session answer."))
    body = {"model": "default", "messages": [{"role": "user", "content": "from a session"}]}
    r = user.http.post("/v1/chat/completions", json=body, headers=user.unsafe_headers)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == "Session answer."
    assert user.http.get("/v1/models").json()["data"][0]["id"] == "default"  # a safe method needs none
    r = user.http.post("/v1/chat/completions", json=body, headers={"Referer": user.server.base})
    assert r.status_code == 403
    assert r.json()["error"]["code"] == "csrf_failed" and r.json()["error"]["type"] == "permission_error"
    r = user.http.post("/api/conversations/", json={}, headers={"Referer": user.server.base})
    assert (r.status_code, r.json()["error"]) == (403, "csrf_failed")


def test_temperature_and_max_tokens_reach_the_model_under_the_agents_cap(user, replies, e2e_llm):
    client = sdk(user)
    for content, asked, sent in (
        ("options low", {"temperature": 0.2, "max_tokens": 20}, (0.2, 20)),
        ("options high", {"temperature": 1.5, "max_tokens": 500}, (1.5, 50)),  # the agent's cap stays
        ("options none", {}, (0.7, 50)),
        ("options new name", {"extra_body": {"max_completion_tokens": 30}}, (0.7, 30)),
    ):
        replies.set(content, text_reply("ok"))
        client.chat.completions.create(model="default", messages=[{"role": "user", "content": content}], **asked)
        request = model_request(e2e_llm, content)
        assert (request.get("temperature"), request.get("max_tokens")) == sent, content
    client.close()


def test_a_websocket_run_keeps_the_agents_options(user, replies, e2e_llm):
    conversation = user.conversation()
    replies.set("socket options", text_reply("ok"))
    cookie = "; ".join(f"{k}={v}" for k, v in user.http.cookies.items())
    url = f"{user.server.ws_base}/ws/chat/{conversation}/"
    with connect(url, additional_headers={"Origin": user.server.base, "Cookie": cookie}, open_timeout=10) as ws:
        while json.loads(ws.recv(timeout=15))["type"] != "sync":
            pass
        ws.send(json.dumps({"type": "message", "content": "socket options"}))
        while not ((frame := json.loads(ws.recv(timeout=30)))["type"] == "complete" and "seq" in frame):
            pass
    request = model_request(e2e_llm, "socket options")
    assert (request.get("temperature"), request.get("max_tokens")) == (0.7, 50)
