"""Running a shell command confined: bubblewrap namespaces plus kernel resource limits.

What one command gets (see `bwrap_arguments`):

- its own user, PID, network, IPC, UTS and cgroup namespaces (`bwrap --unshare-*`):
  it sees only its own processes, and its network is a private loopback with no
  route out (neither the internet nor the host's 127.0.0.1 services);
- a filesystem made of: /usr read-only (with the /bin, /lib... symlinks), a few
  harmless /etc files (dynamic loader cache, passwd/group, localtime), a fresh
  /proc and a minimal /dev, a private in-memory /tmp of at most AGENT_BASH_TMP_MB
  (bwrap `--size`), and the conversation's workspace read-write at /workspace,
  its working directory. Nothing else of the host is
  there: not the project, its database, /home, /root, /etc/shadow or other workspaces;
- an environment of PATH, HOME, LANG, TMPDIR only (bwrap itself starts with an
  empty one, so no API key, SECRET_KEY or DATABASE_URL can leak);
- limits set by `prlimit` before bwrap starts: CPU seconds (RLIMIT_CPU, per
  process), address space (RLIMIT_AS), largest file written (RLIMIT_FSIZE),
  number of processes (RLIMIT_NPROC), open files, no core dumps;
- a wall-clock timeout after which the whole process group is killed; bwrap's
  `--die-with-parent` then kills the sandbox's PID 1, and the kernel kills every
  process left in that PID namespace;
- the workspace quota (AGENT_WORKSPACE_MAX_BYTES, shared with write_file). An
  unprivileged process cannot mount a size-limited workspace that persists, so the
  quota is kept in three steps: RLIMIT_FSIZE is lowered to what the quota leaves
  (no single file can pass it), the workspace is measured every 0.1 s (less often
  when measuring takes longer) while the command runs and the command is killed as
  soon as the total passes the quota (it can overshoot by what it writes between two
  measurements), and a workspace found full or over its quota before a command
  starts gets RLIMIT_FSIZE 0: no file can grow, only commands that free space work.

RLIMIT_NPROC counts processes per real user id on the whole host and is not
enforced for root, so a server running as root starts the sandbox as the
unprivileged AGENT_BASH_UID (default 65534, "nobody"), to whom the workspace is
handed over first; a server running as another user runs it as itself, and the
limit is set to that user's current task count plus AGENT_BASH_MAX_PROCESSES.

When bubblewrap is missing or cannot create its namespaces (some container
runtimes forbid user namespaces), `SandboxUnavailable` is raised: the bash tool
refuses instead of running the command unconfined.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from chat.agent.tools import ToolError
from chat.tools.confine import WORKSPACE_MAX_BYTES, tree_size, walk

# How often, at least, a running command's workspace is measured against its quota.
QUOTA_POLL_SECONDS = 0.1


class SandboxUnavailable(ToolError):
    """The sandbox cannot be set up on this machine; the command was not run."""


@dataclass(frozen=True)
class Limits:
    """The bash tool's settings (AGENT_BASH_*, AGENT_WORKSPACE_MAX_BYTES), defaults here only."""

    timeout: float = 30.0
    cpu_seconds: int = 30
    memory_mb: int = 512
    file_size_mb: int = 64
    max_processes: int = 64
    max_output_chars: int = 16_000
    open_files: int = 256
    sandbox_uid: int = 65534
    tmp_mb: int = 64  # 0: no size of its own for /tmp (the kernel's default, half the RAM)
    workspace_max_bytes: int = WORKSPACE_MAX_BYTES


@dataclass(frozen=True)
class Outcome:
    output: str
    exit_code: int | None
    timed_out: bool
    omitted_bytes: int
    file_limit_bytes: int = 0  # RLIMIT_FSIZE the command ran with
    quota_killed: bool = False  # killed because the workspace passed its quota
    workspace_bytes: int | None = 0  # the workspace's size afterwards; None: nested too deep to count


_SANDBOX_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/workspace", "LANG": "C.UTF-8", "TMPDIR": "/tmp"}
_ETC_FILES = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "localtime",
    "passwd",
    "group",
    "nsswitch.conf",
)


def bwrap_arguments(workspace_fd: int, command: str, *, tmp_mb: int = 0) -> list[str]:
    args = [
        "--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
        "--disable-userns", "--die-with-parent", "--new-session", "--hostname", "sandbox",
        "--uid", "65534", "--gid", "65534", "--clearenv",
        "--ro-bind", "/usr", "/usr",
    ]  # fmt: skip
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = Path("/") / top
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), f"/{top}"]
        elif host.is_dir():
            args += ["--ro-bind", str(host), f"/{top}"]
    for name in _ETC_FILES:
        if (Path("/etc") / name).exists():
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    args += ["--proc", "/proc", "--dev", "/dev"]
    if tmp_mb > 0:
        args += ["--size", str(tmp_mb * 1024 * 1024)]
    args += ["--tmpfs", "/tmp"]
    args += ["--bind-fd", str(workspace_fd), "/workspace", "--chdir", "/workspace"]
    for key, value in _SANDBOX_ENV.items():
        args += ["--setenv", key, value]
    return [*args, "/bin/bash", "--noprofile", "--norc", "-c", command]


def _tasks_of(uid: int) -> int:
    """Processes and threads owned by a real uid: what RLIMIT_NPROC counts."""
    count = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status") as status:
                fields = dict(line.split(":", 1) for line in status if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                count += int(fields["Threads"])
        except (OSError, KeyError, ValueError):
            continue
    return count


def _hand_over(workspace: Path, uid: int) -> None:
    """Give the workspace to the sandbox user (the server, root, can still read and write it).
    Folders past MAX_DEPTH are left alone: only the sandbox itself can have made them."""
    os.chown(workspace, uid, uid, follow_symlinks=False)
    top = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for _folder, dir_fd, listing in walk(top):
            for name, info in listing:
                if info.st_uid == uid and info.st_gid == uid:
                    continue
                try:
                    os.chown(name, uid, uid, dir_fd=dir_fd, follow_symlinks=False)
                except OSError:
                    pass
    finally:
        os.close(top)


def _usage(workspace: Path) -> int | None:
    """The workspace's size in bytes, or None when it is nested too deep to count (over any quota)."""
    try:
        return tree_size(workspace)
    except ToolError:
        return None


def _check_reachable(workspace: Path, uid: int) -> None:
    """bwrap, started as the sandbox user, must be able to walk down to the workspace."""
    for parent in Path(os.path.realpath(workspace)).parents:
        info = parent.stat()
        if not (info.st_mode & 0o001 or (info.st_uid == uid and info.st_mode & 0o100)):
            raise SandboxUnavailable(
                f"the bash tool cannot run: the sandbox user (uid {uid}) cannot enter {parent}, a parent of the "
                "workspace; make the folders above AGENT_WORKSPACE_ROOT traversable (chmod o+x)"
            )


def _limit_arguments(limits: Limits, uid: int, file_bytes: int) -> list[str]:
    mb = 1024 * 1024
    # bwrap and its PID 1 are two processes of the budget; each sandbox adds its own on top of
    # what the user already runs.
    nproc = _tasks_of(uid) + limits.max_processes + 2
    return [
        f"--cpu={limits.cpu_seconds}:{limits.cpu_seconds + 1}",  # SIGXCPU first, SIGKILL a second later
        f"--as={limits.memory_mb * mb}",
        f"--fsize={file_bytes}",
        f"--nproc={nproc}",
        f"--nofile={limits.open_files}",
        "--core=0",
    ]


def _tools() -> tuple[str, str]:
    bwrap, prlimit = shutil.which("bwrap"), shutil.which("prlimit")
    if not bwrap:
        raise SandboxUnavailable(
            "the bash tool is disabled: bubblewrap (bwrap) is not installed on this server, "
            "and commands are never run without a sandbox"
        )
    if not prlimit:
        raise SandboxUnavailable("the bash tool is disabled: prlimit (util-linux) is not installed on this server")
    return bwrap, prlimit


@lru_cache(maxsize=4)
def _probe(sandbox_uid: int, tmp_mb: int) -> str | None:
    """None when a trivial command runs in the sandbox on this machine, else bwrap's complaint."""
    bwrap, _prlimit = _tools()
    user = sandbox_uid if os.geteuid() == 0 else None
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY)  # stands in for the workspace
    try:
        completed = subprocess.run(
            [bwrap, *bwrap_arguments(fd, "true", tmp_mb=tmp_mb)],
            env={}, pass_fds=[fd], capture_output=True, text=True, timeout=20, user=user, group=user,
            extra_groups=[] if user is not None else None,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    finally:
        os.close(fd)
    return None if completed.returncode == 0 else (completed.stderr.strip() or f"exit code {completed.returncode}")


def check_available(limits: Limits = Limits()) -> None:
    """SandboxUnavailable when commands cannot be confined here."""
    problem = _probe(limits.sandbox_uid, limits.tmp_mb)
    if problem:
        hint = ""
        if "--size" in problem:
            hint = " (this bubblewrap cannot size /tmp: upgrade it, or set AGENT_BASH_TMP_MB=0)"
        raise SandboxUnavailable(
            f"the bash tool is disabled: the sandbox cannot be set up on this server ({problem[:300]}){hint}; "
            "commands are never run without it"
        )


async def run(command: str, workspace: Path, limits: Limits) -> Outcome:
    if "\x00" in command:
        raise ToolError("the command contains a NUL byte")
    bwrap, prlimit = _tools()
    await asyncio.to_thread(check_available, limits)
    workspace.mkdir(parents=True, exist_ok=True)
    as_root = os.geteuid() == 0
    uid = limits.sandbox_uid if as_root else os.getuid()
    if as_root:
        _check_reachable(workspace, uid)
        await asyncio.to_thread(_hand_over, workspace, uid)
    quota = limits.workspace_max_bytes
    used = await asyncio.to_thread(_usage, workspace)
    room = 0 if used is None else max(0, quota - used)
    file_bytes = min(limits.file_size_mb * 1024 * 1024, room)
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        argv = [
            prlimit, *_limit_arguments(limits, uid, file_bytes),
            "--", bwrap, *bwrap_arguments(fd, command, tmp_mb=limits.tmp_mb),
        ]  # fmt: skip
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={},
            pass_fds=[fd],
            start_new_session=True,
            user=uid if as_root else None,
            group=uid if as_root else None,
            extra_groups=[] if as_root else None,
        )
    finally:
        os.close(fd)
    kept = bytearray()
    cap = limits.max_output_chars * 4  # bytes; the text is cut to characters below
    seen = 0

    async def drain() -> None:
        nonlocal seen
        while chunk := await process.stdout.read(65536):
            seen += len(chunk)
            if len(kept) < cap:
                kept.extend(chunk[: cap - len(kept)])
        await process.wait()

    quota_killed = False

    async def watch_quota() -> None:
        nonlocal quota_killed
        if room == 0:
            return  # RLIMIT_FSIZE 0: no file can grow, there is nothing to watch
        loop = asyncio.get_running_loop()
        while process.returncode is None:
            started = loop.time()
            size = await asyncio.to_thread(_usage, workspace)
            if (size is None or size > quota) and process.returncode is None:
                quota_killed = True
                _kill(process)
                return
            # A large workspace is measured less often, so that measuring stays a small cost.
            await asyncio.sleep(max(QUOTA_POLL_SECONDS, 4 * (loop.time() - started)))

    watcher = asyncio.create_task(watch_quota())
    timed_out = False
    try:
        await asyncio.wait_for(drain(), limits.timeout)
    except TimeoutError:
        timed_out = True
    finally:
        watcher.cancel()
        if process.returncode is None:
            _kill(process)
            await process.wait()
    text = kept.decode("utf-8", errors="replace")[: limits.max_output_chars]
    omitted = max(0, seen - len(text.encode("utf-8", errors="replace")))
    after = await asyncio.to_thread(_usage, workspace)
    exit_code = None if timed_out or quota_killed else process.returncode
    return Outcome(text, exit_code, timed_out, omitted, file_bytes, quota_killed, after)


def _kill(process: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
