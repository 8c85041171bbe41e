"""What a request gets when the server fails under it (`handler500`, agentsite/urls.py).

A database that does not answer (down, restarting, out of connections: "too many clients") is
neither the request's fault nor a bug in it, and may fail before any view runs (the session is
read by a middleware): 503 with Retry-After, in the shape of the route that was asked (OpenAI's
on /v1/, the run endpoints' on theirs, the JSON API's on the rest of /api/, a page elsewhere),
so that programs and the page retry instead of reporting a server error. Django has already
logged the exception. Anything else stays a 500, in the same shapes.
"""

from __future__ import annotations

import sys

from django.http import HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.urls import Resolver404, resolve
from django.utils.translation import gettext

from chat.runtime.execution import DATABASE_OUTAGES
from chat.web import runs_api
from chat.web.json_api import json_error
from chat.web.openai_shapes import openai_error

RETRY_AFTER_SECONDS = 5
_RUN_VIEWS = {runs_api.conversation_messages, runs_api.conversation_cancel, runs_api.run_approval}


def _is_run_route(path: str) -> bool:
    try:
        return resolve(path).func in _RUN_VIEWS
    except Resolver404:
        return False


def server_error(request) -> HttpResponse:
    unavailable = isinstance(sys.exc_info()[1], DATABASE_OUTAGES)
    status = 503 if unavailable else 500
    message = (
        gettext("The server cannot reach its database right now; try again in a few seconds.")
        if unavailable
        else gettext("The server failed to answer this request.")
    )
    path = request.path_info
    if path.startswith("/v1/"):
        response = openai_error(status, "service_unavailable" if unavailable else "server_error", message)
    elif path.startswith("/api/") and _is_run_route(path):
        code = "UNAVAILABLE" if unavailable else "SERVER_ERROR"
        response = JsonResponse({"error": {"code": code, "message": message}}, status=status)
    elif path.startswith("/api/"):
        response = json_error(status, "unavailable" if unavailable else "server_error", message)
    else:
        # Rendered without the request: its context processors would ask the database again.
        response = HttpResponse(render_to_string("error.html", {"message": message}), status=status)
    if unavailable:
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response
