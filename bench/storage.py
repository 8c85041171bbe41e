"""Storage per token: rows and bytes the event log takes for 1,000 tokens streamed at 100 tokens/s.

`python -m bench.storage` starts a fresh SQLite + daphne stack, streams RUNS runs of
TOKENS tokens at RATE tokens/s (all at once) and reads back what they stored:
event rows per 1,000 tokens, and the bytes the event table and its indexes use
against the bytes of the text itself. The bench model's tokens are ~20 bytes
("<i>@<time> "); a real model's are ~4, so the fixed cost per row also gives the
ratio for 4-byte tokens. Options: --flush-ms / --max-flush-ms as the server's
AGENT_STREAM_FLUSH_MS / AGENT_STREAM_FLUSH_MAX_MS (the server's defaults without them).
"""

from __future__ import annotations

import argparse
import asyncio
import json

from . import concurrency
from .pool import Pool
from .procs import raise_fd_limit
from .server import FakeModel, Stack

RUNS = 10
TOKENS = 1000
RATE = 100
REAL_TOKEN_BYTES = 4


def figures(counted: dict) -> dict:
    tokens = counted["tokens"] or 1
    stored = counted["table_bytes"] + sum(counted["index_bytes"].values())
    per_row = (stored - counted["text_bytes"]) / (counted["events"] or 1)  # all but the text itself
    rows_per_1k = 1000 * counted["events"] / tokens
    real_text = 1000 * REAL_TOKEN_BYTES
    return {
        "tokens": counted["tokens"],
        "event_rows_per_1k_tokens": round(rows_per_1k, 1),
        "text_event_rows_per_1k_tokens": round(1000 * counted["text_events"] / tokens, 1),
        "bytes_per_1k_tokens": round(1000 * stored / tokens),
        "text_bytes_per_1k_tokens": round(1000 * counted["text_bytes"] / tokens),
        "bytes_over_text": round(stored / (counted["text_bytes"] or 1), 2),
        "bytes_per_row_besides_text": round(per_row),
        "index_bytes_per_row": {
            name: round(size / (counted["events"] or 1)) for name, size in counted["index_bytes"].items()
        },
        # The same rows holding 4-byte tokens: the fixed cost per row stays, the text shrinks.
        "bytes_over_text_4b_tokens": round((real_text + rows_per_1k * per_row) / real_text, 2),
    }


async def measure(*, runs: int = RUNS, tokens: int = TOKENS, rate: float = RATE, **stack_options) -> dict:
    model = FakeModel()
    stack = Stack(name="storage", **stack_options)
    try:
        stack.start(model)
        pool = Pool(stack.seed(op="users", count=runs, conversations=1))
        result = await concurrency.level(stack, model, pool, runs, tokens=tokens, rate=rate)
        if result["ok"] != runs:
            raise RuntimeError(f"runs went wrong: {result['problems']}")
        counted = stack.seed(op="storage", conversations=result["conversations"])
    finally:
        stack.stop()
        model.stop()
    return {"runs": runs, "tokens_each": tokens, "rate": rate} | figures(counted)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.storage", description=__doc__)
    parser.add_argument("--flush-ms", type=int, default=None)
    parser.add_argument("--max-flush-ms", type=int, default=None)
    parser.add_argument("--runs", type=int, default=RUNS)
    args = parser.parse_args()
    raise_fd_limit()
    result = asyncio.run(measure(runs=args.runs, flush_ms=args.flush_ms, max_flush_ms=args.max_flush_ms))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
