"""The one check of a URL an operator configures for the server to call (an agent's model
endpoint, an MCP server, the OpenID provider): http or https, with a host, and a port that is
one. (What the agent may fetch is another question: chat.tools.netguard.)"""

from __future__ import annotations

from urllib.parse import urlsplit


def http_url_problem(url: str) -> str | None:
    """Why `url` is not such a URL, or None."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        return f"not a valid URL: {exc}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "not an http:// or https:// URL with a host"
    return None
