"""The built-in tools' settings: one frozen dataclass per tool family, its defaults here and only here.

The Django side (chat/runtime/build.py) reads the AGENT_* settings once per run into a
`ToolSettings` and hands it to the tools as ToolContext.settings; agentsite/settings.py
takes its defaults from these classes. A tool reads typed attributes
(`settings_of(context).fetch.max_bytes`), so a misspelt name is an AttributeError, not
a silent default.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chat.agent.tools import ToolContext
from chat.tools.confine import WORKSPACE_MAX_BYTES
from chat.tools.sandbox import Limits


@dataclass(frozen=True)
class FilesSettings:
    read_chunk: int = 16_000  # AGENT_FILE_READ_CHUNK: bytes one read_file call returns
    max_file_bytes: int = 1_000_000  # AGENT_FILE_MAX_BYTES: largest file write_file writes
    workspace_max_bytes: int = WORKSPACE_MAX_BYTES  # AGENT_WORKSPACE_MAX_BYTES, bash's quota too
    # Runs a quota-checked write (the measurement and the write, chat.tools.files.quota_write) with no
    # other write of the same workspace between the two, in any process: the server passes a database
    # lock (chat.conversations.workspaces.locked_write). None runs it at once, which one event loop keeps whole.
    exclusive: Callable[[ToolContext, Callable[[], Any]], Awaitable[Any]] | None = None


@dataclass(frozen=True)
class FetchSettings:
    allowed_hosts: tuple[str, ...] = ()  # AGENT_FETCH_ALLOWED_HOSTS
    max_bytes: int = 2_000_000  # AGENT_FETCH_MAX_BYTES: body bytes read
    max_redirects: int = 5  # AGENT_FETCH_MAX_REDIRECTS
    timeout: float = 15.0  # AGENT_FETCH_TIMEOUT: seconds for the whole fetch


@dataclass(frozen=True)
class SearchSettings:
    api_key: str | None = field(default=None, repr=False)  # TAVILY_API_KEY (kept out of reprs and logs)
    max_results: int = 5  # AGENT_SEARCH_MAX_RESULTS


@dataclass(frozen=True)
class SkillsSettings:
    skills_dir: Path | None = None  # AGENT_SKILLS_DIR; None: no skills
    only: frozenset[str] | None = None  # the skills an agent profile enables; None: every one


@dataclass(frozen=True)
class ToolSettings:
    files: FilesSettings = field(default_factory=FilesSettings)
    fetch: FetchSettings = field(default_factory=FetchSettings)
    search: SearchSettings = field(default_factory=SearchSettings)
    skills: SkillsSettings = field(default_factory=SkillsSettings)
    # The sandbox's own limits dataclass: AGENT_BASH_* and the workspace quota.
    bash: Limits = field(default_factory=Limits)


DEFAULTS = ToolSettings()


def settings_of(context: ToolContext) -> ToolSettings:
    """The run's tool settings; the defaults when the host gave none (the agent core used on its own)."""
    if context.settings is None:
        return DEFAULTS
    if not isinstance(context.settings, ToolSettings):
        raise TypeError(f"ToolContext.settings must be a ToolSettings, not {type(context.settings).__name__}")
    return context.settings
