"""CPU time and memory of processes, read from /proc (Linux), so the suite needs no extra package."""

from __future__ import annotations

import os
import resource
import subprocess

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


def rss_by_kind(pid: int) -> dict[str, int]:
    """Resident bytes of the process by kind of mapping (/proc/PID/smaps): `heap` is malloc's
    main heap (the [heap] mapping), `anon` every other private anonymous mapping (pymalloc's
    arenas, glibc's thread arenas, thread stacks, large allocations), `file` what is mapped
    from files (code and libraries). A growth of RSS shows in one of them."""
    kinds = {"heap": 0, "anon": 0, "file": 0}
    kind = "file"
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split(maxsplit=6)
            if "-" in head[0] and len(head) >= 5:  # a mapping's first line: range perms offset dev inode [path]
                path = head[5].strip() if len(head) > 5 else ""
                kind = "heap" if path == "[heap]" else ("file" if path.startswith("/") else "anon")
            elif head[0] == "Rss:":
                kinds[kind] += int(head[1]) * 1024
    return kinds


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


def server_cpu_per_1k(level: dict, tokens: int) -> float:
    """A level's server CPU (CpuMeter's `server*` entries, in its `cpu_s`) per 1,000 tokens of its
    C runs of `tokens` each."""
    server = sum(v for k, v in level["cpu_s"].items() if k.startswith("server"))
    return round(server / (level["C"] * tokens / 1000), 3)


def raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def stop_all(processes: list[subprocess.Popen]) -> None:
    """SIGTERM to every one at once (as systemd stops a service), then a wait of 10 s each before a
    SIGKILL."""
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
