"""Failed model calls through the real SDK over real HTTP: each cause named, retried or not, and redacted.

Every transport test runs twice: with the SDK's own httpx2 client (the tests' default) and with
its aiohttp client, which the server uses (chat/runtime/build.py) and which reports a refused
connection, a DNS failure and a TLS failure all as "Request timed out".
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import ssl
import time

import httpx2
import openai
import pytest
import trustme

from chat.agent import Agent, ChatModel, ToolContext
from chat.agent.llm import ModelCallError
from chat.agent.turns import ModelRequest
from tests.fakellm import text_reply

from .helpers import run_events

KEY = "sk-test-Secret4242abcdefXYZ98765"
FAILED = {"type": "complete", "status": "failed"}


def client_for(base_url: str, transport: str, *, api_key: str = KEY) -> openai.AsyncOpenAI:
    # As the server makes its client: no per-read timeout, the call bounded by ChatModel.timeout.
    timeout = httpx2.Timeout(10, read=None)
    http_client = (
        openai.DefaultAioHttpClient(timeout=timeout)
        if transport == "aiohttp"
        else openai.DefaultAsyncHttpxClient(timeout=timeout)
    )
    return openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0, http_client=http_client)


@pytest.fixture(params=["httpx2", "aiohttp"])
async def make_model(request):
    clients = []

    def make(base_url: str, *, model: str = "fake-model", timeout: float | None = None) -> ChatModel:
        client = client_for(base_url, request.param)
        clients.append(client)
        return ChatModel(client=client, model=model, timeout=timeout)

    yield make
    for client in clients:
        await client.close()


async def failure_of(model: ChatModel) -> ModelCallError:
    with pytest.raises(ModelCallError) as failure:
        async for _ in model.stream(ModelRequest(messages=[{"role": "user", "content": "hi"}])):
            pass
    return failure.value


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


# --- transport failures ---------------------------------------------------------------


async def test_refused_connection_says_so_and_is_retryable(make_model):
    port = closed_port()
    error = await failure_of(make_model(f"http://127.0.0.1:{port}/v1"))
    assert error.detail == f"The model endpoint at 127.0.0.1:{port} refused the connection."
    assert error.retryable and error.status is None
    assert "ConnectionRefusedError" in error.log_detail


async def test_dns_failure_says_so(make_model):
    # .invalid never resolves (RFC 6761), with or without a network.
    error = await failure_of(make_model("http://agentsite-test.invalid/v1"))
    assert error.detail == (
        "The model endpoint's host name agentsite-test.invalid could not be resolved (DNS lookup failed)."
    )
    assert error.retryable


async def test_tls_failure_says_so(make_model):
    ca = trustme.CA()  # a CA the client does not trust
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)

    async def handle(reader, writer):
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_context)
    port = server.sockets[0].getsockname()[1]
    try:
        error = await failure_of(make_model(f"https://127.0.0.1:{port}/v1"))
    finally:
        server.close()
    assert error.detail.startswith(
        f"The TLS connection to the model endpoint at 127.0.0.1:{port} failed: certificate verify failed ("
    ), error.detail
    assert error.retryable


async def test_slow_response_headers_say_no_response_within_the_timeout(make_model):
    requests = []

    async def never_answer(reader, writer):
        requests.append(await reader.readline())
        await asyncio.sleep(30)

    server = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        error = await failure_of(make_model(f"http://127.0.0.1:{port}/v1", timeout=0.5))
    finally:
        server.close()
    assert requests and requests[0].startswith(b"POST /v1/chat/completions")
    assert error.detail == f"The model endpoint at 127.0.0.1:{port} sent no response within 0.5 s."
    assert error.retryable


async def test_slow_stream_says_the_model_did_not_finish(fake_llm, make_model):
    fake_llm.script(text_reply("words that come slowly", delay=2))
    error = await failure_of(make_model(fake_llm.base_url, timeout=0.5))
    assert error.detail == "The model did not finish within 0.5 s."


# --- HTTP statuses --------------------------------------------------------------------


async def test_wrong_key_fails_at_once_and_never_shows_the_key(fake_llm, make_model):
    # As OpenAI words it: part of the key, masked in the middle.
    fake_llm.script(
        {
            "status": 401,
            "body": {
                "error": {
                    "message": "Incorrect API key provided: sk-test-Secr************98765. You can find your key in the dashboard.",
                    "code": "invalid_api_key",
                }
            },
        }
    )
    error = await failure_of(make_model(fake_llm.base_url))
    assert error.detail == "The model endpoint rejected the API key (HTTP 401)."
    assert not error.retryable and error.status == 401
    assert "Incorrect API key provided" in error.log_detail
    for piece in ("Secr", "98765", "sk-test"):
        assert piece not in error.log_detail and piece not in error.detail


async def test_key_quoted_whole_by_the_endpoint_is_redacted(fake_llm, make_model):
    fake_llm.script({"status": 403, "body": {"error": {"message": f"key {KEY} may not use this model"}}})
    error = await failure_of(make_model(fake_llm.base_url))
    assert error.detail == "The model endpoint refused access with this API key (HTTP 403)."
    assert not error.retryable
    assert KEY not in error.log_detail and "Secret4242" not in error.log_detail
    assert "may not use this model" in error.log_detail


async def test_missing_model_names_the_model_and_the_host(fake_llm, make_model):
    fake_llm.script(
        {
            "status": 404,
            "body": {
                "error": {
                    "message": "The model `nope` does not exist or you do not have access to it.",
                    "code": "model_not_found",
                }
            },
        }
    )
    error = await failure_of(make_model(fake_llm.base_url, model="nope"))
    assert error.detail == f"Model 'nope' was not found at 127.0.0.1:{fake_llm.port} (HTTP 404)."
    assert not error.retryable and "AGENT_MODEL" in error.hint


async def test_wrong_base_url_path_is_not_called_a_missing_model(fake_llm, make_model):
    fake_llm.script({"status": 404, "body": {"detail": "Not Found"}})  # a server without that route
    error = await failure_of(make_model(fake_llm.base_url))
    assert error.detail == (
        f"The model endpoint at 127.0.0.1:{fake_llm.port} has no chat completions API at this address (HTTP 404)."
    )
    assert not error.retryable and "OPENAI_BASE_URL" in error.hint


@pytest.mark.parametrize(
    ("status", "message", "detail"),
    [
        (400, "invalid value for 'messages'", "The model endpoint rejected the request as invalid (HTTP 400)."),
        (
            400,
            "This model's maximum context length is 8192 tokens. However, your messages resulted in 9001 tokens.",
            "The conversation is too long for the model's context window (HTTP 400).",
        ),
        (422, "unprocessable", "The model endpoint could not process the request (HTTP 422)."),
        (402, "insufficient balance", "The model endpoint refused the request (HTTP 402)."),
    ],
)
async def test_errors_retrying_cannot_fix(fake_llm, make_model, status, message, detail):
    fake_llm.script({"status": status, "body": {"error": {"message": message}}})
    error = await failure_of(make_model(fake_llm.base_url))
    assert (error.detail, error.retryable, error.status) == (detail, False, status)
    assert error.log_detail == f"HTTP {status}: {message}"


@pytest.mark.parametrize(
    ("status", "detail"),
    [
        (408, "The model endpoint gave up waiting for the request (HTTP 408)."),
        (409, "The model endpoint reported a conflict (HTTP 409)."),
        (429, "The model endpoint is limiting requests (HTTP 429)."),
        (500, "The model endpoint failed with a server error (HTTP 500)."),
        (503, "The model endpoint failed with a server error (HTTP 503)."),
    ],
)
async def test_errors_worth_retrying(fake_llm, make_model, status, detail):
    fake_llm.script({"status": status, "body": {"error": {"message": "try later"}}})
    error = await failure_of(make_model(fake_llm.base_url))
    assert (error.detail, error.retryable, error.retry_after) == (detail, True, None)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "soon"}, None),
    ],
)
async def test_retry_after_is_read(fake_llm, make_model, headers, expected):
    fake_llm.script({"status": 429, "body": {"error": {"message": "slow down"}}, "headers": headers})
    error = await failure_of(make_model(fake_llm.base_url))
    assert error.retry_after == expected


async def test_retry_after_as_an_http_date(fake_llm, make_model):
    when = time.time() + 120
    fake_llm.script(
        {
            "status": 503,
            "body": {},
            "headers": {"retry-after": time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(when))},
        }
    )
    error = await failure_of(make_model(fake_llm.base_url))
    assert 100 < error.retry_after <= 121


# --- the loop: retried or not, Retry-After honoured, logged once -----------------------


def agent_for(fake_llm, **options) -> Agent:
    model = ChatModel(client=client_for(fake_llm.base_url, "httpx2"), model="fake-model")
    options.setdefault("retry_interval", 0)
    return Agent(model, **options)


async def test_a_wrong_key_is_one_error_then_failed_without_retries(fake_llm):
    fake_llm.script({"status": 401, "body": {"error": {"message": f"bad key {KEY}"}}})
    agent = agent_for(fake_llm)
    run = agent.stream("hi")
    events = await run_events(run)
    await agent.model.client.close()
    assert events == [
        {
            "type": "error",
            "code": "LLM_CALL_FAILED",
            "message": "The model endpoint rejected the API key (HTTP 401).",
            "detail": "The server's API key for the model endpoint is wrong or expired (OPENAI_API_KEY).",
        },
        FAILED,
    ]
    assert not re.search(r"\(\d+/\d+\)", events[0]["message"])
    assert len(fake_llm.requests) == 1
    assert run.result.status == "failed"


async def test_retry_after_is_honoured(fake_llm):
    fake_llm.script(
        {"status": 429, "body": {"error": {"message": "slow down"}}, "headers": {"retry-after": "1"}},
        text_reply("Done."),
    )
    agent = agent_for(fake_llm)
    started = time.monotonic()
    events = await run_events(agent.stream("hi"))
    waited = time.monotonic() - started
    await agent.model.client.close()
    assert events[0]["message"] == "The model call failed, retrying in 1 s (1/3)"
    assert events[-1] == {"type": "complete", "status": "succeeded"}
    assert waited >= 1, "the retry went out before the endpoint's Retry-After"


async def test_retry_after_is_capped(fake_llm):
    fake_llm.script(
        {"status": 503, "body": {}, "headers": {"retry-after": "3600"}},
        text_reply("Done."),
    )
    agent = agent_for(fake_llm, max_retry_after=0.2)
    events = await run_events(agent.stream("hi"))
    await agent.model.client.close()
    assert events[0]["message"] == "The model call failed, retrying in 0.2 s (1/3)"
    assert events[-1] == {"type": "complete", "status": "succeeded"}


async def test_the_retry_interval_is_the_least_wait(fake_llm):
    fake_llm.script({"status": 429, "body": {}, "headers": {"retry-after": "0"}}, text_reply("Done."))
    agent = agent_for(fake_llm, retry_interval=0.1)
    events = await run_events(agent.stream("hi"))
    await agent.model.client.close()
    assert events[0]["message"] == "The model call failed, retrying in 0.1 s (1/3)"


async def test_a_refused_endpoint_is_retried_and_named_in_every_error(fake_llm):
    port = closed_port()
    model = ChatModel(client=client_for(f"http://127.0.0.1:{port}/v1", "aiohttp"), model="m")
    run = Agent(model, retry_interval=0, max_retries=2).stream("hi")
    events = await run_events(run)
    await model.client.close()
    detail = f"The model endpoint at 127.0.0.1:{port} refused the connection."
    assert [(e.get("message"), e.get("detail")) for e in events] == [
        ("The model call failed, retrying in 0 s (1/2)", detail),
        ("The model call failed, retrying in 0 s (2/2)", detail),
        ("The model call failed; gave up after 2 retries.", detail),
        (None, None),
    ]
    assert "timed out" not in str(events).lower()


async def test_every_failed_call_is_logged_once_with_run_model_status_and_redacted_detail(fake_llm, caplog):
    fake_llm.script(
        {"status": 500, "body": {"error": {"message": f"upstream said {KEY}"}}},
        {"status": 401, "body": {"error": {"message": "Incorrect API key provided: sk-test-Secr****98765"}}},
    )
    agent = agent_for(fake_llm)
    with caplog.at_level(logging.WARNING, logger="chat.agent.loop"):
        await run_events(agent.stream("hi", context=ToolContext(run_id="run-123")))
    await agent.model.client.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "chat.agent.loop"]
    assert lines == [
        (
            "model call failed: run run-123, model fake-model, status 500, retrying in 0 s (1/3): "
            "HTTP 500: upstream said [redacted]"
        ),
        (
            "model call failed: run run-123, model fake-model, status 401, not retried: "
            "HTTP 401: Incorrect API key provided: [redacted]"
        ),
    ]
