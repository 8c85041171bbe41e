"""The answers Django gives when no view does: no URL pattern matches (404), a body it cannot parse
(400), a session request without its CSRF token (403), and the server failing under a request
(500). Under `/api/`, `/hooks/` and `/v1/` they come in the API's error shapes (a program reads JSON there,
and the OpenAPI document promises it: docs/protocol.md, "OpenAPI"); a page that does not exist
and the server failing get the site's own pages with a way home (templates/404.html, 500.html),
the 400 and CSRF refusals of a form Django's.

A database that does not answer (down, restarting, out of connections: "too many clients") is
neither the request's fault nor a bug in it, and may fail before any view runs (the session is
read by a middleware): 503 with Retry-After, in the shape of the route (the run endpoints' own
shape on theirs), so that programs and the page retry instead of reporting a server error.
Django has already logged the exception. Anything else stays a 500, in the same shapes.
"""

from __future__ import annotations

import sys

from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import Resolver404, resolve
from django.utils.translation import gettext
from django.views import csrf, defaults

from chat.doors.api import runs_api
from chat.doors.http.json_api import json_error
from chat.doors.openai.openai_shapes import openai_error
from chat.runtime.execution import DATABASE_OUTAGES

API_PREFIX, OPENAI_PREFIX, SHARE_PREFIX = "/api/", "/v1/", "/s/"
A2A_PREFIX = "/a2a/"  # A2A clients read JSON too (docs/protocol.md, "A2A agent")
HOOKS_PREFIX = "/hooks/"  # a trigger's URL answers other programs in the API's shape (docs/protocol.md, "Triggers")
RETRY_AFTER_SECONDS = 5
_RUN_VIEWS = {
    runs_api.conversation_messages,
    runs_api.conversation_cancel,
    runs_api.conversation_compact,
    runs_api.run_approval,
    runs_api.conversation_queue,
    runs_api.conversation_unqueue,
}


def _answer(request, status: int, code: str, message: str):
    if request.path.startswith(OPENAI_PREFIX):
        return openai_error(status, code, message)
    if request.path.startswith((API_PREFIX, HOOKS_PREFIX, A2A_PREFIX)):
        return json_error(status, code, message)
    return None


def not_found(request, exception=None):
    """handler404: no such route (a path parameter of the wrong form, say) is a JSON 404 too."""
    answer = _answer(request, 404, "not_found", "No such route.")
    if answer is not None:
        return answer
    # A shared link that is unknown, revoked or expired says so; its 404 is the same for each
    # (chat.doors.pages.shares), and the token in its address leaks to no site linked from the page.
    shared = request.path.startswith(SHARE_PREFIX)
    response = render(request, "404.html", {"shared_link": shared}, status=404)
    if shared:
        response["Referrer-Policy"] = "no-referrer"
    return response


def bad_request(request, exception=None):
    """handler400: a request Django refused before the view (a malformed multipart body)."""
    answer = _answer(request, 400, "bad_request", "The request is malformed.")
    return answer if answer is not None else defaults.bad_request(request, exception)


def csrf_failure(request, reason: str = ""):
    """CSRF_FAILURE_VIEW: a session request to `/api/` or `/v1/` without its CSRF token (a bearer
    request needs none) is told so in JSON; pages keep Django's."""
    message = "A session request needs the X-CSRFToken header (or use an API token: Authorization: Bearer)."
    answer = _answer(request, 403, "csrf_failed", message)
    return answer if answer is not None else csrf.csrf_failure(request, reason)


def _is_run_route(path: str) -> bool:
    try:
        return resolve(path).func in _RUN_VIEWS
    except Resolver404:
        return False


def server_error(request) -> HttpResponse:
    """handler500: called inside Django's `except`, so the exception is sys.exc_info()'s."""
    unavailable = isinstance(sys.exc_info()[1], DATABASE_OUTAGES)
    status = 503 if unavailable else 500
    message = (
        gettext("The server cannot reach its database right now; try again in a few seconds.")
        if unavailable
        else gettext("The server failed to answer this request.")
    )
    path = request.path_info
    if path.startswith(API_PREFIX) and _is_run_route(path):
        code = "UNAVAILABLE" if unavailable else "SERVER_ERROR"
        response = JsonResponse({"error": {"code": code, "message": message}}, status=status)
    elif path.startswith(OPENAI_PREFIX):
        response = openai_error(status, "service_unavailable" if unavailable else "server_error", message)
    elif path.startswith(API_PREFIX):
        response = json_error(status, "unavailable" if unavailable else "server_error", message)
    else:
        # Rendered without the request: its context processors would ask the database again.
        page = render_to_string("500.html", {"message": message, "status": status})
        response = HttpResponse(page, status=status)
    if unavailable:
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response
