"""`web_search`: Tavily's search API over httpx2; offered only when TAVILY_API_KEY is set.

Its key and result count come from the run's SearchSettings (chat.tools.config).

The model gets the results as text; the UI gets a `reference` event with each
result's title, url and snippet.
"""

from __future__ import annotations

import httpx2

from chat.agent.events import Reference, ReferenceEvent
from chat.agent.tools import ToolContext, ToolError
from chat.tools.config import settings_of

TAVILY_URL = "https://api.tavily.com/search"
TIMEOUT = 20.0
SNIPPET_CHARS = 300
# Tests put an httpx2.MockTransport here; None means the real network.
TRANSPORT: httpx2.AsyncBaseTransport | None = None


async def web_search(query: str, context: ToolContext) -> str:
    """Search the web and return the most relevant results (title, URL, extract). Cite the URLs you use."""
    settings = settings_of(context).search
    key = settings.api_key
    if not key:
        raise ToolError("web search is not configured on this server (no TAVILY_API_KEY)")
    query = query.strip()
    if not query:
        raise ToolError("query is empty")
    if len(query) > 400:
        raise ToolError("query is longer than 400 characters; shorten it")
    try:
        async with httpx2.AsyncClient(transport=TRANSPORT, timeout=TIMEOUT) as client:
            response = await client.post(
                TAVILY_URL,
                headers={"Authorization": f"Bearer {key}"},
                json={"query": query, "max_results": settings.max_results, "search_depth": "basic"},
            )
    except httpx2.TimeoutException:
        raise ToolError("the search service did not answer in time") from None
    except httpx2.HTTPError as exc:
        raise ToolError(f"the search service could not be reached: {type(exc).__name__}") from None
    if response.status_code in (401, 403):
        raise ToolError("the search service refused the API key")
    if response.status_code == 429:
        raise ToolError("the search service is rate limiting this server; try again later")
    if response.status_code != 200:
        raise ToolError(f"the search service answered HTTP {response.status_code}")
    try:
        data = response.json()
        results = [r for r in data.get("results", []) if isinstance(r, dict) and r.get("url")]
    except (ValueError, AttributeError):
        raise ToolError("the search service sent an unreadable answer") from None
    if not results:
        return f"no results for {query!r}"
    references = tuple(
        Reference(
            title=str(r.get("title") or r["url"]),
            url=str(r["url"]),
            snippet=" ".join(str(r.get("content") or "").split())[:SNIPPET_CHARS],
        )
        for r in results
    )
    if context.emit is not None:
        await context.emit(ReferenceEvent(references))
    lines = []
    if data.get("answer"):
        lines.append(f"Summary: {data['answer']}\n")
    for index, (ref, raw) in enumerate(zip(references, results), start=1):
        lines.append(f"[{index}] {ref.title}\nURL: {ref.url}\n{' '.join(str(raw.get('content') or '').split())}\n")
    return "\n".join(lines).strip()
