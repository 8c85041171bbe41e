"""A database that does not answer gives a 503 the client can retry, in each route's shape,
even when it fails before any view runs (the session middleware's read); other failures stay 500."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.sessions.backends.db import SessionStore
from django.db import OperationalError
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(make_user):
    client = Client(raise_request_exception=False)
    client.force_login(make_user("dora"))
    return client


@pytest.fixture
def database_full(monkeypatch):
    def too_many(self):
        raise OperationalError("FATAL:  sorry, too many clients already")

    monkeypatch.setattr(SessionStore, "load", too_many)


def test_the_json_api_answers_503_with_retry_after(signed_in, database_full):
    response = signed_in.get("/api/conversations/")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response.json()["error"] == "unavailable"


def test_the_openai_endpoint_answers_in_openais_shape(signed_in, database_full):
    response = signed_in.get("/v1/models")
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "service_unavailable"
    assert response.json()["error"]["type"] == "api_error"


def test_a_run_endpoint_answers_in_the_run_error_shape(signed_in, database_full):
    response = signed_in.post(f"/api/conversations/{uuid.uuid4()}/messages/", {}, content_type="application/json")
    assert response.status_code == 503
    assert response.json() == {"error": {"code": "UNAVAILABLE", "message": response.json()["error"]["message"]}}


def test_a_page_answers_a_page(signed_in, database_full):
    response = signed_in.get("/")
    assert response.status_code == 503
    assert response["Content-Type"].startswith("text/html")
    assert b"cannot reach its database" in response.content


def test_any_other_failure_is_still_a_500(signed_in, monkeypatch):
    def broken(self):
        raise ValueError("a bug")

    monkeypatch.setattr(SessionStore, "load", broken)
    response = signed_in.get("/api/conversations/")
    assert response.status_code == 500
    assert "Retry-After" not in response
    assert response.json()["error"] == "server_error"
