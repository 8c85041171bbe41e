"""Shared fixtures: the fake OpenAI-compatible server and settings that point the app at it."""

from __future__ import annotations

import os

import pytest

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
    from chat import assistant

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
