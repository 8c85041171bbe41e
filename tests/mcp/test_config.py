"""AGENT_MCP_CONFIG: the file's checks (chat/mcp/config.py, chat/checks.py) and `manage.py mcp`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from django.core.checks import ERROR, WARNING
from django.core.management import call_command

from chat.checks import check_mcp_config
from chat.mcp import config
from chat.mcp.tools import tool_name

from .conftest import stdio_server


def problems(text: str) -> list[tuple[str, str]]:
    _servers, found = config.parse(text)
    return [(p.id, p.message) for p in found]


def test_a_valid_file_gives_its_servers():
    text = json.dumps(
        {
            "mcpServers": {
                "files": {"command": sys.executable, "args": ["-m", "files"], "env": {"ROOT": "/srv"}},
                "search": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer t"}},
                "typed": {"type": "streamable-http", "url": "http://127.0.0.1:9/mcp"},
            }
        }
    )
    servers, found = config.parse(text)
    assert found == []
    files, search, typed = servers
    assert (files.transport, files.command, files.args, files.env) == ("stdio", sys.executable, ("-m", "files"),
                                                                       (("ROOT", "/srv"),))  # fmt: skip
    assert (search.transport, search.url, search.headers) == ("http", "https://mcp.example.com/mcp",
                                                             (("Authorization", "Bearer t"),))  # fmt: skip
    assert "Bearer" not in repr(search)  # a token in the headers stays out of logs
    secret = config.ServerConfig("s", url="https://user:pw@mcp.example.com:8443/mcp?x=1")
    assert secret.describe() == "streamable HTTP https://mcp.example.com:8443/mcp?x=1"
    assert typed.transport == "http"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("{not json", ("agentsite.E021", "not valid JSON: Expecting property name enclosed in double quotes at line 1, column 2")),
        ("[]", ("agentsite.E022", 'the file must be an object with an "mcpServers" object')),
        ('{"servers": {}}', ("agentsite.E022", 'the file must be an object with an "mcpServers" object')),
        ('{"mcpServers": {}, "extra": 1}', ("agentsite.E022", "unknown top-level keys: extra")),
        ('{"mcpServers": {"a": "python"}}', ("agentsite.E022", "mcpServers.a must be an object")),
        ('{"mcpServers": {"a": {}}}',
         ("agentsite.E022", "mcpServers.a needs either `command` (stdio) or `url` (streamable HTTP)")),
        ('{"mcpServers": {"a": {"command": "python3", "url": "http://x/"}}}',
         ("agentsite.E022", "mcpServers.a needs either `command` (stdio) or `url` (streamable HTTP)")),
        ('{"mcpServers": {"a": {"command": "python3", "argv": []}}}',
         ("agentsite.E022", "mcpServers.a has unknown keys: argv")),
        ('{"mcpServers": {"a": {"command": "python3", "args": "-m x"}}}',
         ("agentsite.E022", "mcpServers.a.args must be a list of strings")),
        ('{"mcpServers": {"a": {"command": "python3", "env": {"N": 1}}}}',
         ("agentsite.E022", "mcpServers.a.env must be an object of string values")),
        ('{"mcpServers": {"a": {"type": "sse", "url": "http://x/"}}}',
         ("agentsite.E022", "mcpServers.a.type 'sse' does not fit a http server")),
        ('{"mcpServers": {"a": {"command": "no-such-command-xyz"}}}',
         ("agentsite.W023", "mcpServers.a.command: 'no-such-command-xyz' is not found on PATH")),
        ('{"mcpServers": {"a": {"command": "./nothing/here"}}}',
         ("agentsite.W023", "mcpServers.a.command: './nothing/here' is not an executable file")),
        ('{"mcpServers": {"a": {"url": "ftp://x/"}}}',
         ("agentsite.E024", "mcpServers.a.url: 'ftp://x/' is not an http:// or https:// URL with a host")),
        ('{"mcpServers": {"a": {"url": "http://x:99999/"}}}',
         ("agentsite.E024", "mcpServers.a.url: 'http://x:99999/' is not a valid URL: Port out of range 0-65535")),
        ('{"mcpServers": {"a": {"url": "https://x/", "headers": ["A: b"]}}}',
         ("agentsite.E022", "mcpServers.a.headers must be an object of string values")),
        # hostile values: each a problem reported, never an exception out of the system check
        ('{"mcpServers": ' + "[" * 100_000 + "]" * 100_000 + "}", ("agentsite.E021", "not valid JSON: nested too deep")),
        ('{"mcpServers": {"a": {"type": [], "url": "http://x/"}}}',
         ("agentsite.E022", "mcpServers.a.type [] does not fit a http server")),
        ('{"mcpServers": {"a": {"type": {}, "command": "python3"}}}',
         ("agentsite.E022", "mcpServers.a.type {} does not fit a stdio server")),
        ('{"mcpServers": {"a": {"command": "py\\u0000thon"}}}', ("agentsite.E022", "mcpServers.a holds a NUL character")),
        ('{"mcpServers": {"a": {"command": "python3", "args": ["\\u0000"]}}}',
         ("agentsite.E022", "mcpServers.a holds a NUL character")),
        ('{"mcpServers": {"a": {"command": "python3", "env": {"A\\u0000": "b"}}}}',
         ("agentsite.E022", "mcpServers.a holds a NUL character")),
        ('{"mcpServers": {"a": {"command": "./x", "cwd": "/tmp\\u0000"}}}',
         ("agentsite.E022", "mcpServers.a holds a NUL character")),
        ('{"mcpServers": {"a": {"url": "http://x\\u0000/"}}}', ("agentsite.E022", "mcpServers.a holds a NUL character")),
        ('{"mcpServers": {"a": {"url": "http://x/", "headers": {"A": "b\\r\\nInjected: 1"}}}}',
         ("agentsite.E022", "mcpServers.a.headers hold a line break")),
        ('{"mcpServers": {"a\\u0000": {"url": "http://x/"}}}',
         ("agentsite.E022", "the server name 'a\\x00' holds a NUL character")),
        ('{"mcpServers": {"a": {"url": "http://[::1/"}}}',
         ("agentsite.E024", "mcpServers.a.url: 'http://[::1/' is not a valid URL: Invalid IPv6 URL")),
    ],
)  # fmt: skip
def test_bad_files_are_reported(text, expected):
    assert problems(text) == [expected]


def test_one_bad_server_leaves_the_others():
    servers, found = config.parse(json.dumps({"mcpServers": {"good": {"url": "http://a/"}, "bad": {"url": 3}}}))
    assert [s.name for s in servers] == ["good"] and [p.id for p in found] == ["agentsite.E024"]


def test_tool_names_fit_the_models_pattern():
    taken: set[str] = set()
    assert tool_name("files", "read", taken) == "files__read"
    assert tool_name("my server", "get.weather/now", taken) == "my_server__get_weather_now"
    long = tool_name("s", "x" * 100, taken)
    assert len(long) == 64 and config_pattern(long)
    # Two tools that sanitise to the same name stay apart.
    taken.add("a_b__c")
    other = tool_name("a.b", "c", taken)
    assert other != "a_b__c" and config_pattern(other)


def config_pattern(name: str) -> bool:
    from chat.mcp.tools import NAME_PATTERN

    return bool(NAME_PATTERN.match(name))


def test_the_system_check_reports_the_file(settings, tmp_path):
    settings.AGENT_MCP_TIMEOUT = 30
    settings.AGENT_MCP_CONFIG = None
    assert check_mcp_config(None) == []
    settings.AGENT_MCP_CONFIG = str(tmp_path / "missing.json")
    (error,) = check_mcp_config(None)
    assert error.id == "agentsite.E020" and "cannot read" in error.msg
    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {"a": {"command": "no-such-command-xyz"}, "b": {"url": "nope"}}}')
    settings.AGENT_MCP_CONFIG = str(path)
    found = check_mcp_config(None)
    assert [(e.id, e.level) for e in found] == [("agentsite.W023", WARNING), ("agentsite.E024", ERROR)]
    path.write_text(json.dumps({"mcpServers": {"t": stdio_server()}}))
    assert check_mcp_config(None) == []
    settings.AGENT_MCP_TIMEOUT = 0
    assert [e.id for e in check_mcp_config(None)] == ["agentsite.E003"]


def test_mcp_command_lists_status_and_tools(mcp_config, capsys):
    mcp_config({"t": stdio_server(), "broken": {"command": sys.executable, "args": ["-c", "raise SystemExit(3)"]}})
    with pytest.raises(SystemExit) as exit_info:
        call_command("mcp")
    assert exit_info.value.code == 1  # a server is down
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"t (stdio {sys.executable} {stdio_server()['args'][0]} stdio): running, 9 tools"
    assert "  t__add  Add two integers." in lines
    assert "  t__get_weather  A tool whose name has a character the model's tool names may not have." in lines
    (broken,) = [line for line in lines if line.startswith("broken ")]
    assert ": not running: could not start: " in broken


def test_mcp_command_without_servers(settings):
    from django.core.management.base import CommandError

    settings.AGENT_MCP_CONFIG = None
    with pytest.raises(CommandError, match="AGENT_MCP_CONFIG is not set"):
        call_command("mcp")


def _unused_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_server_that_is_not_there_is_a_warning_and_the_others_serve(mcp_config, capsys):
    """A command not found (or a URL nobody answers) at start-up does not stop manage.py: the check warns,
    the server is kept and `manage.py mcp` shows why it is not running; a malformed file stays an error."""
    port = _unused_port()
    mcp_config({"ghost": {"command": "no-such-command-xyz"}, "gone": {"url": f"http://127.0.0.1:{port}/mcp"},
                "t": stdio_server()}, timeout=20)  # fmt: skip
    call_command("check")  # a system check error would raise SystemCheckError: migrate would not run
    assert [s.name for s in config.read(str(mcp_config_path(mcp_config)))[0]] == ["ghost", "gone", "t"]
    with pytest.raises(SystemExit) as exit_info:
        call_command("mcp")
    assert exit_info.value.code == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    (ghost,) = [line for line in lines if line.startswith("ghost ")]
    assert (
        ghost
        == "ghost (stdio no-such-command-xyz): not running: could not start: 'no-such-command-xyz' is not found on PATH"
    )
    (gone,) = [line for line in lines if line.startswith("gone ")]
    assert gone.startswith(f"gone (streamable HTTP http://127.0.0.1:{port}/mcp): not running: could not start: ")
    assert any(line.startswith("t (stdio ") and line.endswith("running, 9 tools") for line in lines)
    assert "(agentsite.W023)" in captured.err
    # the file itself broken: still an error
    mcp_config_path(mcp_config).write_text('{"mcpServers": {"ghost": {"command": "no-such-command-xyz"}')
    assert [e.level for e in check_mcp_config(None)] == [ERROR]


def mcp_config_path(_fixture) -> Path:
    from django.conf import settings

    return Path(settings.AGENT_MCP_CONFIG)
