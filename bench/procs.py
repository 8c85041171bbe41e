"""CPU time and memory of processes, read from /proc (Linux), so the suite needs no extra package."""

from __future__ import annotations

import os
import resource

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def self_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class CpuMeter:
    """CPU seconds used by named processes (and this client) between start() and stop()."""

    def __init__(self, pids: dict[str, int]):
        self.pids = pids
        self._start: dict[str, float] = {}
        self.used: dict[str, float] = {}

    def _read(self) -> dict[str, float]:
        values = {name: cpu_seconds(pid) for name, pid in self.pids.items()}
        values["client"] = self_cpu_seconds()
        return values

    def start(self) -> CpuMeter:
        self._start = self._read()
        return self

    def stop(self) -> dict[str, float]:
        end = self._read()
        self.used = {name: round(end[name] - self._start[name], 2) for name in end}
        return self.used


def raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
