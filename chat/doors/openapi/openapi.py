"""The OpenAPI 3.1 document of the HTTP API, served at `GET /api/schema/` (docs/protocol.md, "OpenAPI").

The paths and their path parameters are read from the URL patterns themselves, so the list
cannot drift from the router; what each route does (methods, bodies, answers) is described in
chat.doors.openapi.openapi_routes and its objects in chat.doors.openapi.openapi_schemas. A route under a documented
prefix that has no description, or a description whose route is gone, makes the build fail
(UndescribedRoute) rather than leave a route out of the document.
"""

from __future__ import annotations

import functools
import re

from django.http import JsonResponse
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.converters import IntConverter, PathConverter, SlugConverter, StringConverter, UUIDConverter
from django.views.decorators.http import require_http_methods

from chat.doors.openapi import openapi_routes
from chat.doors.openapi.openapi_account import ACCOUNT_ROUTES
from chat.doors.openapi.openapi_agui import AGUI_ROUTES, AGUI_SCHEMAS
from chat.doors.openapi.openapi_queue import QUEUE_ROUTES
from chat.doors.openapi.openapi_responses import RESPONSES_ROUTES, RESPONSES_SCHEMAS
from chat.doors.openapi.openapi_schedules import SCHEDULE_ROUTES, SCHEDULE_SCHEMAS
from chat.doors.openapi.openapi_schemas import SCHEMAS, SECURITY_SCHEMES
from chat.doors.openapi.openapi_triggers import TRIGGER_ROUTES, TRIGGER_SCHEMAS
from chat.doors.openapi.openapi_usage import USAGE_ROUTES, USAGE_SCHEMAS

# Every route under these is part of the public API; `v1/` is where the versioned one will live.
DOCUMENTED_PREFIXES = ("api/", "v1/")
# Routes outside the prefixes that programs call too (load balancers probe /healthz; a trigger's hook).
DOCUMENTED_ROUTES = frozenset({"healthz", "hooks/<uuid:trigger_id>/"})
API_VERSION = "1.0.0"
# What each route does, keyed by route: the two tables (the second, the whole account's).
ROUTES = {
    **openapi_routes.ROUTES,
    **ACCOUNT_ROUTES,
    **QUEUE_ROUTES,
    **SCHEDULE_ROUTES,
    **TRIGGER_ROUTES,
    **USAGE_ROUTES,
    **RESPONSES_ROUTES,
    **AGUI_ROUTES,
}

# Ordered by class: a subclass (PathConverter is a StringConverter) must come before its base.
CONVERTER_SCHEMAS: tuple[tuple[type, dict], ...] = (
    (UUIDConverter, {"type": "string", "format": "uuid"}),
    (IntConverter, {"type": "integer", "minimum": 0}),
    (SlugConverter, {"type": "string", "pattern": "^[-a-zA-Z0-9_]+$"}),
    (PathConverter, {"type": "string", "description": "A path: may hold `/`."}),
    (StringConverter, {"type": "string", "pattern": "^[^/]+$"}),
)
PARAMETER = re.compile(r"<(?:\w+:)?(\w+)>")
DESCRIPTION = """The HTTP API of agentsite (docs/protocol.md in the repository: "The JSON API" and what follows it).
Authenticate with the session cookie (and the `X-CSRFToken` header on POST, PATCH and DELETE)
or with `Authorization: Bearer <personal API token>`. Every error body is
`{"error": "<code>", "message": "<text>"}`. The conversation's live events come over the
WebSocket `/ws/conversations/{id}/`, which OpenAPI does not describe."""


class UndescribedRoute(Exception):
    """The route table and the descriptions disagree: a route is not described, or a description
    has no route."""


def routes(patterns, prefix: str = "", converters: dict | None = None) -> list[tuple[str, URLPattern, dict]]:
    """Every endpoint of a URL pattern list, includes walked: (the full route as Django writes it,
    the pattern, its converters by parameter name)."""
    found = []
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        known = {**(converters or {}), **getattr(pattern.pattern, "converters", {})}
        if isinstance(pattern, URLResolver):
            found.extend(routes(pattern.url_patterns, route, known))
        else:
            found.append((route, pattern, known))
    return found


def documented(route: str) -> bool:
    return route.startswith(DOCUMENTED_PREFIXES) or route in DOCUMENTED_ROUTES


def openapi_path(route: str) -> str:
    """`api/conversations/<uuid:conversation_id>/` -> `/api/conversations/{conversation_id}/`."""
    return "/" + PARAMETER.sub(r"{\1}", route)


def parameter_schema(converter) -> dict:
    for cls, schema in CONVERTER_SCHEMAS:
        if isinstance(converter, cls):
            return dict(schema)
    raise UndescribedRoute(f"no schema for the path converter {type(converter).__name__}")


def path_item(route: str, pattern: URLPattern, converters: dict) -> dict:
    """The OpenAPI path item of one route: its described methods, with the path parameters that
    the route's converters define."""
    parameters = [
        {"name": name, "in": "path", "required": True, "schema": parameter_schema(converters[name])}
        for name in PARAMETER.findall(route)
    ]
    item: dict = {"parameters": parameters} if parameters else {}
    for method, operation in ROUTES[route].items():
        name = (pattern.name or route).replace("-", "_").replace("/", "_")
        item[method] = {"operationId": f"{method}_{name}", **operation}
    return item


def openapi_document(patterns) -> dict:
    """The OpenAPI 3.1 document of the documented routes of `patterns` (a URLconf's list)."""
    table = [entry for entry in routes(patterns) if documented(entry[0])]
    undescribed = sorted(route for route, _, _ in table if route not in ROUTES)
    stale = sorted(set(ROUTES) - {route for route, _, _ in table})
    if undescribed or stale:
        raise UndescribedRoute(
            f"routes without a description in chat/doors/openapi/openapi_routes.py: {undescribed}; "
            f"descriptions without a route: {stale}"
        )
    return {
        "openapi": "3.1.0",
        "info": {"title": "agentsite", "version": API_VERSION, "description": DESCRIPTION},
        "paths": {openapi_path(route): path_item(route, pattern, known) for route, pattern, known in table},
        "components": {
            "schemas": {
                **SCHEMAS,
                **SCHEDULE_SCHEMAS,
                **TRIGGER_SCHEMAS,
                **USAGE_SCHEMAS,
                **RESPONSES_SCHEMAS,
                **AGUI_SCHEMAS,
            },
            "securitySchemes": SECURITY_SCHEMES,
        },
    }


@functools.cache
def served_document() -> dict:
    """The document of the site's own URLconf, built once per process: routes change only with the code."""
    return openapi_document(get_resolver().url_patterns)


@require_http_methods(["GET"])
def schema(request):
    """Open to anyone, as FastAPI's and LangGraph's are: it describes the routes every client can
    read in the docs, and holds no data."""
    return JsonResponse(served_document())
