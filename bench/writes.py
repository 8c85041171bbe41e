"""5. Database writes: rows inserted (events, runs, tool records) per 1,000 tokens streamed.

Counted from the database after the runs, for two regimes: the full-speed relay
stream and the 100 tokens/s streams of the concurrency test. Each stored batch
also updates its conversation row (the seq counter): `row_writes` adds those.
"""

from __future__ import annotations


def measure(stack, conversations: list[str], *, tokens_expected: int) -> dict:
    counted = stack.seed(op="count", conversations=conversations)
    tokens = counted["tokens"] or 1
    inserted = counted["events"] + counted["runs"] + counted["tool_records"]
    batches = counted["events"]  # each batch here holds one event: the coalesced delta, or a lone event
    return {
        "tokens": counted["tokens"],
        "tokens_expected": tokens_expected,
        "events": counted["events"],
        "rows_per_1k_tokens": round(1000 * inserted / tokens, 1),
        "row_writes_per_1k_tokens": round(1000 * (inserted + batches + counted["runs"]) / tokens, 1),
    }
