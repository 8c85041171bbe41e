"""AGENT_MCP_CONFIG: the common `mcpServers` JSON file, read and checked.

    {"mcpServers": {"files": {"command": "npx", "args": ["-y", "@mcp/server-files"], "env": {"ROOT": "/srv"}},
                    "search": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ..."}}}}

Every problem is reported with the id of the system check that shows it, so the check and the
runtime agree on what a valid file is. A file that cannot be read or a malformed entry is an error;
a `command` that is not found is a warning: the server is kept (the command may be installed later,
or the check may run where the server does not, as for `migrate`), its start fails with a tool
error naming the cause, and the other servers serve.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from chat.http_urls import http_url_problem

# Keys of a server entry. `type` and `cwd` appear in many clients' files; `sse` servers are not
# supported (the SDK deprecates that transport), so `type` may only confirm what the entry is.
STDIO_KEYS = {"command", "args", "env", "cwd", "type"}
HTTP_KEYS = {"url", "headers", "type"}
TYPES = {"stdio": "stdio", "http": "http", "streamable-http": "http", "streamableHttp": "http"}

E_UNREADABLE = "agentsite.E020"
E_JSON = "agentsite.E021"
E_SHAPE = "agentsite.E022"
W_COMMAND = "agentsite.W023"
E_URL = "agentsite.E024"


@dataclass(frozen=True)
class ServerConfig:
    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    url: str = ""
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # may hold a token

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"

    def command_problem(self) -> str | None:
        """Why a stdio server's command cannot be run here, or None."""
        return None if self.url else _command_problem(self.command, self.cwd)

    def describe(self) -> str:
        if self.url:
            parts = urlsplit(self.url)
            shown = parts._replace(netloc=parts.netloc.rpartition("@")[2])  # no user:password
            return f"streamable HTTP {shown.geturl()}"
        return "stdio " + " ".join([self.command, *self.args])


@dataclass(frozen=True)
class Problem:
    id: str
    message: str
    warning: bool = False  # the server is kept: it fails at its start, not the whole file


class McpConfigError(Exception):
    def __init__(self, problems: list[Problem]):
        super().__init__("; ".join(p.message for p in problems))
        self.problems = problems


def _strings(value, what: str, problems: list[Problem]) -> bool:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        problems.append(Problem(E_SHAPE, f"{what} must be a list of strings"))
        return False
    return True


def _string_map(value, what: str, problems: list[Problem]) -> bool:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        problems.append(Problem(E_SHAPE, f"{what} must be an object of string values"))
        return False
    return True


def _texts(value) -> list[str]:
    """The strings of a config value: itself, a list's items, an object's keys and values (one level
    down, as deep as a server entry's values go)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str)]
    if isinstance(value, dict):
        return [text for key, item in value.items() for text in (key, *_texts(item))]
    return []


def _command_problem(command: str, cwd: str | None) -> str | None:
    if os.sep in command:
        path = Path(cwd or ".") / command
        return None if path.is_file() and os.access(path, os.X_OK) else f"{command!r} is not an executable file"
    return None if shutil.which(command) else f"{command!r} is not found on PATH"


def _server(name: str, entry, problems: list[Problem]) -> ServerConfig | None:
    where = f"mcpServers.{name}"
    if not name.strip():
        problems.append(Problem(E_SHAPE, "a server name in mcpServers is empty"))
        return None
    if "\x00" in name:
        problems.append(Problem(E_SHAPE, f"the server name {name!r} holds a NUL character"))
        return None
    if not isinstance(entry, dict):
        problems.append(Problem(E_SHAPE, f"{where} must be an object"))
        return None
    if ("command" in entry) == ("url" in entry):
        problems.append(Problem(E_SHAPE, f"{where} needs either `command` (stdio) or `url` (streamable HTTP)"))
        return None
    kind = "http" if "url" in entry else "stdio"
    before = len(problems)
    if any("\x00" in text for text in _texts(entry)):  # no process argument, variable or header can hold one
        problems.append(Problem(E_SHAPE, f"{where} holds a NUL character"))
        return None
    unknown = sorted(set(entry) - (HTTP_KEYS if kind == "http" else STDIO_KEYS))
    if unknown:
        problems.append(Problem(E_SHAPE, f"{where} has unknown keys: {', '.join(unknown)}"))
    if "type" in entry and (not isinstance(entry["type"], str) or TYPES.get(entry["type"]) != kind):
        problems.append(Problem(E_SHAPE, f"{where}.type {entry['type']!r} does not fit a {kind} server"))
    if kind == "http":
        url, headers = entry["url"], entry.get("headers", {})
        if not isinstance(url, str):
            problems.append(Problem(E_URL, f"{where}.url must be a string"))
        elif problem := http_url_problem(url):
            problems.append(Problem(E_URL, f"{where}.url: {url!r} is {problem}"))
        if _string_map(headers, f"{where}.headers", problems) and any(
            "\r" in text or "\n" in text for text in _texts(headers)
        ):
            problems.append(Problem(E_SHAPE, f"{where}.headers hold a line break"))
        if len(problems) > before:
            return None
        return ServerConfig(name, url=url, headers=tuple(headers.items()))
    command, args, env, cwd = entry["command"], entry.get("args", []), entry.get("env", {}), entry.get("cwd")
    if not isinstance(command, str) or not command.strip():
        problems.append(Problem(E_SHAPE, f"{where}.command must be a non-empty string"))
    _strings(args, f"{where}.args", problems)
    _string_map(env, f"{where}.env", problems)
    if cwd is not None and not isinstance(cwd, str):
        problems.append(Problem(E_SHAPE, f"{where}.cwd must be a string"))
    if len(problems) > before:
        return None
    server = ServerConfig(name, command=command, args=tuple(args), env=tuple(env.items()), cwd=cwd)
    if problem := server.command_problem():
        problems.append(Problem(W_COMMAND, f"{where}.command: {problem}", warning=True))
    return server


def parse(text: str) -> tuple[list[ServerConfig], list[Problem]]:
    """The valid servers of a file's text, and what is wrong with the rest."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return [], [Problem(E_JSON, f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}")]
    except RecursionError:
        return [], [Problem(E_JSON, "not valid JSON: nested too deep")]
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers"), dict):
        return [], [Problem(E_SHAPE, 'the file must be an object with an "mcpServers" object')]
    problems: list[Problem] = []
    unknown = sorted(set(data) - {"mcpServers"})
    if unknown:
        problems.append(Problem(E_SHAPE, f"unknown top-level keys: {', '.join(unknown)}"))
    servers = [s for name, entry in data["mcpServers"].items() if (s := _server(name, entry, problems))]
    return servers, problems


def read(path: str | Path) -> tuple[list[ServerConfig], list[Problem]]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [], [Problem(E_UNREADABLE, f"cannot read {path}: {exc}")]
    return parse(text)


def load(path: str | Path) -> list[ServerConfig]:
    """The servers of a valid file (warnings allowed); McpConfigError listing every error otherwise."""
    servers, problems = read(path)
    if errors := [problem for problem in problems if not problem.warning]:
        raise McpConfigError(errors)
    return servers
