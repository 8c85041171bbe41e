"""Django's ASGI handler without a thread for a request that needs none.

Django's handler sends `request_started` and closes the response (which sends
`request_finished`) through thread-sensitive sync_to_async. The first such call of a request
makes the request's own thread (a ThreadPoolExecutor of one), and the end of the request joins
it from yet another new thread: every request, an API call that never blocks included, started
two threads, the loop waiting blocked until each ran (a fifth of the loop's time in a burst of
100 completion requests, py-spy), and made two round trips to a thread, each waiting for the
GIL while the loop is busy.

Here both run inline. Their receivers act on the calling thread's own state: Django's (the
query log and old connections of the thread, the caches, the urlconf) find nothing to do on
the loop's thread, which never holds a database connection; the request's thread gets Django's
end-of-request check of its connection when it is taken back (RequestThreads). A receiver that queried would fail loudly on the loop (Django's async-unsafe guard),
not block it. A request whose middleware or view does block still gets a thread of its own for
that work, as in Django, but one lent by RequestThreads, not made for it.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import SyncToAsync, ThreadSensitiveContext
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.db import close_old_connections, connections
from django.urls import set_script_prefix

# Threads kept between requests (more are made for a burst and ended after it).
KEPT_REQUEST_THREADS = 8
# Threads running at once, each with its database connection; a request past them does its
# blocking work on the one overflow thread. A burst of 100 sync API calls on two PostgreSQL
# processes made a thread each, and past the server's 100 connections they failed with 503
# ("too many clients", python -m bench --only doors, issue 55). Two processes at most use
# 2 x (24 + 1 + the request database threads and the run engine's) connections.
MAX_REQUEST_THREADS = 24


class LentThread(ThreadPoolExecutor):
    """A request's own thread, started at its first call only if the process may start one more
    (RequestThreads.claim_start); if not, every call of the request goes to the overflow thread,
    one thread for all of them, as asgiref's thread-sensitive calls outside a request do."""

    def __init__(self, lender: RequestThreads) -> None:
        super().__init__(max_workers=1, thread_name_prefix="request")
        self.lender = lender
        self.overflow: ThreadPoolExecutor | None = None

    def submit(self, fn, /, *args, **kwargs):
        if self.overflow is None and not self._threads and not self.lender.claim_start():
            self.overflow = self.lender.overflow()
        if self.overflow is not None:
            return self.overflow.submit(fn, *args, **kwargs)
        return super().submit(fn, *args, **kwargs)


class RequestThreads:
    """Threads lent to requests for their blocking work (a sync view, a middleware hook that may
    query), one request at a time each, as Django's thread of its own per request would be.

    Django made a new thread for every request, whose first query opened a new database
    connection (on PostgreSQL a new backend process: 1,000 GETs of the conversation list opened
    1,000 sessions, 18 ms a request), and since nothing closed it on that thread, it was left to
    the garbage collector with the thread. A kept thread keeps its connection (CONN_MAX_AGE) for
    the next request, after Django's end-of-request check run on that thread (a broken or too old
    connection is closed; the next use checks its health, CONN_HEALTH_CHECKS). A thread made for a
    burst closes its connection before it ends."""

    def __init__(self, keep: int, limit: int = MAX_REQUEST_THREADS) -> None:
        self.keep, self.limit = keep, limit
        self.idle: list[LentThread] = []
        self.started = 0  # threads started and not yet ended, kept ones included
        self._overflow: ThreadPoolExecutor | None = None

    def claim_start(self) -> bool:
        """A place for one more running thread: False when none is left, else True and counted."""
        if self.started >= self.limit:
            return False
        self.started += 1
        return True

    def overflow(self) -> ThreadPoolExecutor:
        if self._overflow is None:
            self._overflow = ThreadPoolExecutor(max_workers=1, thread_name_prefix="request-overflow")
        return self._overflow

    def lend(self, context: ThreadSensitiveContext) -> LentThread:
        """A thread for the thread-sensitive calls made in `context` (the request's). Set as
        ThreadSensitiveContext would set the one it makes: asgiref's `executor=` would also make
        a run started by the request (a task that outlives it) fail its later thread-sensitive
        calls, where with Django's own thread they get a thread of their own."""
        thread = self.idle.pop() if self.idle else LentThread(self)
        SyncToAsync.context_to_thread_executor[context] = thread
        return thread

    def take_back(self, context: ThreadSensitiveContext, thread: LentThread) -> None:
        SyncToAsync.context_to_thread_executor.pop(context, None)  # not the context's to shut down
        if thread.overflow is not None:  # its calls ran on the overflow thread, after which its check runs
            thread.overflow.submit(close_old_connections)
            thread.overflow = None
        if not thread._threads:
            # Never used: no thread was started, so no connection is open on one. Submitting the
            # end-of-request check anyway started a thread for it, and the loop waits, blocked,
            # for each thread it starts: in a burst of 100 API calls, which need none (their
            # database work goes to request_db), that was 0.4 s of the loop's time (issue 55).
            if len(self.idle) < self.keep:
                self.idle.append(thread)
            return
        # Queued on the thread itself, after the request's own work: nothing here waits for it.
        if len(self.idle) < self.keep:
            thread.submit(close_old_connections)
            self.idle.append(thread)
        else:
            thread.submit(connections.close_all)
            thread.shutdown(wait=False)
            self.started -= 1


request_threads = RequestThreads(KEPT_REQUEST_THREADS)


class LoopASGIHandler(ASGIHandler):
    """ASGIHandler.handle with the two signals' calls on the loop, and a lent thread for the
    request's thread-sensitive work; the rest as Django's."""

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        async with ThreadSensitiveContext() as context:
            thread = request_threads.lend(context)
            try:
                await self.handle(scope, receive, send)
            finally:
                request_threads.take_back(context, thread)

    async def handle(self, scope, receive, send):
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, error_response = self.create_request(scope, body_file)
        if request is None:
            body_file.close()
            await self.send_response(error_response, send)
            error_response.close()
            return

        async def process_request(request, send):
            response = await self.run_get_response(request)
            try:
                await self.send_response(response, send)
            except asyncio.CancelledError:
                pass  # the client went away while the response was being sent
            return response

        # As Django: listening for the disconnect goes first, so that its errors cannot keep
        # the request from being cancelled.
        tasks = [
            asyncio.create_task(self.listen_for_disconnect(receive)),
            asyncio.create_task(process_request(request, send)),
        ]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            if task.done():
                try:
                    task.result()
                except RequestAborted:
                    pass
                except AssertionError:
                    body_file.close()
                    raise
            else:
                task.cancel()  # a view may handle its cancellation
                try:
                    await task
                except asyncio.CancelledError:
                    pass
        try:
            response = tasks[1].result()
        except asyncio.CancelledError:
            signals.request_finished.send(sender=self.__class__)
        else:
            response.close()
        body_file.close()
