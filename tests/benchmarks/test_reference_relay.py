"""The reference relay of the benchmarks (bench/reference_relay.py) forwards the model's stream
as PROTOCOL-shaped frames that bench/clients.py accepts, and the report divides by it."""

from __future__ import annotations

import json
import time

import openai
import pytest
from channels.testing import WebsocketCommunicator

from bench import clients, reference_relay, report


@pytest.fixture
def relay_model(fake_llm, monkeypatch):
    client = openai.AsyncOpenAI(base_url=fake_llm.base_url, api_key="x", max_retries=0)
    monkeypatch.setattr(reference_relay, "_client", client)
    yield fake_llm


async def _read_run(comm) -> clients.Stream:
    stream = clients.Stream(tokens=3, sent_at=time.time())
    while True:
        frame = json.loads(await comm.receive_from(timeout=10))
        stream.frames.append((time.time(), frame))
        if frame["type"] in ("complete", "error"):
            return stream


async def test_relay_forwards_each_delta_with_a_contiguous_seq(relay_model):
    relay_model.script(
        {
            "chunks": [
                {"delta": {"content": "0@1.0 "}},
                {"delta": {"content": "1@1.1 "}},
                {"delta": {"content": "2@1.2 "}},
                {"delta": {}, "finish_reason": "stop"},
            ]
        }
    )
    comm = WebsocketCommunicator(reference_relay.application, "/ws/chat/any/?after=0")
    connected, _ = await comm.connect()
    assert connected
    assert json.loads(await comm.receive_from()) == {"type": "sync", "lastSeq": 0}
    await comm.send_to(text_data=json.dumps({"type": "message", "content": clients.order(3, 0)}))
    stream = await _read_run(comm)
    await comm.disconnect()
    assert [f["type"] for _, f in stream.frames] == ["user_message", "text", "text", "text", "complete"]
    assert clients.check(stream, after_seq=0) == ""  # what the benchmark checks of the project's streams
    assert relay_model.requests[0]["messages"] == [{"role": "user", "content": clients.order(3, 0)}]


async def test_relay_reports_a_model_error_without_a_seq(relay_model):
    relay_model.script({"status": 500, "body": {"error": {"message": "down"}}})
    comm = WebsocketCommunicator(reference_relay.application, "/ws/chat/any/")
    await comm.connect()
    await comm.receive_from()
    await comm.send_to(text_data=json.dumps({"type": "message", "content": "hello"}))
    stream = await _read_run(comm)
    await comm.disconnect()
    # An error without a seq: bench/clients.run counts the stream as a problem, not as whole.
    assert [f["type"] for _, f in stream.frames] == ["user_message", "error"]
    assert "seq" not in stream.frames[-1][1] and stream.frames[-1][1]["code"] == "model_error"


def _level(c: int, stretch: float, p95: float, cpu: float) -> dict:
    return {
        "C": c,
        "stretch": stretch,
        "first_text_ms": {"p50": p95 / 2, "p95": p95},
        "cpu_s": {"server0": cpu},
        "ok": c - 1,
    }


def test_reference_summary_divides_the_project_by_the_relay():
    first = {"runs": 10, "first_text_ms": {"p50": 30.0, "p95": 40.0}, "model_first_token_ms": {"p50": 20, "p95": 25}}
    results = {
        "stacks": [
            {
                "label": "sqlite+memory, 1x daphne",
                "first_text": {**first, "first_text_ms": {"p50": 60.0, "p95": 80.0}},
                "concurrency": {"tokens": 300, "levels": [_level(200, 1.84, 900.0, 4.0)]},
            }
        ],
        "reference": {
            "label": "reference relay",
            "first_text": first,
            "concurrency": {"tokens": 300, "levels": [_level(200, 5.63, 3000.0, 16.0)]},
        },
    }
    text = report.reference_summary(results)
    row = next(line for line in text.splitlines() if line.startswith("| sqlite"))
    # first text 60/30, stretch 1.84/5.63, p95 900/3000, CPU per 1k tokens (4/60)/(16/60)
    assert row == "| sqlite+memory, 1x daphne | 2.00x | 0.33x | 0.30x | 0.25x |"
    relay = next(line for line in text.splitlines() if line.startswith("| reference relay"))
    assert "5.63 (199/200 whole)" in relay
