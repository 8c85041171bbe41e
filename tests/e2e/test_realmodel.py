"""The product end to end against a real model server: llama-cpp-python's, serving SmolLM2-135M.

One daphne (real WebSocket clients, SQLite) in front of two llama_cpp.server processes on free
loopback ports: one as it starts by default (a new request interrupts the stream in progress)
and one started with `--interrupt_requests False`. Agent profiles point the conversations at
either, with the model options each test needs. Answers are greedy (temperature 0), so a run
gives the same text every time; the assertions hold for any text the model may write.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest

from tests.realmodel import MODEL, N_CTX, VERSION, LlamaServer

from .harness import ROOT, Client, assert_contiguous, events_only, run_text

pytestmark = [pytest.mark.realmodel, pytest.mark.timeout(600)]

PROFILES = {
    # slug: (server, fields)
    "smol": ("interrupting", {"max_tokens": 48}),
    "smol-tools": ("interrupting", {"max_tokens": 48, "tools": ["calculator"], "tool_choice": "calculator"}),
    "smol-short": ("interrupting", {"max_tokens": 6}),
    "smol-long": ("interrupting", {"max_tokens": 160}),
    "smol-long-steady": ("steady", {"max_tokens": 160}),
}


@pytest.fixture(scope="module")
def llama_servers(log_dir):
    started = time.monotonic()
    servers = {
        "interrupting": LlamaServer(interrupt_requests=True, log_path=log_dir / "llama-interrupting.log"),
        "steady": LlamaServer(interrupt_requests=False, log_path=log_dir / "llama-steady.log"),
    }
    try:
        for server in servers.values():
            server.start()
        print(
            f"\nllama-cpp-python {VERSION} serving {MODEL} (SmolLM2-135M-Instruct Q4_1, n_ctx {N_CTX}): "
            f"both servers up in {time.monotonic() - started:.1f} s"
        )
        yield servers
    finally:
        for server in servers.values():
            server.stop()


def _shell(server, code: str) -> None:
    subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=server.env, check=True, timeout=120
    )


@pytest.fixture(scope="module")
def site(databases, make_server, llama_servers):
    """The daphne, its profiles made, and a staff user (the run traces) signed up."""
    server = make_server(
        databases.new(),
        name="realmodel",
        OPENAI_BASE_URL=llama_servers["interrupting"].base_url,
        AGENT_MODEL=MODEL,
        AGENT_TEMPERATURE="0",
        AGENT_MAX_TOKENS="48",
        AGENT_TOOLS="calculator",
        AGENT_LLM_TIMEOUT="300",
    )
    rows = [
        dict(
            slug=slug,
            name=slug,
            model=MODEL,
            base_url=llama_servers[which].base_url,
            temperature=0,
            everyone=True,
            **fields,
        )
        for slug, (which, fields) in PROFILES.items()
    ]
    _shell(server, f"from chat.models import AgentProfile\nfor row in {rows!r}: AgentProfile.objects.create(**row)")
    return server


@pytest.fixture
async def staff(site):
    client = await Client(site).signup()
    _shell(
        site,
        f"from django.contrib.auth.models import User; User.objects.filter(username={client.username!r}).update(is_staff=True)",
    )
    yield client
    await client.aclose()


async def conversation(client: Client, agent: str) -> str:
    r = await client.api("POST", "/api/conversations/", json_body={"title": agent, "agent": agent})
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def ask(client: Client, conversation_id: str, message: str, *, timeout: float = 300) -> list[dict]:
    """One run over a real socket: its event frames as they arrived live."""
    sock = await client.socket(conversation_id)
    try:
        _, synced = await sock.sync()
        await sock.message(message)
        frames = await sock.until_complete(timeout=timeout)
    finally:
        await sock.close()
    return [f for f in events_only(frames) if f["seq"] > synced.get("lastSeq", 0)]


async def trace(client: Client, run_id: str) -> dict:
    r = await client.api("GET", f"/api/runs/{run_id}/trace/")
    assert r.status_code == 200, r.text
    return r.json()


def errors(events: list[dict]) -> list[dict]:
    return [e for e in events if e["type"] == "error"]


async def test_a_plain_answer_streams_and_replays_exactly(site, staff):
    conversation_id = await conversation(staff, "smol")
    started = time.monotonic()
    live = await ask(staff, conversation_id, "What is the capital of France? Answer in one sentence.")
    took = time.monotonic() - started
    assert [e["type"] for e in live][0] == "user_message"
    assert live[-1]["type"] == "complete" and live[-1]["status"] == "succeeded", live[-3:]
    assert not errors(live)
    text = run_text(live)
    assert text.strip(), "the model answered nothing"
    assert len([e for e in live if e["type"] == "text"]) >= 1

    # A new socket replays the same frames, byte for byte, and the events API agrees.
    sock = await staff.socket(conversation_id, after=0)
    replayed, _ = await sock.sync()
    await sock.close()
    assert replayed == live
    stored = await staff.events(conversation_id)
    assert_contiguous(stored)
    assert stored == live

    [call] = (await trace(staff, live[0]["runId"]))["modelCalls"]
    assert call["finishReason"] in ("stop", "length") and call["error"] is None
    assert call["completionTokens"] == 0  # llama-cpp-python streams no usage, even when asked
    print(f"\nplain answer: {len(text)} characters in {took:.2f} s, first token {call['firstTokenMs']} ms: {text!r}")


async def test_a_named_tool_choice_calls_the_tool_and_the_next_turn_still_works(site, staff):
    conversation_id = await conversation(staff, "smol-tools")
    first = await ask(staff, conversation_id, "What is 6*7? Use the calculator.")
    starts = [e for e in first if e["type"] == "tool_start"]
    ends = [e for e in first if e["type"] == "tool_end"]
    assert [e["toolName"] for e in starts] == ["calculator"] and len(ends) == 1, first
    assert first[-1]["status"] == "succeeded" and not errors(first), first[-4:]

    # The next message's memory holds that tool round: llama-cpp-python refused it (content null)
    # with HTTP 500 on every call, forever.
    second = await ask(staff, conversation_id, "Thank you. Now say hello.")
    assert second[-1]["status"] == "succeeded" and not errors(second), second[-4:]
    calls = (await trace(staff, second[0]["runId"]))["modelCalls"]
    assert [c["error"] for c in calls] == [None] * len(calls)
    assert calls[0]["finishReason"] == "tool_calls"  # the named choice forces each run's first call
    assert calls[-1]["finishReason"] in ("stop", "length")
    print(f"\ntool round: {ends[0]['result']!r}, then {run_text(first)!r}; next turn: {run_text(second)!r}")


@pytest.mark.parametrize(("agent", "interrupts"), [("smol-long", True), ("smol-long-steady", False)])
async def test_two_conversations_streaming_at_once(site, staff, agent, interrupts):
    prompts = ["Write a short story about a dragon.", "Write a short poem about the sea."]
    ids = [await conversation(staff, agent) for _ in prompts]
    runs = await asyncio.gather(*(ask(staff, i, p) for i, p in zip(ids, prompts, strict=True)))
    reasons = []
    for events in runs:
        assert events[-1]["status"] == "succeeded" and not errors(events), events[-3:]
        [call] = (await trace(staff, events[0]["runId"]))["modelCalls"]
        reasons.append(call["finishReason"])
    if interrupts:
        # The server ended the first stream with a bare [DONE] when the second request came:
        # the trace says no reason came, not the "stop" the server never sent.
        assert None in reasons, reasons
    else:
        assert all(r in ("stop", "length") for r in reasons), reasons
    print(f"\ntwo at once, interrupt_requests={interrupts}: finish reasons {reasons}, "
          f"{[len(run_text(e)) for e in runs]} characters")  # fmt: skip


async def test_cancel_mid_stream(site, staff):
    conversation_id = await conversation(staff, "smol-long-steady")
    sock = await staff.socket(conversation_id)
    await sock.sync()
    await sock.message("Write a long story about a dragon and a knight.")
    await sock.until(lambda f: f.get("type") == "text", timeout=300)
    await sock.send({"type": "cancel"})
    frames = events_only(await sock.until_complete(timeout=120))
    await sock.close()
    assert frames[-1]["status"] == "cancelled"
    assert [e["code"] for e in errors(frames)] == ["CANCELLED"]
    # The server is free again: the next message is answered.
    after = await ask(staff, conversation_id, "Say hello.")
    assert after[-1]["status"] == "succeeded" and not errors(after)


async def test_the_token_limit_reached_says_so(site, staff):
    conversation_id = await conversation(staff, "smol-short")
    live = await ask(staff, conversation_id, "Why is the sky blue?")
    assert live[-1]["status"] == "succeeded"
    assert live[-1]["finishReason"] == "length"
    [call] = (await trace(staff, live[0]["runId"]))["modelCalls"]
    assert call["finishReason"] == "length"
    print(f"\ntoken limit (max_tokens 6): {run_text(live)!r}")


async def test_a_prompt_over_the_context_window_is_one_clear_error(site, staff):
    conversation_id = await conversation(staff, "smol")
    live = await ask(staff, conversation_id, "sky " * (N_CTX + 100))
    assert live[-1]["status"] == "failed"
    [error] = errors(live)  # not retried: the same request fails the same way
    assert error["message"].startswith("The model endpoint answered with an empty response"), error
    assert len((await trace(staff, live[0]["runId"]))["modelCalls"]) == 1
