"""`bash` (opt-in): a shell command in the conversation's workspace, inside chat.tools.sandbox.

Limits from the run's settings (chat.tools.config): a sandbox.Limits built from the
AGENT_BASH_* settings and the workspace quota AGENT_WORKSPACE_MAX_BYTES shared with
write_file. What the sandbox does and does not protect against: chat/tools/sandbox.py and docs/tools.md.
"""

from __future__ import annotations

import signal
from pathlib import Path

from chat.agent.tools import ToolContext, ToolError
from chat.tools import sandbox
from chat.tools.config import settings_of
from chat.tools.confine import MAX_DEPTH

MAX_COMMAND_CHARS = 20_000


_SIGNALS = {
    signal.SIGXCPU: "killed: CPU time limit ({cpu} s) reached",
    signal.SIGXFSZ: "killed: file size limit ({fsize}) reached",
    signal.SIGKILL: "killed (SIGKILL), possibly by the memory limit ({mem} MB)",
    signal.SIGSEGV: "crashed (SIGSEGV), possibly at the memory limit ({mem} MB)",
}


def _file_limit(outcome: sandbox.Outcome, limits: sandbox.Limits) -> str:
    if outcome.file_limit_bytes < limits.file_size_mb * 1024 * 1024:
        return f"{outcome.file_limit_bytes} bytes: what the workspace quota left"
    return f"{limits.file_size_mb} MB"


def _quota_note(outcome: sandbox.Outcome, limits: sandbox.Limits) -> str:
    """What the model must know when the workspace is over its quota after the command, else ''."""
    quota = limits.workspace_max_bytes
    if outcome.workspace_bytes is None:
        return f"the workspace has folders nested deeper than {MAX_DEPTH} levels and counts as full"
    if outcome.workspace_bytes > quota:
        return f"the workspace holds {outcome.workspace_bytes} bytes, over its quota of {quota} bytes"
    return ""


def _status(outcome: sandbox.Outcome, limits: sandbox.Limits) -> str:
    code = outcome.exit_code
    if code is not None and code > 128 and (code - 128) in _SIGNALS.keys():
        text = _SIGNALS[signal.Signals(code - 128)].format(
            cpu=limits.cpu_seconds, fsize=_file_limit(outcome, limits), mem=limits.memory_mb
        )
        return f"[exit code {code}: {text}]"
    return f"[exit code {code}]"


async def bash(command: str, context: ToolContext) -> str:
    """Run a bash command in the conversation's workspace (the working directory, shared with the file
    tools). No network; limited time, CPU, memory, file size and processes; common command-line tools and
    python3 are available. Returns the combined stdout and stderr, then the exit code."""
    if context.workspace is None:
        raise ToolError("this run has no workspace (it does not belong to a conversation)")
    if not command.strip():
        raise ToolError("the command is empty")
    if len(command) > MAX_COMMAND_CHARS:
        raise ToolError(f"the command is longer than {MAX_COMMAND_CHARS} characters; write a script file first")
    limits = settings_of(context).bash
    outcome = await sandbox.run(command, Path(context.workspace), limits)
    text = outcome.output
    if outcome.omitted_bytes:
        text += f"\n[... output truncated: {outcome.omitted_bytes} more bytes]"
    limit_hit = "fork: retry" in text or "Resource temporarily unavailable" in text
    if outcome.timed_out:
        hint = f" after the process limit ({limits.max_processes}) was reached" if limit_hit else ""
        raise ToolError(
            f"the command was killed{hint}: it ran longer than the {limits.timeout:g} s time limit. "
            f"Output so far:\n{text[-2000:]}"
        )
    if outcome.quota_killed:
        raise ToolError(
            f"the command was killed: {_quota_note(outcome, limits) or 'the workspace passed its quota'}. "
            f"Delete files to make room (commands that write fail until then). Output so far:\n{text[-2000:]}"
        )
    status = _status(outcome, limits)
    if limit_hit:
        status += f" [the process limit ({limits.max_processes}) was reached]"
    if "File size limit exceeded" in text and outcome.file_limit_bytes < limits.file_size_mb * 1024 * 1024:
        status += f" [file size limit: {_file_limit(outcome, limits)}]"
    if note := _quota_note(outcome, limits):
        status += f" [{note}: delete files; writing fails until then]"
    if not text:
        return status
    return f"{text}{'' if text.endswith(chr(10)) else chr(10)}{status}"
