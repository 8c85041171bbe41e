"""What a run's figures need beside them: the command, the commit, the date and the machine's load.

The machine is shared: a figure measured while other work kept the cores busy is not the figure
of a quiet machine. So every results file says how busy the machine was, from /proc: the load
average before and after, and the CPU seconds that processes other than the bench's own (this
process and its descendants: the servers, the fake model, the seeding) used during the run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .procs import TICK

ROOT = Path(__file__).resolve().parent.parent
# /proc/stat's cpu line: user nice system idle iowait irq softirq steal ...; busy is all but idle and iowait.
_IDLE_FIELDS = (3, 4)


def machine_busy_seconds() -> float:
    """CPU seconds every core of the machine has spent busy since boot."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:9]]
    return sum(v for i, v in enumerate(values) if i not in _IDLE_FIELDS) / TICK


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:  # gone meanwhile
        return None


def tree_cpu_seconds(root: int | None = None) -> float:
    """CPU seconds of a process and of all its descendants, living or waited for (the children's
    cutime and cstime hold the CPU of the descendants that ended and were waited for)."""
    root = os.getpid() if root is None else root
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat_fields(int(entry))) is not None:
            stats[int(entry)] = fields
    children: dict[int, list[int]] = {}
    for pid, fields in stats.items():
        children.setdefault(int(fields[1]), []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            fields = stats[pid]
            total += sum(int(v) for v in fields[11:15]) / TICK  # utime stime cutime cstime
        todo += children.get(pid, [])
    return total


def commit() -> str:
    """The checkout's short commit, with `+` when its tracked files have changes."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=ROOT).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+" if dirty else "")


@dataclass
class RunInfo:
    """Started before a run's first measurement, finished after its last: `finish()` is the `run`
    entry of the results file."""

    command: str = field(default_factory=lambda: " ".join(["python -m " + _module()] + sys.argv[1:]))
    _started: float = 0.0
    _wall: float = 0.0
    _busy: float = 0.0
    _own: float = 0.0
    _load: float = 0.0

    def start(self) -> RunInfo:
        self._load = os.getloadavg()[0]
        self._started, self._wall = time.time(), time.monotonic()
        self._busy, self._own = machine_busy_seconds(), tree_cpu_seconds()
        return self

    def finish(self) -> dict:
        busy, own = machine_busy_seconds() - self._busy, tree_cpu_seconds() - self._own
        wall = time.monotonic() - self._wall
        others = max(0.0, busy - own)
        return {
            "command": self.command,
            "commit": commit(),
            "started": time.strftime("%Y-%m-%d %H:%M", time.localtime(self._started)),
            "elapsed_s": round(wall, 1),
            "load": {
                "cpus": os.cpu_count(),
                "loadavg_before": round(self._load, 2),
                "loadavg_after": round(os.getloadavg()[0], 2),
                "bench_cpu_s": round(own, 1),
                "others_cpu_s": round(others, 1),
                # Cores the rest of the machine kept busy, on average over the run.
                "others_cores": round(others / wall, 2) if wall else 0.0,
            },
        }


def _module() -> str:
    """The module run as `python -m <module>` (`bench`, `bench.soak`, ...)."""
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    name = spec.name if spec is not None else "bench"
    return name.removesuffix(".__main__")
