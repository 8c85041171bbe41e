"""`python -m agentsite.serve` (agentsite/serve.py): the image's default command."""

from __future__ import annotations

import pytest

from agentsite import serve
from serving.serve import ServeCommand


@pytest.fixture
def ran(monkeypatch):
    seen: list[list[str]] = []
    monkeypatch.setattr(ServeCommand, "run", lambda self, args: seen.append(list(args)))
    return seen


def test_with_no_argument_it_serves_the_project_on_every_address_port_8000(ran):
    serve.main([])
    assert ran == [["-b", "0.0.0.0", "-p", "8000", "agentsite.asgi:application"]]
    parsed = ServeCommand().parser.parse_args(ran[0])  # daphne's own parser takes them
    assert (parsed.host, parsed.port, parsed.application) == ("0.0.0.0", 8000, "agentsite.asgi:application")


def test_given_arguments_replace_the_defaults_whole(ran):
    serve.main(["-b", "127.0.0.1", "-p", "9000", "agentsite.asgi:application"])
    assert ran == [["-b", "127.0.0.1", "-p", "9000", "agentsite.asgi:application"]]
