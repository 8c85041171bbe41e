"""Typed tool settings: every AGENT_* setting reaches its field, a wrong name is an error, never a default."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chat.agent.tools import ToolContext
from chat.runtime.build import tool_context, tool_settings
from chat.tools.config import DEFAULTS, FetchSettings, ToolSettings, settings_of
from chat.tools.files import read_file

from .helpers import configure

# Each Django setting, the field it fills, and a value unlike every default.
MAPPING = [
    ("AGENT_FILE_READ_CHUNK", "files.read_chunk", 101),
    ("AGENT_FILE_MAX_BYTES", "files.max_file_bytes", 102),
    ("AGENT_FETCH_ALLOWED_HOSTS", "fetch.allowed_hosts", ["10.9.8.0/24"]),
    ("AGENT_FETCH_MAX_BYTES", "fetch.max_bytes", 103),
    ("AGENT_FETCH_MAX_REDIRECTS", "fetch.max_redirects", 104),
    ("AGENT_FETCH_TIMEOUT", "fetch.timeout", 105.5),
    ("TAVILY_API_KEY", "search.api_key", "tvly-106"),
    ("AGENT_SEARCH_MAX_RESULTS", "search.max_results", 107),
    ("AGENT_SKILLS_DIR", "skills.skills_dir", Path("/srv/skills-108")),
    ("AGENT_BASH_TIMEOUT", "bash.timeout", 109.5),
    ("AGENT_BASH_CPU_SECONDS", "bash.cpu_seconds", 110),
    ("AGENT_BASH_MEMORY_MB", "bash.memory_mb", 111),
    ("AGENT_BASH_FILE_SIZE_MB", "bash.file_size_mb", 112),
    ("AGENT_BASH_MAX_PROCESSES", "bash.max_processes", 113),
    ("AGENT_BASH_MAX_OUTPUT", "bash.max_output_chars", 114),
    ("AGENT_BASH_UID", "bash.sandbox_uid", 115),
    ("AGENT_BASH_TMP_MB", "bash.tmp_mb", 116),
]


def _field(settings: ToolSettings, dotted: str):
    family, name = dotted.split(".")
    return getattr(getattr(settings, family), name)


def test_every_setting_reaches_its_field(settings):
    for name, _dotted, value in MAPPING:
        setattr(settings, name, value)
    settings.AGENT_WORKSPACE_MAX_BYTES = 117
    built = tool_context(conversation_id="c1").settings
    assert isinstance(built, ToolSettings)
    for name, dotted, value in MAPPING:
        expected = tuple(value) if isinstance(value, list) else value
        assert _field(built, dotted) == expected, name
    # The one workspace quota binds write_file and bash alike.
    assert built.files.workspace_max_bytes == built.bash.workspace_max_bytes == 117


def test_the_environment_defaults_are_the_dataclass_defaults():
    """agentsite/settings.py takes its defaults from chat/tools/config.py: one place for each."""
    names = [name for name, _dotted, _value in MAPPING if name not in ("TAVILY_API_KEY", "AGENT_SKILLS_DIR")]
    env = {key: value for key, value in os.environ.items() if key not in names and key != "AGENT_WORKSPACE_MAX_BYTES"}
    script = "import sys; from agentsite import settings as s; print(repr([getattr(s, name) for name in sys.argv[1:]]))"
    result = subprocess.run(
        [sys.executable, "-c", script, *names, "AGENT_WORKSPACE_MAX_BYTES"],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    defaults = [_field(DEFAULTS, dotted) for name, dotted, _value in MAPPING if name in names]
    fetch_hosts = names.index("AGENT_FETCH_ALLOWED_HOSTS")
    defaults[fetch_hosts] = list(defaults[fetch_hosts])  # env_list gives a list
    assert result.stdout.strip() == repr([*defaults, DEFAULTS.files.workspace_max_bytes])


def test_a_misspelt_name_is_an_error_not_a_default():
    with pytest.raises(AttributeError):
        _ = DEFAULTS.fetch.max_byte
    with pytest.raises(TypeError):
        FetchSettings(max_byte=10)
    with pytest.raises(TypeError):
        configure(ToolContext(), fetch={"max_byte": 10})
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULTS.fetch.max_bytes = 10


async def test_the_old_string_keyed_shape_is_refused(workspace):
    context = ToolContext(workspace=workspace, settings={"AGENT_FILE_READ_CHUNK": 3})
    (workspace / "a.txt").write_text("hello")
    with pytest.raises(TypeError, match="must be a ToolSettings"):
        await read_file("a.txt", context)


def test_no_settings_means_the_defaults():
    assert settings_of(ToolContext()) is DEFAULTS


def test_the_search_key_stays_out_of_reprs(settings):
    settings.TAVILY_API_KEY = "tvly-SECRET-42"
    assert "tvly-SECRET-42" not in repr(tool_settings())
