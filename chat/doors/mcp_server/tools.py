"""The tools of the MCP server (docs/protocol.md, "MCP server", tools/list): one `ask_<slug>` per
agent the user may use, exactly the agents of GET /api/agents/ (`default` first), read at each
request; and the agent a tool name stands for."""

from __future__ import annotations

from typing import Any

import mcp_types as types

from chat.agents.selectors import agent_chosen, agent_profiles_for_user
from chat.models import DEFAULT_AGENT_NAME, DEFAULT_AGENT_SLUG, AgentProfile

PREFIX = "ask_"

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["message"],
    "properties": {
        "message": {"type": "string", "description": "what to ask the agent"},
        "conversationId": {
            "type": "string",
            "description": "continue this conversation (the structuredContent.conversationId of an earlier call)",
        },
    },
}

STATUSES = ["succeeded", "failed", "cancelled", "interrupted"]
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["answer", "conversationId", "runId", "status"],
    "properties": {
        "answer": {"type": "string"},
        "conversationId": {"type": "string"},
        "runId": {"type": "string"},
        "status": {"type": "string", "enum": STATUSES},
    },
}


def _tool(slug: str, name: str, description: str) -> types.Tool:
    return types.Tool(
        name=PREFIX + slug,
        title=name,
        description=description or f"Ask the agent {name}.",
        input_schema=INPUT_SCHEMA,
        output_schema=OUTPUT_SCHEMA,
    )


def tools_for(*, user) -> list[types.Tool]:
    """The user's tools, `default` first, then the profiles open to the user (as GET /api/agents/)."""
    profiles = agent_profiles_for_user(user=user).only("slug", "name", "description")
    return [
        _tool(DEFAULT_AGENT_SLUG, DEFAULT_AGENT_NAME, ""),
        *(_tool(p.slug, p.name, p.description) for p in profiles),
    ]


def input_schema_of(name: str) -> dict[str, Any] | None:
    """Every tool takes the same arguments (the SDK checks `Mcp-Param-*` headers against them)."""
    return INPUT_SCHEMA if name.startswith(PREFIX) else None


def agent_of(*, user, name: str) -> tuple[str, AgentProfile | None] | None:
    """(slug, profile) of the agent a tool name stands for (profile None: `default`); None when
    it names no agent the user may use (unknown and forbidden alike)."""
    if not name.startswith(PREFIX):
        return None
    slug = name.removeprefix(PREFIX)
    try:
        return slug, agent_chosen(user=user, slug=slug)
    except LookupError:
        return None
