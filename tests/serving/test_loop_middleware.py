"""The middleware chain in async mode (serving.loop_middleware), as daphne runs it: Django's
AsyncClient goes through the ASGI handler, so every request here takes the async path.

Under ASGI the whole chain must be able to run on the loop (one sync-only middleware puts every
request in a thread until its view returns); the database work of async views and middleware runs
on the request database threads, which keep their connections, never on a thread made for the
request; and what the sync chain did still holds: CSRF for sessions, none for bearer tokens, a
session saved, messages kept, the account's language. Around the chain, the handler
(serving.loop_handler) sends Django's request signals on the loop, not from a thread it makes
for the request."""

from __future__ import annotations

import threading

import orjson
import pytest
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.handlers.asgi import ASGIHandler
from django.core.signals import request_finished, request_started
from django.db.backends.utils import CursorWrapper
from django.test import AsyncClient
from django.utils.module_loading import import_string

from chat.accounts import token_lockout, tokens
from chat.accounts.account import account_language_save
from chat.accounts.tokens import token_create
from chat.conversations.services import conversation_create
from serving import loop_middleware
from serving.loop_middleware import REQUEST_DB_THREADS, django_names
from tests.asgi_http import RawStream
from tests.fakellm import text_reply

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "a-long-pass-phrase-1"


def test_every_middleware_runs_in_async_mode_and_so_does_the_chain():
    assert [m for m in settings.MIDDLEWARE if not getattr(import_string(m), "async_capable", False)] == []
    handler = ASGIHandler()
    assert handler._middleware_chain is not None
    assert __import__("asyncio").iscoroutinefunction(handler._middleware_chain)


def test_the_deployment_checks_see_the_django_classes_the_chain_runs():
    # Django's checks find its middleware by dotted name (chat.checks runs them on these names).
    names = django_names(list(settings.MIDDLEWARE))
    for django_class in (
        "django.middleware.security.SecurityMiddleware",
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "django.middleware.clickjacking.XFrameOptionsMiddleware",
    ):
        assert django_class in names
        assert django_class not in settings.MIDDLEWARE  # the chain runs the subclass
    assert "chat.accounts.bearer.BearerTokenMiddleware" in names  # ours keep their names


def bearer_header(value: str) -> dict:
    return {"Authorization": f"Bearer {value}"}


def _user(name="loop", language=""):
    user = get_user_model().objects.create_user(name, password=PASSWORD)
    if language:
        account_language_save(user_id=user.pk, language=language)
    return user


async def test_a_bearer_request_reads_the_database_on_the_request_threads(monkeypatch):
    user = await sync_to_async(_user)()
    _, value = await sync_to_async(token_create)(user=user, name="t")
    threads = []
    real = tokens.tokens_users

    def spy(values):
        threads.append(threading.current_thread().name)
        return real(values)

    monkeypatch.setattr(token_lockout, "tokens_users", spy)  # a group's token look-up (token_checks)
    client = AsyncClient()
    for _ in range(REQUEST_DB_THREADS + 2):
        assert (await client.get("/api/usage/", headers=bearer_header(value))).status_code == 200
    # Long-lived threads of a fixed pool (each keeps its connection), not one per request.
    assert threads and all(name.startswith("request-db") for name in threads), threads
    assert len(set(threads)) <= REQUEST_DB_THREADS


async def test_csrf_holds_for_a_session_in_async_mode_and_not_for_a_token():
    user = await sync_to_async(_user)()
    _, value = await sync_to_async(token_create)(user=user, name="t")
    session = AsyncClient(enforce_csrf_checks=True)
    await sync_to_async(session.force_login)(user)
    refused = await session.post("/api/conversations/", {}, content_type="application/json")
    assert refused.status_code == 403
    token = AsyncClient(enforce_csrf_checks=True)
    created = await token.post("/api/conversations/", {}, content_type="application/json", headers=bearer_header(value))
    assert created.status_code == 201
    # A form POST (its token in the body, parsed in the request's thread) passes with the token.
    page = await session.get("/account/")
    csrf = page.cookies["csrftoken"].value
    saved = await session.post(
        "/account/", {"display_name": "Async Ann", "email": "", "language": "", "csrfmiddlewaretoken": csrf}
    )
    assert saved.status_code in (200, 302)
    settings_row = await sync_to_async(lambda: user.account_settings.display_name)()
    assert settings_row == "Async Ann"


async def test_a_sign_in_saves_its_session_in_async_mode_and_the_next_request_is_signed_in():
    await sync_to_async(_user)(name="signer")
    client = AsyncClient()
    page = await client.get("/accounts/login/")
    assert page.status_code == 200
    signed = await client.post("/accounts/login/", {"username": "signer", "password": PASSWORD})
    assert signed.status_code == 302
    assert (await client.get("/api/usage/")).status_code == 200


async def test_the_saved_language_applies_to_session_and_token_requests_alike():
    user = await sync_to_async(_user)(language="zh-hans")
    _, value = await sync_to_async(token_create)(user=user, name="t")
    await sync_to_async(conversation_create)(owner=user)
    assert (await AsyncClient().get("/api/usage/", headers=bearer_header(value)))["Content-Language"] == "zh-hans"
    session = AsyncClient()
    await sync_to_async(session.force_login)(user)
    assert (await session.get("/api/usage/"))["Content-Language"] == "zh-hans"
    plain = await sync_to_async(_user)(name="plain")
    _, other = await sync_to_async(token_create)(user=plain, name="t")
    assert (await AsyncClient().get("/api/usage/", headers=bearer_header(other)))["Content-Language"] == "en"


async def test_the_handler_sends_the_request_signals_on_the_loop_once_each(registry):
    """Django's handler sent request_started, and closed the response (request_finished), from
    a thread it made for each request, joined by yet another: two thread starts a request."""
    user = await sync_to_async(_user)()
    _, value = await sync_to_async(token_create)(user=user, name="t")
    sent: list[tuple[str, str]] = []

    def on_started(sender, **kwargs):
        sent.append(("started", threading.current_thread().name))

    def on_finished(sender, **kwargs):
        sent.append(("finished", threading.current_thread().name))

    request_started.connect(on_started)
    request_finished.connect(on_finished)
    try:
        request = RawStream("/v1/models", [(b"authorization", f"Bearer {value}".encode())])
        assert (await request.open())["status"] == 200
        assert b'"default"' in await request.rest()
        await request.close()
    finally:
        request_started.disconnect(on_started)
        request_finished.disconnect(on_finished)
    loop_thread = threading.current_thread().name
    assert sent == [("started", loop_thread), ("finished", loop_thread)]


class Trips:
    """The trips to the request database threads, and the queries run there."""

    def __init__(self, monkeypatch):
        self.trips, self.queries = 0, []
        real_submit, real_execute = loop_middleware._request_db.submit, CursorWrapper._execute

        def submit(*args, **kwargs):
            self.trips += 1
            return real_submit(*args, **kwargs)

        def execute(cursor, sql, *args):
            if threading.current_thread().name.startswith("request-db"):
                self.queries.append(sql)
            return real_execute(cursor, sql, *args)

        monkeypatch.setattr(loop_middleware._request_db, "submit", submit)
        monkeypatch.setattr(CursorWrapper, "_execute", execute)


async def _answered(path: str, value: str, body: dict | None = None) -> tuple[int, bytes]:
    request = RawStream(path, [(b"authorization", f"Bearer {value}".encode())], body=body)
    status = (await request.open())["status"]
    content = await request.rest()
    await request.close()
    return status, content


async def test_a_message_posted_with_a_token_costs_two_queries_besides_its_start(registry, llm_settings, monkeypatch):
    """The token (its user and settings along), then the conversation: a trip and a query each.
    The run starts in the batched start every door shares, which gives the 202 its seq."""
    user = await sync_to_async(_user)()
    _, value = await sync_to_async(token_create)(user=user, name="t")
    conversation = await sync_to_async(conversation_create)(owner=user)
    llm_settings.script(text_reply("ok"))
    assert (await _answered("/api/usage/", value))[0] == 200  # the token's last use is written (once a minute)
    trips = Trips(monkeypatch)
    status, body = await _answered(f"/api/conversations/{conversation.pk}/messages/", value, {"content": "hi"})
    assert status == 202 and orjson.loads(body)["seq"] == 1
    assert (trips.trips, len(trips.queries)) == (2, 2), trips.queries


async def test_a_streamed_completion_costs_two_queries_besides_its_start(registry, llm_settings, monkeypatch):
    """The token, then the new conversation; its stream joined before the run and reads nothing."""
    user = await sync_to_async(_user)()
    _, value = await sync_to_async(token_create)(user=user, name="t")
    llm_settings.script(text_reply("ok"))
    assert (await _answered("/api/usage/", value))[0] == 200
    trips = Trips(monkeypatch)
    body = {"model": "default", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    status, content = await _answered("/v1/chat/completions", value, body)
    assert status == 200 and content.endswith(b"data: [DONE]\n\n")
    assert (trips.trips, len(trips.queries)) == (2, 2), trips.queries


async def test_blocking_views_run_on_a_kept_thread_that_keeps_its_connection(registry, monkeypatch):
    """Django made a thread for every request, whose first query opened a database connection of
    its own, left to the garbage collector (on PostgreSQL a backend process per request)."""
    user = await sync_to_async(_user)()
    _, value = await sync_to_async(token_create)(user=user, name="t")
    seen: list[tuple[str, int]] = []
    real_execute = CursorWrapper._execute

    def execute(cursor, sql, *args):
        if '"chat_conversation"' in sql:  # the view's own query
            seen.append((threading.current_thread().name, id(cursor.db.connection)))
        return real_execute(cursor, sql, *args)

    monkeypatch.setattr(CursorWrapper, "_execute", execute)
    for _ in range(5):
        status, _ = await _answered("/api/conversations/", value)  # a sync view
        assert status == 200
    names = {name for name, _ in seen}
    assert names and all(name.startswith("request_") for name in names), names  # lent threads
    assert len(names) == 1  # one after the other: the same kept thread each time
    assert len({connection for _, connection in seen}) == 1  # and its one connection


def test_threads_beyond_those_kept_close_their_connection_and_end():
    from django.db import connection, connections

    from serving.loop_handler import RequestThreads

    threads = RequestThreads(keep=2)
    contexts = [ThreadSensitiveContext() for _ in range(4)]
    lent = [threads.lend(context) for context in contexts]
    opened = []

    def open_one():
        connection.ensure_connection()
        opened.append(connections["default"])  # this thread's own wrapper (not the proxy)

    for thread in lent:
        thread.submit(open_one).result()
    for context, thread in zip(contexts, lent):
        threads.take_back(context, thread)
    for thread in lent:
        thread.submit(lambda: None).result() if thread in threads.idle else thread.shutdown(wait=True)
    assert threads.idle == lent[:2]
    assert [wrapper.connection is None for wrapper in opened] == [False, False, True, True]
    for thread in threads.idle:
        thread.submit(lambda: connection.close()).result()
        thread.shutdown()


def test_past_the_limit_a_request_works_on_the_overflow_thread():
    """At most `limit` lent threads run at once (each holds a database connection): a request
    lent one past them does all its blocking work on the one overflow thread, and an ended thread
    makes room again."""
    from serving.loop_handler import RequestThreads

    threads = RequestThreads(keep=0, limit=2)
    contexts = [ThreadSensitiveContext() for _ in range(4)]
    lent = [threads.lend(context) for context in contexts]
    release = threading.Event()

    def held() -> str:
        release.wait(5)
        return threading.current_thread().name

    running = [thread.submit(held) for thread in lent]
    again = lent[3].submit(lambda: threading.current_thread().name)  # the same request's next call
    release.set()
    names = [future.result(5) for future in running]
    assert [name.startswith("request-overflow") for name in names] == [False, False, True, True]
    assert again.result(5) == names[3]
    assert threads.started == 2
    for context, thread in zip(contexts, lent):
        threads.take_back(context, thread)
    assert threads.started == 0  # none kept: both ended
    context = ThreadSensitiveContext()
    thread = threads.lend(context)
    assert not thread.submit(lambda: threading.current_thread().name).result(5).startswith("request-overflow")
    threads.take_back(context, thread)
