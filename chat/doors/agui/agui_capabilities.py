"""GET /api/agui/<slug>/: the agent's AgentCapabilities (AG-UI 1.0, camelCase; docs/protocol.md,
"AG-UI"), read from its profile as a run would use it."""

from __future__ import annotations

from typing import Any

from chat.agents.profiles import config_for
from chat.agents.selectors import agent_chosen
from chat.models import DEFAULT_AGENT_NAME, DEFAULT_AGENT_SLUG
from chat.tools import BUILTIN_TOOLS


def capabilities(*, user, slug: str) -> dict[str, Any] | None:
    """None when the user may not use that agent (answered like a missing one)."""
    try:
        profile = agent_chosen(user=user, slug=slug)
    except (LookupError, ValueError):
        return None
    config = config_for(profile)
    name = profile.name if profile is not None else DEFAULT_AGENT_NAME
    description = (profile.description if profile is not None else "") or f"The {name} agent of agentsite."
    tools = [BUILTIN_TOOLS[tool].spec()["function"] for tool in config.tools if tool in BUILTIN_TOOLS]
    return {
        "identity": {"name": name, "type": "agentsite", "description": description, "provider": "agentsite"},
        "transport": {"streaming": True, "resumable": True},
        "tools": {
            "supported": True,
            "parallelCalls": True,
            "clientProvided": False,  # the agent runs its own tools on the server
            "items": [
                {"name": t["name"], "description": t["description"], "parameters": t["parameters"]} for t in tools
            ],
        },
        "reasoning": {"supported": True, "streaming": True},
        "humanInTheLoop": {"supported": True, "approvals": True, "interrupts": True},
        "multimodal": {"input": {"image": config.vision}},
        "execution": {"maxIterations": config.max_iterations},
        "state": {"snapshots": False, "deltas": False, "memory": True, "persistentState": True},
        "custom": {"agentsite": {"slug": slug if profile is not None else DEFAULT_AGENT_SLUG}},
    }
