"""docs/protocol.md stays in step with the code: every name a client can meet is documented.

The names are read from the code itself (event classes, error and status codes, close
codes, URL routes), so a new one that is not described in the document fails here.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from chat import urls
from chat.accounts import bearer
from chat.agent import events, loop
from chat.doors.api import api, api_tokens, files, runs_api
from chat.doors.http import json_api, run_answers
from chat.doors.openai import openai_api, openai_shapes
from chat.doors.socket import consumers, routing
from chat.realtime import backlog
from chat.runs import client_frames, engine, requests

DOC = (Path(__file__).resolve().parents[1] / "docs" / "protocol.md").read_text()


def _public_values(cls) -> list[str]:
    return [value for name, value in vars(cls).items() if not name.startswith("_")]


def _route_shape(route: str) -> str:
    """A route with its converters reduced to `<>`: `<uuid:conversation_id>` and `<id>` match."""
    return re.sub(r"<[^>]*>", "<>", route)


EVENT_TYPES = sorted(
    cls.type
    for cls in vars(events).values()
    if inspect.isclass(cls) and issubclass(cls, events.AgentEvent) and cls is not events.AgentEvent
)
# ErrorCode's names, and any code an ErrorEvent is built with as a literal (AGENT_ERROR).
EVENT_ERROR_CODES = sorted(
    set(_public_values(events.ErrorCode)) | set(re.findall(r'ErrorEvent\(\s*"([A-Z_]+)"', inspect.getsource(loop)))
)
RUN_STATUSES = sorted(_public_values(events.RunStatus))
# The frame codes, wherever a refusal is made (the socket's and the HTTP run endpoints' shared
# front door too), and every code the run endpoints map to an HTTP status.
FRAME_ERROR_CODES = sorted(
    {
        code
        for pair in re.findall(
            r'ProtocolError\(\s*"([A-Z_]+)"|run_error\(\s*"([A-Z_]+)"',
            "".join(inspect.getsource(module) for module in (consumers, client_frames, engine, requests, runs_api)),
        )
        for code in pair
        if code
    }
    | set(run_answers.ERROR_STATUS)
)
FRAME_TYPES = sorted(client_frames.FRAME_TYPES)
API_ERROR_CODES = sorted(
    {
        code
        for pair in re.findall(
            r'"error": "([a-z_]+)"|(?:json_error|_refusal)\(\s*\d+, "([a-z_]+)"',
            "".join(inspect.getsource(module) for module in (api, api_tokens, bearer, files, json_api)),
        )
        for code in pair
        if code
    }
)
# The OpenAI-compatible endpoint's `code`s: written where an error is made, and every start refusal's.
OPENAI_ERROR_CODES = sorted(
    set(
        re.findall(
            r'openai_error\(\s*\d+,\s*"([a-z_]+)"|code="([a-z_]+)"|(?:^|\s)return \d+, "([a-z_]+)"',
            "".join(inspect.getsource(module) for module in (openai_api, openai_shapes, bearer)),
        )
    )
)
OPENAI_ERROR_CODES = sorted(
    {code for pair in OPENAI_ERROR_CODES for code in pair if code}
    | {code for _, code in openai_shapes.START_REFUSALS.values()}
    | {code for _, code in bearer.OPENAI_REFUSALS.values()}
)
CLOSE_CODES = sorted(
    value for module in (consumers, backlog) for name, value in vars(module).items() if name.startswith("CLOSE_")
)
ROUTES = sorted(
    "/" + str(pattern.pattern)
    for pattern in [*urls.urlpatterns, *routing.websocket_urlpatterns]
    if not hasattr(pattern, "url_patterns") and str(pattern.pattern)  # includes and the page itself
)


def test_the_code_still_has_the_names_this_test_reads():
    # Guards the readers above: if a refactor hides the names from them, say so here.
    assert {"user_message", "text", "complete"} <= set(EVENT_TYPES)
    assert {"BAD_REQUEST", "TOO_LARGE", "RUN_IN_PROGRESS", "RATE_LIMITED", "QUOTA_EXCEEDED"} <= set(FRAME_ERROR_CODES)
    assert {"message", "cancel", "ping"} <= set(FRAME_TYPES)
    assert {"not_authenticated", "bad_request", "not_found"} <= set(API_ERROR_CODES)
    assert {4401, 4404} <= set(CLOSE_CODES)
    assert {"model_not_found", "invalid_api_key", "tools_not_supported", "model_call_failed"} <= set(OPENAI_ERROR_CODES)
    assert "/healthz" in ROUTES and any(route.startswith("/ws/") for route in ROUTES)


@pytest.mark.parametrize(
    "name", EVENT_TYPES + EVENT_ERROR_CODES + RUN_STATUSES + FRAME_ERROR_CODES + API_ERROR_CODES + OPENAI_ERROR_CODES
)
def test_every_name_a_client_can_meet_is_documented(name):
    assert f"`{name}`" in DOC or f'"{name}"' in DOC, f"docs/protocol.md does not mention {name}"


@pytest.mark.parametrize("frame_type", FRAME_TYPES)
def test_every_client_frame_is_documented(frame_type):
    assert f'{{"type": "{frame_type}"' in DOC, f"docs/protocol.md shows no {frame_type} frame"


@pytest.mark.parametrize("code", CLOSE_CODES)
def test_every_close_code_is_documented(code):
    assert f"`{code}`" in DOC


@pytest.mark.parametrize("route", ROUTES)
def test_every_endpoint_is_documented(route):
    assert _route_shape(route) in _route_shape(DOC), f"docs/protocol.md does not describe {route}"


# -- citations of the document from the code ---------------------------------------------------
ROOT = Path(__file__).resolve().parents[1]
CITED = ("chat", "agentsite", "bench", "tests", "static/chat", "templates")
HEADINGS = {
    re.sub(r"^\d+\.\s*", "", line.lstrip("#").strip()) for line in DOC.splitlines() if re.match(r"#{2,4} ", line)
}
CITATION = re.compile(r'docs/protocol\.md, "([^"]+)"((?: and "[^"]+")*)')
# A section cited by number, or a PROTOCOL.md the repository does not have.
NUMBERED = re.compile(r"(?:PROTOCOL(?:\.md)?|protocol\.md),? (?:sections?|§) ?\d")


def _cited_files() -> list[Path]:
    return [
        path
        for top in CITED
        for path in sorted((ROOT / top).rglob("*"))
        if path.suffix in (".py", ".js", ".html") and "node_modules" not in path.parts and "vendor" not in path.parts
    ]


def _citations() -> list[tuple[str, str]]:
    found = []
    for path in _cited_files():
        text = path.read_text()
        for match in CITATION.finditer(text):
            names = [match.group(1), *re.findall(r'"([^"]+)"', match.group(2))]
            where = f"{path.relative_to(ROOT)}:{text[: match.start()].count(chr(10)) + 1}"
            found.extend((where, name) for name in names)
    return found


def test_the_code_cites_the_document_often():
    assert len(_citations()) >= 60
    assert {"The WebSocket", "Events", "Approvals", "Versions: edits, regenerated answers and branches"} <= HEADINGS


def test_every_citation_names_a_heading_of_the_document():
    assert [(where, name) for where, name in _citations() if name not in HEADINGS] == []


def test_no_section_is_cited_by_number():
    """Numbers move when a section is added; the code names the heading instead."""
    numbered = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}"
        for path in _cited_files()
        if path.name != "test_protocol_doc.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if NUMBERED.search(line)
    ]
    assert numbered == []
