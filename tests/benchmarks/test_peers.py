"""The peers of the benchmark (bench/peers/): Chainlit, with and without its data layer, streams
the fake model through its socket.io to bench/peers/chainlit_client.py whole, taking turns with
the relay, and docs/performance.md's peers table divides the project's figures by each peer's."""

from __future__ import annotations

import pytest

from bench import docs
from bench.peers import chainlit_stack
from bench.peers import measure as peers
from bench.server import FakeModel

from .test_docs import RUN


@pytest.fixture
def model():
    fake = FakeModel()
    yield fake
    fake.stop()


async def test_a_short_run_streams_every_peer_whole_in_turn(model):
    # Not skipped when missing: `make test` installs it (install-test -> peers), so its absence is a fault.
    assert chainlit_stack.installed(), "no .venv-chainlit: make peers installs it"
    sides = ("relay", "chainlit", "chainlit-data")
    result = await peers.measure(model, levels=[2], rounds=2, idle_sockets=3, idle_seconds=0.5, tokens=20, sides=sides)

    assert "error" not in result, result["error"]
    assert result["labels"]["chainlit-data"].startswith("Chainlit 2.12.0, its SQLAlchemy data layer")
    [level] = result["levels"]
    assert list(level["summary"]) == list(sides)
    for side, figures in level["summary"].items():
        assert figures["whole"] is True, (side, level["bursts"][side])
        assert 0 < figures["first_text_p50_ms"] <= figures["first_text_p95_ms"]
        assert figures["stretch"] > 0 and figures["server_cpu_per_1k_s"] > 0
        assert result["idle"][side]["sockets"] == 3 and result["idle"][side]["failed"] == 0
    # Chainlit's data layer kept each message of the run: a user's and its reply per stream at least.
    streams = peers.WARM_UP + 1 + 2 * 2
    assert result["persisted_steps"] >= 2 * streams


def _summary(p50: float, stretch: float, cpu: float, whole: bool = True) -> dict:
    return {
        "first_text_p50_ms": p50,
        "first_text_p95_ms": p50 * 2,
        "stretch": stretch,
        "server_cpu_per_1k_s": cpu,
        "whole": whole,
    }


def test_the_peers_table_gives_each_peer_with_the_project_over_it():
    labels = {
        "project": "sqlite+memory, 1x daphne",
        "relay": "reference: Channels relay, no persistence, 1x daphne",
        "chainlit-data": "Chainlit 2.12.0, its SQLAlchemy data layer on SQLite, signed in, 1 uvicorn",
    }
    level = {
        "C": 50,
        "summary": {
            "project": _summary(60.0, 1.1, 0.04),
            "relay": _summary(80.0, 1.2, 0.12),
            "chainlit-data": _summary(300.0, 2.2, 0.4, whole=False),
        },
    }
    idle = {
        "project": {"sockets": 200, "kib_per_socket": 20.0, "idle_cpu_pct": 0.1},
        "chainlit-data": {"sockets": 200, "kib_per_socket": 50.0, "idle_cpu_pct": 0.5},
    }
    source = docs.take({"run": RUN, "peers": {"labels": labels, "levels": [level], "idle": idle}})["peers"]

    table = docs.render("peers", source).splitlines()

    assert table[3] == "| C = 50 | project, SQLite + in-memory, 1 daphne | 60 / 120 ms | 1.10 | 0.040 s | yes |"
    assert (
        table[4]
        == "| C = 50 | relay, no persistence, 1 daphne | 80 / 160 ms (0.75x) | 1.20 (0.92x) | 0.120 s (0.33x) | yes |"
    )
    assert table[5] == (
        "| C = 50 | Chainlit 2.12.0, its SQLAlchemy data layer on SQLite, signed in, 1 uvicorn "
        "| 300 / 600 ms (0.20x) | 2.20 (0.50x) | 0.400 s (0.10x) | **no** |"
    )
    assert table[7].startswith("| server | KiB per idle socket (200 sockets; the project's over this) |")
    assert table[10] == (
        "| Chainlit 2.12.0, its SQLAlchemy data layer on SQLite, signed in, 1 uvicorn | 50.0 (0.40x) | 0.5% |"
    )
    assert docs.take({"run": RUN, "peers": {"error": "boom", "levels": []}}).get("peers") is None
