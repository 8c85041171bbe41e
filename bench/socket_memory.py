"""`python -m bench.socket_memory`: where an idle socket's memory goes.

One daphne (SQLite + the in-memory layer) runs under tracemalloc, started by this module
(`--serve`: SIGUSR1 writes a snapshot, the first one starting the trace). The bench
opens SOCKETS idle, authenticated sockets on conversations of their own and holds them; the
snapshots before and after are compared by the line that allocated, and the lines that grew
most are printed as bytes per socket, beside the RSS the process gained per socket. What the
tracer sees is Python's heap; the rest of RSS (the allocator's slack, C buffers) is the gap
between its total and the RSS figure. `--relay` measures the reference relay's sockets
(bench/reference_relay.py) the same way, to compare line by line with the project's.

python -m bench.socket_memory                  # 500 sockets
python -m bench.socket_memory --sockets 2000 --top 40
python -m bench.socket_memory --relay          # the relay's
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
import tracemalloc
from pathlib import Path

from daphne.cli import CommandLineInterface

from serving.serve import ServeCommand

from . import clients, reference
from .pool import Pool
from .procs import raise_fd_limit, rss_bytes
from .reference import RELAY_APP, RelayStack
from .server import FakeModel, Stack

FRAMES = 12
PROJECT_APP = "agentsite.asgi:application"


class TracedRelay(RelayStack):
    """The reference relay (bench/reference_relay.py) served by the traced daphne, for `--relay`."""

    def _command(self, port: int) -> list[str]:
        return [sys.executable, "-m", "bench.socket_memory", "--serve", str(port), self._tmp, RELAY_APP]


def serve(port: str, directory: str, app: str = PROJECT_APP) -> None:
    """The traced daphne: a snapshot to <directory>/snapshot-<n>.bin at each SIGUSR1.

    Tracing starts at the first snapshot, not before the application loads: only what is
    allocated between two snapshots is compared, and start-up under tracing (imports, the
    system check) took over 4 minutes on a busy 2-core machine, past the bench's wait."""
    taken = [0]

    def dump(signum, frame) -> None:
        if not tracemalloc.is_tracing():
            tracemalloc.start(FRAMES)
        taken[0] += 1
        path = Path(directory) / f"snapshot-{taken[0]}.bin"
        tracemalloc.take_snapshot().dump(str(path) + ".part")
        os.replace(str(path) + ".part", path)

    signal.signal(signal.SIGUSR1, dump)
    # Tracing slows every allocation several times: a handshake may take longer than daphne's 5 s
    # connect timeout, which would drop it without an HTTP answer.
    sys.argv = ["daphne", "-b", "127.0.0.1", "-p", port, "-v", "0", "--websocket_connect_timeout", "120"]
    sys.argv.append(app)
    # The project as it is served (serving/serve.py), the relay on daphne as it comes.
    (ServeCommand if app == PROJECT_APP else CommandLineInterface).entrypoint()


async def _snapshot(stack: Stack | RelayStack, n: int) -> tracemalloc.Snapshot:
    os.kill(stack.pids[0], signal.SIGUSR1)
    path = Path(stack._tmp) / f"snapshot-{n}.bin"
    deadline = time.monotonic() + 120
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError("the traced server wrote no snapshot")
        await asyncio.sleep(0.2)
    return tracemalloc.Snapshot.load(str(path))


def _where(trace: tracemalloc.StatisticDiff) -> str:
    """The allocating frame in this project if there is one (what we can change), else the innermost."""
    frames = list(trace.traceback)
    ours = [f for f in frames if "/chat/" in f.filename or "/agentsite/" in f.filename]
    frame = ours[-1] if ours else frames[-1]
    inner = frames[-1]
    name = lambda f: f"{f.filename.split('site-packages/')[-1].split('/work/main/')[-1]}:{f.lineno}"  # noqa: E731
    return name(frame) if frame is inner else f"{name(frame)} -> {name(inner)}"


async def measure(stack: Stack | RelayStack, pool: Pool, sockets: int, top: int) -> None:
    warm = [(await clients.connect(stack.base(), c, s))[0] for s, c in pool.take(20)]
    await clients.close_all(warm)
    await asyncio.sleep(1)
    before, rss_before = await _snapshot(stack, 1), rss_bytes(stack.pids[0])
    held = []
    gate = asyncio.Semaphore(10)

    async def one(session, conversation):
        async with gate:
            held.append((await clients.connect(stack.base(), conversation, session))[0])

    await asyncio.gather(*(one(s, c) for s, c in pool.take(sockets)))
    await asyncio.sleep(2)
    rss_after = rss_bytes(stack.pids[0])
    after = await _snapshot(stack, 2)
    await clients.close_all(held)
    filters = [
        tracemalloc.Filter(False, tracemalloc.__file__),
        tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
    ]
    diffs = after.filter_traces(filters).compare_to(before.filter_traces(filters), "traceback")
    grown = sum(d.size_diff for d in diffs)
    print(f"{len(held)} idle sockets: RSS +{(rss_after - rss_before) / len(held) / 1024:.1f} KiB each,")
    print(f"Python heap +{grown / len(held) / 1024:.1f} KiB each (tracemalloc); the lines that grew most:")
    by_line: dict[str, int] = {}
    for diff in diffs:
        key = _where(diff)
        by_line[key] = by_line.get(key, 0) + diff.size_diff
    for key, size in sorted(by_line.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {size / len(held):8.0f} B/socket  {key}")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve(*sys.argv[2:5])
        return 0
    parser = argparse.ArgumentParser(prog="python -m bench.socket_memory", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sockets", type=int, default=500)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--relay", action="store_true", help="the reference relay's sockets instead of the project's")
    args = parser.parse_args()
    raise_fd_limit()
    model = FakeModel()
    stack: Stack | TracedRelay
    if args.relay:
        stack = TracedRelay()
    else:
        stack = Stack(name="socket-memory", server="daphne-traced")
    try:
        stack.start(model)
        if isinstance(stack, TracedRelay):
            pool = reference.pool(args.sockets + 20)
        else:
            pool = Pool(stack.seed(op="users", count=100, conversations=-(-(args.sockets + 20) // 100)))
        asyncio.run(measure(stack, pool, args.sockets, args.top))
    finally:
        stack.stop()
        model.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
