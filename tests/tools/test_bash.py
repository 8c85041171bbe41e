"""The bash tool and its sandbox against hostile commands (needs bubblewrap; skipped without it)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from chat.agent.tools import ToolError
from chat.tools import sandbox
from chat.tools.bash import bash

from .helpers import configure
from .hostile_commands import FORK_BOMBS, NETWORK, RESOURCES, SECRET_HUNTS, TIMEOUTS, WORKSPACE_FILLERS


def _sandbox_problem() -> str | None:
    try:
        sandbox.check_available()
    except ToolError as exc:
        return str(exc)
    return None


pytestmark = pytest.mark.skipif(_sandbox_problem() is not None, reason=f"no sandbox here: {_sandbox_problem()}")

SECRETS = {
    "OPENAI_API_KEY": "sk-test-SECRET-openai-1234",
    "SECRET_KEY": "django-SECRET-key-5678",
    "DATABASE_URL": "postgres://u:SECRET-db-pass@db/x",
    "TAVILY_API_KEY": "tvly-SECRET-9999",
}


@pytest.fixture
def workspace(tmp_path):
    """A workspace below folders the sandbox user may enter (pytest's own tmp root is private)."""
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="agentsite-bash-"))
    top.chmod(0o711)
    path = top / "workspace"
    path.mkdir()
    yield path
    shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def bash_context(context, workspace, monkeypatch):
    context.workspace = workspace
    for key, value in SECRETS.items():
        monkeypatch.setenv(key, value)
    configure(
        context,
        bash={
            "timeout": 3,
            "cpu_seconds": 2,
            "memory_mb": 256,
            "file_size_mb": 5,
            "max_processes": 16,
            "max_output_chars": 2000,
        },
        search={"api_key": SECRETS["TAVILY_API_KEY"]},  # a key in the tool settings never reaches the command
    )
    return context


def _survivors(marker: str) -> list[int]:
    """Processes still alive whose environment carries the marker (a command and all it started)."""
    alive = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as environ:
                    if marker.encode() in environ.read():
                        alive.append(int(entry.name))
            except OSError:
                pass
    return alive


def _marked(command: str) -> tuple[str, str]:
    import uuid

    marker = f"AGENTSITE_TEST_{uuid.uuid4().hex}"
    return marker, f"export {marker}=1\n{command}"


async def test_happy_path(bash_context, workspace):
    (workspace / "data.csv").write_text("a,b\n1,2\n3,4\n")
    result = await bash("pwd; wc -l < data.csv; echo made > out.txt; python3 -c 'print(6*7)'", bash_context)
    assert result.splitlines() == ["/workspace", "3", "42", "[exit code 0]"]
    assert (workspace / "out.txt").read_text() == "made\n"


async def test_exit_code_and_stderr(bash_context):
    result = await bash("echo oops >&2; exit 3", bash_context)
    assert result == "oops\n[exit code 3]"


async def test_skill_profile_script_runs_in_the_sandbox(bash_context, workspace):
    from django.conf import settings

    script = settings.BASE_DIR / "skills" / "csv-data-summary" / "references" / "profile.py"
    (workspace / "profile.py").write_text(script.read_text())
    (workspace / "sales.csv").write_text("region,amount\nnorth,10\nsouth,30\nnorth,20\n")
    result = await bash("python3 profile.py sales.csv", bash_context)
    assert "rows: 3  columns: 2" in result
    assert "amount: number, missing 0, min 10, max 30, mean 20, median 20" in result
    assert "region: text, missing 0, distinct 2, top: north (2), south (1)" in result


@pytest.mark.parametrize("name, command", FORK_BOMBS, ids=[n for n, _ in FORK_BOMBS])
async def test_fork_bombs_are_contained(bash_context, name, command):
    import asyncio
    import time

    marker, command = _marked(command)
    started = time.monotonic()
    try:
        result = await bash(command, bash_context)
    except ToolError as exc:
        result = str(exc)
        assert "killed" in result
    else:
        # Either the shell gave up on fork, or it returned and the PID namespace took its children along.
        assert "process limit (16) was reached" in result or "[exit code 0]" in result
    assert time.monotonic() - started < 10
    await asyncio.sleep(0.3)
    assert _survivors(marker) == []  # nothing left running


@pytest.mark.parametrize("name, command", TIMEOUTS, ids=[n for n, _ in TIMEOUTS])
async def test_commands_past_the_timeout_are_killed(bash_context, name, command):
    import asyncio
    import time

    configure(bash_context, bash={"cpu_seconds": 30})  # the wall clock, not the CPU limit, stops these
    marker, command = _marked(command)
    started = time.monotonic()
    with pytest.raises(ToolError, match=r"killed.*longer than the 3 s time limit"):
        await bash(command, bash_context)
    assert time.monotonic() - started < 6
    await asyncio.sleep(0.3)
    assert _survivors(marker) == []


@pytest.mark.parametrize("name, command", SECRET_HUNTS, ids=[n for n, _ in SECRET_HUNTS])
async def test_secrets_are_not_reachable(bash_context, name, command):
    try:
        result = await bash(command, bash_context)
    except ToolError as exc:
        # A hunt that outlives the time limit (`find /` with a cold disk cache) is killed; what it
        # printed until then comes back in the error and must not hold a secret either.
        assert "longer than the 3 s time limit" in str(exc)
        result = str(exc)
    for value in SECRETS.values():
        assert value not in result
    assert "SECRET" not in result
    assert "root:" not in result  # no shadow file


async def test_environment_is_minimal(bash_context):
    result = await bash("env | sort", bash_context)
    names = {line.split("=", 1)[0] for line in result.splitlines() if "=" in line}
    assert names <= {"HOME", "LANG", "PATH", "PWD", "SHLVL", "TMPDIR", "_", "OLDPWD"}


@pytest.mark.parametrize("name, command", NETWORK, ids=[n for n, _ in NETWORK])
async def test_no_network(bash_context, fake_llm, name, command):
    result = await bash(command.format(port=fake_llm.port), bash_context)
    assert "CONNECTED" not in result
    assert not fake_llm.requests


@pytest.mark.parametrize("name, command, expect", RESOURCES, ids=[n for n, _, _ in RESOURCES])
async def test_resource_limits(bash_context, workspace, name, command, expect):
    configure(bash_context, bash={"timeout": 20, "cpu_seconds": 1})  # CPU: not wall time
    result = await bash(command, bash_context)
    assert re.search(expect, result), result[-500:]
    assert "ALLOCATED" not in result
    if name == "file-size":
        assert (workspace / "big.bin").stat().st_size <= 5 * 1024 * 1024


async def test_other_workspaces_are_invisible(bash_context, workspace, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "mine.txt").write_text("PRIVATE")
    result = await bash(f"cat {other}/mine.txt; ls /; cat ../other/mine.txt", bash_context)
    assert "PRIVATE" not in result


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox user is the server's own user")
async def test_refuses_when_the_sandbox_user_cannot_reach_the_workspace(bash_context, tmp_path):
    bash_context.workspace = tmp_path / "private-workspace"  # below pytest's 0700 folder
    with pytest.raises(ToolError, match="cannot enter .*chmod o\\+x"):
        await bash("echo hi", bash_context)


async def test_refuses_without_bubblewrap(bash_context, monkeypatch):
    real_which = shutil.which
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None if name == "bwrap" else real_which(name))
    with pytest.raises(ToolError, match="bubblewrap .* not installed.*never run without a sandbox"):
        await bash("echo unconfined", bash_context)


async def test_refuses_when_the_sandbox_cannot_start(bash_context, monkeypatch):
    sandbox._probe.cache_clear()
    monkeypatch.setattr(sandbox, "bwrap_arguments", lambda fd, command, **_: ["--no-such-option", "true"])
    try:
        with pytest.raises(ToolError, match="sandbox cannot be set up"):
            await bash("echo unconfined", bash_context)
    finally:
        sandbox._probe.cache_clear()


async def test_empty_and_oversized_commands(bash_context):
    with pytest.raises(ToolError, match="empty"):
        await bash("   ", bash_context)
    with pytest.raises(ToolError, match="longer than"):
        await bash("x" * 30_000, bash_context)
    with pytest.raises(ToolError, match="NUL"):
        await bash("echo a\x00b", bash_context)


async def test_one_file_stops_at_what_the_quota_leaves(bash_context, workspace):
    configure(bash_context, bash={"workspace_max_bytes": 2_000_000})
    (workspace / "kept.txt").write_text("mine")
    result = await bash("head -c 4M /dev/zero > big.bin; echo DONE", bash_context)
    assert "file size limit: 1999996 bytes: what the workspace quota left" in result, result
    assert (workspace / "big.bin").stat().st_size == 1_999_996
    assert (workspace / "kept.txt").read_text() == "mine"
    result = await bash("sh -c 'echo x > one-more.txt'; echo status=$?", bash_context)
    assert "File size limit exceeded" in result and "status=153" in result, result  # full: nothing grows
    assert (workspace / "one-more.txt").stat().st_size == 0
    # (a write past RLIMIT_FSIZE kills the writer with SIGXFSZ, hence `sh -c`: the shell itself goes on)


@pytest.mark.parametrize("name, command", WORKSPACE_FILLERS, ids=[n for n, _ in WORKSPACE_FILLERS])
async def test_commands_that_write_past_the_quota_are_killed(bash_context, workspace, name, command):
    configure(bash_context, bash={"workspace_max_bytes": 2_000_000, "timeout": 60})
    (workspace / "kept.txt").write_text("mine")
    with pytest.raises(ToolError, match="killed: the workspace holds \\d+ bytes, over its quota of 2000000") as failure:
        await bash(command, bash_context)
    assert "DONE" not in str(failure.value)
    assert (workspace / "kept.txt").read_text() == "mine"
    result = await bash("sh -c 'echo x >> kept.txt'; echo status=$?", bash_context)
    assert "status=153" in result and "over its quota" in result, result
    assert (workspace / "kept.txt").read_text() == "mine"


async def test_a_full_workspace_still_lets_the_model_free_space(bash_context, workspace):
    configure(bash_context, bash={"workspace_max_bytes": 1000})
    (workspace / "big.bin").write_bytes(b"x" * 5000)  # e.g. an upload that filled it
    result = await bash("sh -c 'echo more >> big.bin'; sh -c 'echo new > new.txt'; wc -c < big.bin", bash_context)
    assert "5000" in result and "over its quota of 1000 bytes" in result, result
    assert (workspace / "new.txt").stat().st_size == 0
    result = await bash("rm big.bin && echo FREED", bash_context)
    assert "FREED" in result and "quota" not in result, result
    result = await bash("echo new > new.txt; cat new.txt", bash_context)
    assert result.startswith("new\n"), result


async def test_folders_nested_too_deep_count_as_over_the_quota(bash_context, workspace):
    with pytest.raises(ToolError, match="nested deeper than 128 levels"):
        await bash("for i in $(seq 300); do mkdir d && cd d || exit 1; done; sleep 30; echo NESTED", bash_context)
    result = await bash("sh -c 'echo x > more.txt'; rm -rf d; echo CLEANED", bash_context)
    assert "CLEANED" in result and "nested deeper" not in result, result
    assert (workspace / "more.txt").stat().st_size == 0


async def test_the_in_memory_tmp_is_size_limited(bash_context, workspace):
    configure(bash_context, bash={"tmp_mb": 1, "timeout": 20})
    result = await bash(
        "head -c 3M /dev/zero > /tmp/fill; echo status=$?; stat -c %s /tmp/fill; df -k /tmp", bash_context
    )
    assert "No space left on device" in result, result
    assert "status=1" in result, result
    written = int(re.search(r"^(\d+)$", result, re.MULTILINE).group(1))
    assert written <= 1024 * 1024, result
