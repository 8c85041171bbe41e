"""The OpenAPI document (docs/protocol.md, "OpenAPI"): a valid OpenAPI 3.1 document, served to
anyone at /api/schema/, in step with the route table (every /api/ route with exactly the methods
its view takes, and no path the table does not have; path parameters typed as their converters),
and true of what the endpoints really answer. The last tests prove that the in-step checks fail
when the table and the document part."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.http import HttpResponse
from django.test import Client
from django.urls import URLResolver, get_resolver, include, path
from jsonschema import Draft202012Validator
from openapi_spec_validator import OpenAPIV31SpecValidator, validate

from chat import urls
from chat.conversations.services import conversation_create
from chat.doors.openapi import openapi
from chat.doors.openapi.openapi import UndescribedRoute, openapi_document, served_document
from chat.models import Run
from chat.runs.starts import run_start

pytestmark = pytest.mark.django_db


def _table(patterns, prefix: str = "") -> list[str]:
    """Every route of a URLconf, includes walked, read here without the walker under test."""
    found = []
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        found.extend(_table(pattern.url_patterns, route) if isinstance(pattern, URLResolver) else [route])
    return found


# The site's routes that the document must hold: /api/ (and /v1/ once it exists), /healthz.
API_ROUTES = sorted(
    r
    for r in _table(get_resolver().url_patterns)
    if r.startswith(("api/", "v1/")) or r in {"healthz", "hooks/<uuid:trigger_id>/"}
)
SAMPLES = {"uuid": str(uuid.uuid4()), "int": "1", "path": "notes/a.txt", "str": "x", "slug": "x"}
CONVERTER_SCHEMAS = {"uuid": {"type": "string", "format": "uuid"}, "int": "integer", "path": "string", "str": "string"}
METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


def _openapi_path(route: str) -> str:
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)


def _sample_url(route: str) -> str:
    return "/" + re.sub(r"<(?:(\w+):)?\w+>", lambda m: SAMPLES[m.group(1) or "str"], route)


def _allowed(client: Client, route: str) -> set[str]:
    """The methods a route's view takes, from the `Allow` header of its 405: TRACE is a method
    no view of the API takes (and the CSRF check lets through, as a safe method)."""
    response = client.generic("TRACE", _sample_url(route))
    assert response.status_code == 405, f"{route} answered TRACE with {response.status_code}"
    return {method.strip().lower() for method in response["Allow"].split(",")}


def _documented_methods(document: dict, route: str) -> set[str]:
    return set(document["paths"][_openapi_path(route)]) & METHODS


def _in_step_problems(document: dict, route_list: list[str]) -> list[str]:
    """What the document and a route table disagree on, as readable lines (empty: in step)."""
    expected = {_openapi_path(route) for route in route_list}
    return [f"not documented: {p}" for p in sorted(expected - set(document["paths"]))] + [
        f"no such route: {p}" for p in sorted(set(document["paths"]) - expected)
    ]


def _validator(document: dict, status: str, method: str, route: str) -> Draft202012Validator:
    """A JSON Schema validator of one documented answer; `$ref`s resolve against the document's
    components, carried along in the root schema."""
    answer = document["paths"][_openapi_path(route)][method]["responses"][status]
    schema = {**answer["content"]["application/json"]["schema"], "components": document["components"]}
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def _check(response, method: str, route: str) -> dict:
    body = json.loads(b"".join(response))  # a streamed body too (the events route)
    errors = [
        e.message for e in _validator(served_document(), str(response.status_code), method, route).iter_errors(body)
    ]
    assert errors == [], f"{method.upper()} {route} {response.status_code}: {errors} in {body}"
    return body


# -- the document ------------------------------------------------------------------------------
def test_the_document_builds_from_the_route_table():
    """Built when first asked for (not at import), so that a route without a description fails
    here, by name, with UndescribedRoute saying which."""
    assert served_document()["paths"]


def test_the_document_is_valid_openapi_3_1():
    document = served_document()
    assert document["openapi"] == "3.1.0"
    validate(document, cls=OpenAPIV31SpecValidator)
    schemes = document["components"]["securitySchemes"]
    assert set(schemes) == {"sessionCookie", "csrfToken", "bearerAuth"}
    assert (schemes["bearerAuth"]["type"], schemes["bearerAuth"]["scheme"]) == ("http", "bearer")


def test_served_to_anyone_at_api_schema(client):
    response = client.get("/api/schema/")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json() == served_document()
    assert client.post("/api/schema/").status_code == 405


def test_every_route_of_the_table_is_in_the_document_and_no_other():
    in_chat_urls = {str(p.pattern) for p in urls.urlpatterns if str(p.pattern).startswith("api/")}
    assert in_chat_urls <= set(API_ROUTES) and "healthz" in API_ROUTES  # the reader still reads
    assert _in_step_problems(served_document(), API_ROUTES) == []


@pytest.mark.parametrize("route", API_ROUTES)
def test_every_method_the_view_takes_is_documented_and_no_other(client, route):
    assert _documented_methods(served_document(), route) == _allowed(client, route)


@pytest.mark.parametrize("route", [route for route in API_ROUTES if "<" in route])
def test_path_parameters_are_typed_as_their_converters(route):
    item = served_document()["paths"][_openapi_path(route)]
    converters = dict((name, kind) for kind, name in re.findall(r"<(\w+):(\w+)>", route))
    assert [p["name"] for p in item["parameters"]] == re.findall(r"<\w+:(\w+)>", route)
    for parameter in item["parameters"]:
        assert parameter["in"] == "path" and parameter["required"] is True
        expected = CONVERTER_SCHEMAS[converters[parameter["name"]]]
        if isinstance(expected, dict):
            assert expected.items() <= parameter["schema"].items()
        else:
            assert parameter["schema"]["type"] == expected


def test_every_operation_says_who_may_call_it():
    open_ones = []
    for where, item in served_document()["paths"].items():
        for method in set(item) & METHODS:
            operation = item[method]
            assert operation["operationId"] and operation["summary"]
            if operation["security"] == []:
                open_ones.append(f"{method} {where}")
            else:
                assert "401" in operation["responses"], (method, where)
                if method != "get":  # an unsafe method by session needs the CSRF header
                    assert {"sessionCookie": [], "csrfToken": []} in operation["security"]
    # A trigger's hook takes no session or token: its own secret (docs/protocol.md, "Triggers").
    assert sorted(open_ones) == ["get /api/schema/", "get /healthz", "post /hooks/{trigger_id}/"]


# -- real answers against the documented schemas -----------------------------------------------
@pytest.fixture
def alice(make_user):
    return make_user("alice")


@pytest.fixture
def api(alice):
    client = Client()
    client.force_login(alice)
    return client


def test_real_answers_match_the_documented_schemas(api, alice, client):
    conversations = "api/conversations/"
    one = "api/conversations/<uuid:conversation_id>/"
    created = _check(
        api.post("/" + conversations, {"title": "Plans"}, content_type="application/json"), "post", conversations
    )
    _check(api.post("/" + conversations, content_type="application/json"), "post", conversations)
    page = _check(api.get("/" + conversations + "?limit=1"), "get", conversations)
    assert page["next"] is not None
    _check(api.get(f"/{conversations}?q=plans"), "get", conversations)  # with a snippet
    _check(api.get(f"/{conversations}{created['id']}/"), "get", one)
    _check(
        api.patch(f"/{conversations}{created['id']}/", {"viewed_seq": None}, content_type="application/json"),
        "patch",
        one,
    )
    _check(api.get(f"/{conversations}{uuid.uuid4()}/"), "get", one)  # 404, the error shape
    _check(api.post("/" + conversations, "[1]", content_type="application/json"), "post", conversations)  # 400
    _check(client.get("/" + conversations), "get", conversations)  # 401, signed out
    _check(api.get("/api/usage/"), "get", "api/usage/")
    _check(api.get("/api/agents/"), "get", "api/agents/")
    _check(api.get(f"/{conversations}{created['id']}/files/"), "get", "api/conversations/<uuid:conversation_id>/files/")
    _check(api.get("/healthz"), "get", "healthz")


def test_token_answers_match_the_documented_schemas(api):
    made = _check(
        api.post("/api/tokens/", {"name": "ci", "expiresInDays": 30}, content_type="application/json"),
        "post",
        "api/tokens/",
    )
    _check(api.post("/api/tokens/", {"name": ""}, content_type="application/json"), "post", "api/tokens/")  # 400
    listed = _check(api.get("/api/tokens/"), "get", "api/tokens/")
    assert [t["id"] for t in listed["tokens"]] == [made["id"]]
    bearer = Client(HTTP_AUTHORIZATION=f"Bearer {made['token']}")
    _check(bearer.post("/api/tokens/", {"name": "x"}, content_type="application/json"), "post", "api/tokens/")  # 403
    _check(api.delete("/api/tokens/999999/"), "delete", "api/tokens/<int:token_id>/")  # 404


def test_run_answers_match_the_documented_schemas(api, alice):
    conversation = conversation_create(owner=alice, title="t")
    run, _ = run_start(conversation=conversation, user=alice, content="hi", model="m", worker="")
    base = f"/api/conversations/{conversation.pk}"
    _check(api.get(f"{base}/events/"), "get", "api/conversations/<uuid:conversation_id>/events/")
    feedback = "api/runs/<uuid:run_id>/feedback/"
    _check(
        api.post(f"/api/runs/{run.pk}/feedback/", {"rating": 1}, content_type="application/json"), "post", feedback
    )  # 409
    Run.objects.filter(pk=run.pk).update(status="succeeded")
    _check(
        api.post(f"/api/runs/{run.pk}/feedback/", {"rating": -1, "comment": "no"}, content_type="application/json"),
        "post",
        feedback,
    )
    _check(api.get(f"{base}/feedback/"), "get", "api/conversations/<uuid:conversation_id>/feedback/")
    _check(api.get(f"/api/runs/{run.pk}/trace/"), "get", "api/runs/<uuid:run_id>/trace/")  # 404: not staff
    exported = _check(api.get(f"{base}/export/"), "get", "api/conversations/<uuid:conversation_id>/export/")
    imported = api.post("/api/conversations/import/", exported, content_type="application/json")
    _check(imported, "post", "api/conversations/import/")  # 400: the run is unfinished
    get_user_model().objects.filter(pk=alice.pk).update(is_staff=True)
    _check(api.get(f"/api/runs/{run.pk}/trace/"), "get", "api/runs/<uuid:run_id>/trace/")


def test_answers_given_before_any_view_take_the_documented_shapes(api, alice, client):
    """A path no route matches (an id that is not a UUID) and a multipart body Django cannot parse
    answer in the API's shapes, as the document says (schemathesis found them as HTML)."""
    conversation = conversation_create(owner=alice, title="t")
    messages = "api/conversations/<uuid:conversation_id>/messages/"
    body = _check(
        api.post("/api/conversations/not-a-uuid/messages/", {}, content_type="application/json"), "post", messages
    )
    assert body == {"error": "not_found", "message": "No such route."}
    _check(api.get("/api/conversations/not-a-uuid/"), "get", "api/conversations/<uuid:conversation_id>/")
    answer = api.get("/v1/nothing-here")
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"
    assert client.get("/no-such-page/")["Content-Type"].startswith("text/html")  # pages keep Django's
    files = "api/conversations/<uuid:conversation_id>/files/"
    broken = api.generic(
        "POST", f"/api/conversations/{conversation.pk}/files/", b"--b\r\nno headers", "multipart/form-data"
    )
    assert _check(broken, "post", files)["message"] == "the multipart body is malformed"


# -- the checks can fail -----------------------------------------------------------------------
def _view(request):
    return HttpResponse()


def test_a_route_without_a_description_fails_the_build():
    with pytest.raises(UndescribedRoute, match=r"api/extra/<int:n>/"):
        openapi_document([*urls.urlpatterns, path("api/extra/<int:n>/", _view)])


def test_a_v1_route_included_from_elsewhere_must_be_described_too():
    with pytest.raises(UndescribedRoute, match=r"v1/conversations/"):
        openapi_document([*urls.urlpatterns, path("v1/", include([path("conversations/", _view)]))])


def test_a_description_without_a_route_fails_the_build(monkeypatch):
    monkeypatch.setattr(openapi, "ROUTES", {**openapi.ROUTES, "api/gone/": {"get": {}}})
    with pytest.raises(UndescribedRoute, match=r"api/gone/"):
        openapi_document(urls.urlpatterns)


def test_the_in_step_check_fails_on_a_fake_route_or_a_missing_path():
    whole = served_document()
    assert _in_step_problems(whole, [*API_ROUTES, "api/extra/"]) == ["not documented: /api/extra/"]
    document = {**whole, "paths": {k: v for k, v in whole["paths"].items() if k != "/api/usage/"}}
    assert _in_step_problems(document, API_ROUTES) == ["not documented: /api/usage/"]
    assert _in_step_problems(whole, [r for r in API_ROUTES if r != "api/usage/"]) == ["no such route: /api/usage/"]


def test_the_method_check_fails_when_a_method_is_not_documented(client):
    route = "api/conversations/<uuid:conversation_id>/"
    whole = served_document()
    item = {k: v for k, v in whole["paths"][_openapi_path(route)].items() if k != "delete"}
    document = {**whole, "paths": {**whole["paths"], _openapi_path(route): item}}
    assert _documented_methods(document, route) != _allowed(client, route)


def test_an_answer_unlike_its_schema_is_caught():
    validator = _validator(served_document(), "201", "post", "api/conversations/")
    good = {"id": str(uuid.uuid4()), "title": "", "agent": "default", "running": False, "viewed_seq": None}
    good |= {"titleSource": "default", "pinned": False, "archived": False}
    good |= {"created_at": "2026-12-01T08:24:46.315965+00:00", "updated_at": "2026-12-01T08:24:46+00:00"}
    assert validator.is_valid(good)
    assert not validator.is_valid({**good, "id": "not-a-uuid"})
    assert not validator.is_valid({**good, "updated_at": "yesterday"})
    assert not validator.is_valid({**good, "surprise": 1})  # a new field must be documented
    assert not validator.is_valid({**good, "titleSource": "someone"})
    assert not validator.is_valid({**good, "pinned": "yes"})


def test_the_responses_api_paths_are_listed():
    paths = served_document()["paths"]
    assert {
        "/v1/responses",
        "/v1/responses/{response_id}",
        "/v1/responses/{response_id}/cancel",
        "/v1/responses/{response_id}/input_items",
    } <= set(paths)
    assert set(paths["/v1/responses/{response_id}"]) >= {"get", "delete"}
