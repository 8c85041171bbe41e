"""The OpenAPI description of GET /api/usage/ and of budgets (docs/protocol.md, "Usage" and
"Budgets"): the counts it always gave, its window of calendar days per agent with cost, the
budgets that apply; /api/budgets/ for staff; a token's budget. A module of its own, in the form
of chat.doors.openapi.openapi_routes (which is at its size); chat.doors.openapi.openapi reads its
routes and schemas with the others."""

from __future__ import annotations

from chat.doors.openapi.openapi_routes import (
    BAD_REQUEST,
    SESSION_WRITE,
    WRITE,
    answer,
    body,
    error,
    operation,
    query,
)
from chat.doors.openapi.openapi_schemas import COUNT, STRING, _object, ref

COST = {"type": ["number", "null"], "minimum": 0, "description": "US dollars; null when no call was priced."}
FIGURES = {"promptTokens": COUNT, "completionTokens": COUNT, "totalTokens": COUNT, "cost": COST}
NAME_OR_NULL = {"type": ["string", "null"]}

LIMITS = {
    "tokens": {
        "type": ["integer", "null"],
        "minimum": 0,
        "description": "Prompt plus completion tokens; 0: unlimited.",
    },
    "cost": {"type": ["number", "null"], "minimum": 0, "description": "US dollars; 0: unlimited."},
}
PERIOD = {"enum": ["day", "week", "month"]}
STAFF_ONLY = error("`forbidden`: asked with a token, or not staff; or a session without CSRF (`csrf_failed`).")

USAGE_SCHEMAS: dict[str, dict] = {
    "BudgetEntry": _object(
        {
            "id": {"type": "integer"},
            "scope": {"enum": ["user", "group", "agent", "token"]},
            "user": NAME_OR_NULL,
            "group": NAME_OR_NULL,
            "agent": NAME_OR_NULL,
            "token": {"type": ["integer", "null"]},
            "period": PERIOD,
            **LIMITS,
            "createdAt": {"type": "string", "format": "date-time"},
            "updatedAt": {"type": "string", "format": "date-time"},
        },
        description="A budget as staff manage it: its target of its scope, the others null.",
    ),
    "BudgetEntryList": _object({"budgets": {"type": "array", "items": ref("BudgetEntry")}}),
    "BudgetCreate": _object(
        {
            "scope": {"enum": ["user", "group", "agent", "token"]},
            "user": STRING,
            "group": STRING,
            "agent": STRING,
            "token": {"type": "integer"},
            "period": PERIOD,
            **LIMITS,
        },
        optional=("user", "group", "agent", "token", "tokens", "cost"),
    ),
    "BudgetChange": _object(LIMITS, optional=("tokens", "cost")),
    "TokenBudget": _object({"id": {"type": "integer"}, "period": PERIOD, **LIMITS}),
    "TokenBudgetSet": _object({"period": PERIOD, **LIMITS}, optional=("tokens", "cost")),
    "TokenChange": _object({"budget": {"oneOf": [ref("TokenBudgetSet"), {"type": "null"}]}}),
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
    "api/budgets/": {
        "get": operation(
            "Every budget (staff sessions), filtered by `scope`, `user`, `group`, `agent` or `token`",
            {"200": answer("The budgets.", "BudgetEntryList"), "403": STAFF_ONLY},
            parameters=[
                query(name, f"Only budgets of this {name}.", {"type": "string"})
                for name in ("scope", "user", "group", "agent", "token")
            ],
            tags=["budgets"],
        ),
        "post": operation(
            "Make a budget (staff sessions)",
            {
                "201": answer("Made.", "BudgetEntry"),
                "400": BAD_REQUEST,
                "403": STAFF_ONLY,
                "409": error("`budget_exists`: one of this scope, target and period is there already."),
            },
            security=SESSION_WRITE,
            requestBody=body("BudgetCreate"),
            tags=["budgets"],
        ),
    },
    "api/budgets/<int:budget_id>/": {
        "patch": operation(
            "Change a budget's limits (null removes one; one stays)",
            {
                "200": answer("Changed.", "BudgetEntry"),
                "400": BAD_REQUEST,
                "403": STAFF_ONLY,
                "404": error("No such budget."),
            },
            security=SESSION_WRITE,
            requestBody=body("BudgetChange"),
            tags=["budgets"],
        ),
        "delete": operation(
            "Delete a budget",
            {"204": answer("Deleted."), "403": STAFF_ONLY, "404": error("No such budget.")},
            security=SESSION_WRITE,
            tags=["budgets"],
        ),
    },
    "api/tokens/<int:token_id>/": {
        "patch": operation(
            "Set or remove the token's budget (the owner's signed-in session only)",
            {
                "200": answer("The token.", "Token"),
                "400": BAD_REQUEST,
                "403": error("Asked with a bearer token (`forbidden`), or a session without CSRF (`csrf_failed`)."),
                "404": error("No such token of this user."),
            },
            security=SESSION_WRITE,
            requestBody=body("TokenChange"),
            tags=["tokens"],
        ),
        "delete": operation(
            "Revoke a token: it stops working at once, its sockets close",
            {"204": answer("Revoked."), "404": error("No such token.")},
            security=WRITE,
            tags=["tokens"],
        ),
    },
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
