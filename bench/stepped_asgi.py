"""The project's ASGI application with each run start's steps timed (bench/burst_trace.py): what
`Stack(server="daphne-stepped")` serves, `daphne bench.stepped_asgi:application`.

Wrappers around the functions a run start passes through record the wall clock (which the
bench's clients and fake model share) per conversation, at: the message handed to the start
(`received`), the group's trip to the ORM thread (`orm_in`, `orm_out`, with the group's size),
the run's task (`task`), its user_message published (`user_message_published`), the model
request sent (`request_sent`) and its response headers (`headers`), the first delta handed to
the group writer (`first_delta_submitted`), the writer's round that stores it
(`first_delta_round_in`, `_out`) and the delta published (`first_delta_published`); and every
write transaction's wait at BEGIN, its turn and SQLite's lock (`begins`: thread, start, end).
`GET /__bench__/steps` answers them. Only this bench application wraps anything: the project's
own server times nothing.

An HTTP request (bench/door_trace.py) adds its arrival at the application (`http_in`), its bearer
token checked (`token_checked`), its last grouped look-up back (`looked_up`) and, per run, the
request's trips to the request database threads before its start (`hops`: queued, began, ended;
serving.loop_middleware.request_db). `POST /__bench__/profile` with `on` or `off`
profiles the event loop's thread (cProfile); `off` answers the profile's top functions.
"""

from __future__ import annotations

import contextvars
import cProfile
import io
import json
import pstats
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

from agentsite.asgi import application as project
from agentsite.sqlite import base as sqlite_base
from chat.accounts import bearer
from chat.agent import batching, llm
from chat.runs import engine, starter
from chat.runtime import execution, head_start, registry, sink, writer
from serving import loop_middleware

from .burst_trace import PROFILE_PATH, STEPS_PATH

_lock = threading.Lock()
_steps: dict[str, dict[str, float]] = defaultdict(dict)
_groups: list[dict] = []
_rounds: list[dict] = []  # the group writer's rounds
_begins: list[dict] = []  # write transactions' BEGIN, the wait for their turn included
_conversation: contextvars.ContextVar[str] = contextvars.ContextVar("bench_conversation", default="")
# An HTTP request's arrival and its trips to the request database threads, until its run starts.
_request: contextvars.ContextVar[dict | None] = contextvars.ContextVar("bench_request", default=None)
_hops: dict[str, list[tuple[float, float, float]]] = {}
_profile: list[cProfile.Profile] = []


def _mark(conversation_id, step: str, *, at: float | None = None) -> None:
    """The step's first time for the conversation (a later run of it does not overwrite it)."""
    now = time.time() if at is None else at
    with _lock:
        _steps[str(conversation_id)].setdefault(step, now)


def _wrap_run_start():
    original = engine.start

    async def run_start(request):
        _mark(request.conversation.pk, "received")
        arrived = _request.get()
        if arrived is not None:
            _mark(request.conversation.pk, "http_in", at=arrived["http_in"])
            for step in ("token_checked", "looked_up"):
                if step in arrived:
                    _mark(request.conversation.pk, step, at=arrived[step])
            with _lock:
                _hops.setdefault(str(request.conversation.pk), list(arrived["hops"]))
        return await original(request)

    engine.start = run_start


def _wrap_start_with_memory():
    original = starter.start_with_memory

    def start_with_memory(starts):
        began = time.time()
        keys = [str(start.message.conversation.pk) for start in starts]
        for key in keys:
            _mark(key, "orm_in")
        try:
            return original(starts)
        finally:
            ended = time.time()
            for key in keys:
                _mark(key, "orm_out")
            with _lock:
                _groups.append({"size": len(starts), "began": began, "ended": ended})

    starter.start_with_memory = start_with_memory


def _wrap_execute():
    original = registry.execute

    async def execute(handle, **kwargs):
        _conversation.set(str(handle.conversation_id))  # the agent's task inherits it
        _mark(handle.conversation_id, "task")
        return await original(handle, **kwargs)

    registry.execute = execute

    original_begin = head_start.begin

    def begin(handle, **kwargs):
        # A head start's agent begins inside the start (its task copies this context).
        _conversation.set(str(handle.conversation_id))
        return original_begin(handle, **kwargs)

    head_start.begin = begin


def _wrap_publish():
    original_announce, original_sink = execution.publish, sink.publish

    async def announce(conversation_id, frames):
        await original_announce(conversation_id, frames)
        if frames and frames[0].get("type") == "user_message":
            _mark(conversation_id, "user_message_published")

    async def from_sink(conversation_id, frames):
        await original_sink(conversation_id, frames)
        if any(frame.get("type") == "text" for frame in frames):
            _mark(conversation_id, "first_delta_published")

    execution.publish, sink.publish = announce, from_sink


def _wrap_post():
    original = llm.ChatModel._post

    async def post(self, body):
        key = _conversation.get()
        if key:
            _mark(key, "request_sent")
        response = await original(self, body)
        if key:
            _mark(key, "headers")
        return response

    llm.ChatModel._post = post


def _wrap_writer():
    """The first text delta handed to the group writer (`first_delta_submitted`), the round that
    stores it in the writer's thread (`first_delta_round_in`, `_out`), and every round's size."""
    original_submit, original_store = writer.GroupWriter.submit, writer._store

    def has_text(batch) -> bool:
        return any(p["type"] == "text" for p in batch.payloads)

    def submit(self, batch):
        if has_text(batch):
            _mark(batch.conversation_id, "first_delta_submitted")
        return original_submit(self, batch)

    def store(batches, idle):
        began = time.time()
        try:
            return original_store(batches, idle)
        finally:
            ended = time.time()
            for batch in batches:
                if has_text(batch):
                    _mark(batch.conversation_id, "first_delta_round_in", at=began)
                    _mark(batch.conversation_id, "first_delta_round_out", at=ended)
            with _lock:
                _rounds.append({"size": len(batches), "began": began, "ended": ended})

    writer.GroupWriter.submit, writer._store = submit, store


def _wrap_begin():
    original = sqlite_base.DatabaseWrapper._start_transaction_under_autocommit

    def begin(self):
        began = time.time()
        try:
            return original(self)
        finally:
            with _lock:
                _begins.append({"thread": threading.current_thread().name, "began": began, "ended": time.time()})

    sqlite_base.DatabaseWrapper._start_transaction_under_autocommit = begin


class _TimedExecutor(ThreadPoolExecutor):
    """The request database threads, each call's queueing and run recorded on its request."""

    def submit(self, fn, /, *args, **kwargs):
        arrived, queued = _request.get(), time.time()
        if arrived is None:
            return super().submit(fn, *args, **kwargs)

        def timed():
            began = time.time()
            try:
                return fn(*args, **kwargs)
            finally:
                arrived["hops"].append((queued, began, time.time()))

        return super().submit(timed)


def _wrap_lookups():
    """An HTTP request's bearer check (`token_checked`) and its last grouped look-up before its
    start (`looked_up`: chat.agent.batching.GroupedCalls, e.g. its new conversation), when each
    came back to the request."""
    check = bearer.token_check_batched

    async def token_check_batched(value, address):
        try:
            return await check(value, address)
        finally:
            if (arrived := _request.get()) is not None:
                arrived["token_checked"] = time.time()

    bearer.token_check_batched = token_check_batched
    grouped = batching.GroupedCalls.__call__

    async def call(self, *args, **kwargs):
        try:
            return await grouped(self, *args, **kwargs)
        finally:
            if (arrived := _request.get()) is not None:
                arrived["looked_up"] = time.time()

    batching.GroupedCalls.__call__ = call


def _wrap_request_db():
    loop_middleware._request_db = _TimedExecutor(
        max_workers=loop_middleware.REQUEST_DB_THREADS, thread_name_prefix="request-db"
    )


for _install in (
    _wrap_lookups,
    _wrap_request_db,
    _wrap_run_start,
    _wrap_start_with_memory,
    _wrap_execute,
    _wrap_publish,
    _wrap_post,
    _wrap_writer,
    _wrap_begin,
):
    _install()


def _readings() -> dict:
    with _lock:
        return {
            "steps": dict(_steps),
            "groups": list(_groups),
            "rounds": list(_rounds),
            "begins": list(_begins),
            "hops": dict(_hops),
        }


def _profiling(switch: bytes) -> bytes:
    """cProfile of the loop's thread on (`on`) or off (`off`: its top functions, text)."""
    if switch == b"on":
        _profile[:] = [cProfile.Profile()]
        _profile[0].enable()
        return b"on"
    profile = _profile.pop()
    profile.disable()
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out).sort_stats("tottime")
    stats.print_stats(45)
    stats.sort_stats("cumulative").print_stats(60)
    return out.getvalue().encode()


async def _answer(send, body: bytes, content_type: bytes) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", content_type)]})
    await send({"type": "http.response.body", "body": body})


async def application(scope, receive, send):
    if scope["type"] == "http" and scope["path"] == STEPS_PATH:
        await _answer(send, json.dumps(_readings()).encode(), b"application/json")
        return
    if scope["type"] == "http" and scope["path"] == PROFILE_PATH:
        await _answer(send, _profiling((await receive()).get("body", b"")), b"text/plain")
        return
    if scope["type"] == "http":
        _request.set({"http_in": time.time(), "hops": []})
    await project(scope, receive, send)
