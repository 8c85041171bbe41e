"""The 400 and 404 answers Django gives before any view runs (no URL pattern matches, a multipart
body it cannot parse), in the API's error shapes under `/api/` and `/v1/`: a program reads JSON
there, and the OpenAPI document promises it (docs/protocol.md, "OpenAPI"). Pages keep Django's."""

from __future__ import annotations

from django.views import csrf, defaults

from chat.web.json_api import json_error
from chat.web.openai_shapes import openai_error

API_PREFIX, OPENAI_PREFIX = "/api/", "/v1/"


def _answer(request, status: int, code: str, message: str):
    if request.path.startswith(OPENAI_PREFIX):
        return openai_error(status, code, message)
    if request.path.startswith(API_PREFIX):
        return json_error(status, code, message)
    return None


def not_found(request, exception=None):
    """handler404: no such route (a path parameter of the wrong form, say) is a JSON 404 too."""
    answer = _answer(request, 404, "not_found", "No such route.")
    return answer if answer is not None else defaults.page_not_found(request, exception)


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
