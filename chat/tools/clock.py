"""`current_time`: the current date and time in an IANA time zone."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from chat.agent.tools import ToolError


async def current_time(timezone: str = "UTC") -> str:
    """Return the current date and time in ISO 8601 for an IANA time zone such as "Asia/Shanghai" (default UTC)."""
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(f"unknown time zone {timezone!r}; use an IANA name such as Europe/Paris") from None
    return datetime.now(zone).isoformat(timespec="seconds")
