"""web_search against a mocked Tavily (httpx2.MockTransport): results, the reference event, failures."""

from __future__ import annotations

import importlib
import json

import httpx2
import pytest

from chat.agent.events import ReferenceEvent
from chat.agent.tools import ToolError
from chat.tools.web_search import web_search

from .helpers import configure

search = importlib.import_module("chat.tools.web_search")  # the module: chat.tools.web_search names the tool

RESULTS = {
    "query": "django channels",
    "answer": None,
    "results": [
        {
            "title": "Channels docs",
            "url": "https://channels.readthedocs.io/",
            "content": "Channels  extends Django",
            "score": 0.9,
        },
        {"title": "", "url": "https://example.org/b", "content": "x" * 500, "score": 0.5},
        {"title": "no url"},
    ],
}


@pytest.fixture
def tavily(monkeypatch):
    seen = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        body = json.loads(request.content)
        if body["query"] == "fail":
            return httpx2.Response(500)
        if body["query"] == "limited":
            return httpx2.Response(429)
        return httpx2.Response(200, json=RESULTS)

    monkeypatch.setattr(search, "TRANSPORT", httpx2.MockTransport(handler))
    return seen


async def test_results_and_reference_event(context, tavily):
    emitted = []

    async def emit(event):
        emitted.append(event)

    context.emit = emit
    configure(context, search={"api_key": "tvly-test", "max_results": 3})
    text = await web_search("django channels", context)
    assert "[1] Channels docs\nURL: https://channels.readthedocs.io/\nChannels extends Django" in text
    assert "[2] https://example.org/b" in text and "no url" not in text
    request = tavily[0]
    assert str(request.url) == "https://api.tavily.com/search"
    assert request.headers["authorization"] == "Bearer tvly-test"
    assert json.loads(request.content)["max_results"] == 3
    (event,) = emitted
    assert isinstance(event, ReferenceEvent)
    refs = event.to_dict()["references"]
    assert refs[0] == {
        "title": "Channels docs",
        "url": "https://channels.readthedocs.io/",
        "snippet": "Channels extends Django",
    }
    assert len(refs[1]["snippet"]) == 300


@pytest.mark.parametrize(
    "key, query, message",
    [
        (None, "x", "not configured"),
        ("k", "   ", "query is empty"),
        ("k", "q" * 401, "longer than 400"),
        ("k", "fail", "HTTP 500"),
        ("k", "limited", "rate limiting"),
    ],
)
async def test_errors(context, tavily, key, query, message):
    if key:
        configure(context, search={"api_key": key})
    with pytest.raises(ToolError, match=message):
        await web_search(query, context)


def test_offered_only_with_a_key(settings):
    from chat.runtime.build import offered_tools

    settings.AGENT_TOOLS = ["calculator", "web_search"]
    settings.TAVILY_API_KEY = None
    assert offered_tools() == ["calculator"]
    settings.TAVILY_API_KEY = "tvly-x"
    assert offered_tools() == ["calculator", "web_search"]
