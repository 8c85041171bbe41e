"""The OpenAPI description of GET /api/usage/ (docs/protocol.md, "Usage" and "Budgets"): the
counts it always gave, its window of calendar days per agent with cost, and the budgets that
apply. A module of its own, in the form of chat.doors.openapi.openapi_routes (which is at its
size); chat.doors.openapi.openapi reads its routes and schemas with the others."""

from __future__ import annotations

from chat.doors.openapi.openapi_routes import BAD_REQUEST, answer, error, operation, query
from chat.doors.openapi.openapi_schemas import COUNT, STRING, _object, ref

COST = {"type": ["number", "null"], "minimum": 0, "description": "US dollars; null when no call was priced."}
FIGURES = {"promptTokens": COUNT, "completionTokens": COUNT, "totalTokens": COUNT, "cost": COST}
NAME_OR_NULL = {"type": ["string", "null"]}

USAGE_SCHEMAS: dict[str, dict] = {
    "UsageFigures": _object(FIGURES),
    "Budget": _object(
        {
            "id": {"type": ["integer", "null"]},
            "scope": {"enum": ["user", "group", "default", "agent", "token"]},
            "name": NAME_OR_NULL,
            "period": {"enum": ["day", "week", "month"]},
            "unit": {"enum": ["tokens", "cost"]},
            "limit": {"type": "number", "minimum": 0},
            "used": {"type": "number", "minimum": 0},
            "reserved": {"type": "number", "minimum": 0},
            "remaining": {"type": "number", "minimum": 0},
            "resetsAt": {"type": "string", "format": "date-time"},
            "exhausted": {"type": "boolean"},
        },
        description="A budget as admission counts it: `remaining` = max(limit - used - reserved, 0).",
    ),
    "Usage": _object(
        {
            "today": ref("TokenCounts"),
            "month": ref("TokenCounts"),
            "models": {
                "type": "array",
                "items": _object({"model": STRING, "today": ref("TokenCounts"), "month": ref("TokenCounts")}),
            },
            "dailyTokenQuota": {"type": ["integer", "null"]},
            "timeZone": STRING,
            "days": {
                "type": "array",
                "items": _object(
                    {
                        "date": {"type": "string", "format": "date"},
                        **FIGURES,
                        "agents": {"type": "array", "items": _object({"agent": STRING, **FIGURES})},
                    }
                ),
            },
            "agents": {"type": "array", "items": _object({"agent": STRING, "name": STRING, **FIGURES})},
            "total": ref("UsageFigures"),
            "budgets": {"type": "array", "items": ref("Budget")},
        }
    ),
}

USAGE_ROUTES: dict[str, dict[str, dict]] = {
    "api/usage/": {
        "get": operation(
            "The user's own use: today and this month per model, N calendar days per agent with cost, "
            "and every budget that applies",
            {
                "200": answer("The counts, in `TIME_ZONE`'s calendar.", "Usage"),
                "400": BAD_REQUEST,
                "404": error("`?user=` from someone who is not staff, or no such user."),
            },
            parameters=[
                query("days", "Calendar days, 1 to 366 (default 30).", {"type": "integer", "minimum": 1}),
                query("user", "A username: staff get that user's answer.", {"type": "string"}),
            ],
            tags=["usage"],
        )
    },
}
