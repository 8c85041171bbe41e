"""Shared fixtures: the fake OpenAI-compatible server and settings that point the app at it."""

from __future__ import annotations

import os

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from chat.accounts import budgets
from chat.conversations.services import conversation_create
from chat.runtime import build
from chat.runtime.registry import get_registry
from tests.fakellm import FakeLLM


@pytest.fixture(scope="session")
def fake_llm_server():
    with FakeLLM() as fake:
        yield fake


@pytest.fixture
def fake_llm(fake_llm_server):
    fake_llm_server.reset()
    yield fake_llm_server
    fake_llm_server.reset()


@pytest.fixture
def llm_settings(settings, fake_llm):
    """Django settings aimed at the fake model, with no waiting between retries."""
    from chat.runtime import build as assistant

    settings.AGENT_MODEL = "fake-model"
    settings.OPENAI_API_KEY = "test-key"
    settings.OPENAI_BASE_URL = fake_llm.base_url
    settings.AGENT_RETRY_INTERVAL = 0
    assistant._client.cache_clear()
    yield fake_llm
    # The client is closed by the `registry` fixture, inside the test's event loop.


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI a skipped test is a failure: a missing chromium or bubblewrap must not pass quietly."""
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped in CI, which must run every test: {reason}"


@pytest.fixture(scope="session", autouse=True)
def _end_stray_database_sessions(django_db_setup, django_db_blocker):
    """Runs keep persistent connections in their own threads (the ORM thread, the event
    writer); on PostgreSQL those would keep the test database from being dropped."""
    yield
    from django.db import connection

    # pytest-django sets up only the databases the collected tests use.
    if connection.vendor == "postgresql" and connection.settings_dict["NAME"].startswith("test_"):
        with django_db_blocker.unblock(), connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )


@pytest.fixture
def make_user():
    def make(name: str = "alice"):
        return get_user_model().objects.create_user(username=name, password="pw-for-tests-123")

    return make


@pytest.fixture
async def registry():
    registry = get_registry()
    yield registry
    await registry.wait_idle()
    await build.close_client()  # its connections belong to this test's event loop
    await registry.close()
    # The ORM thread's connection would keep PostgreSQL from dropping the test database.
    await sync_to_async(lambda: connection.close())()


@pytest.fixture
def conversation(make_user):
    return conversation_create(owner=make_user("alice"), title="test")


@pytest.fixture
def alice(make_user):
    """A signed-up user, the owner in the API tests."""
    return make_user("alice")


@pytest.fixture
def api(alice):
    """A test client signed in as alice."""
    client = Client()
    client.force_login(alice)
    return client


@pytest.fixture(autouse=True)
def _no_budget_met():
    """Each test starts as a process that has met no budget yet (no head start after one)."""
    budgets._seen["budgets"] = False
