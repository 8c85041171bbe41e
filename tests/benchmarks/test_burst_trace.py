"""bench/burst_trace.py's waits at BEGIN: counted per kind of thread inside the burst only."""

from __future__ import annotations

from bench.burst_trace import _begin_waits


def test_waits_at_begin_are_told_per_kind_of_thread_within_the_burst():
    begins = [
        {"thread": "event-writer_0", "began": 10.000, "ended": 10.0005},
        {"thread": "event-writer_0", "began": 10.010, "ended": 10.0335},
        {"thread": "ThreadPoolExecutor-0_0", "began": 10.020, "ended": 10.0202},
        {"thread": "event-writer_0", "began": 9.0, "ended": 9.5},  # before the burst's first send
        {"thread": "ThreadPoolExecutor-0_0", "began": 12.0, "ended": 12.4},  # after its last first text
    ]

    told = _begin_waits(begins, first_sent=10.0, last_text=11.0)

    assert told == "other threads 1, 0 over 1 ms, longest 0.2 ms; writer 2, 1 over 1 ms, longest 23.5 ms"
