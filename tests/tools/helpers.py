"""Changing a ToolContext's typed tool settings in a test."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chat.agent.tools import ToolContext
from chat.tools.config import settings_of


def configure(context: ToolContext, **families: dict[str, Any]) -> ToolContext:
    """Replace some settings of some tool families, e.g. `configure(context, fetch={"max_bytes": 1000})`.

    An unknown family or setting name is a TypeError, as it is for the server."""
    current = settings_of(context)
    changed = {name: replace(getattr(current, name), **values) for name, values in families.items()}
    context.settings = replace(current, **changed)
    return context
