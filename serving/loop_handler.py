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

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.idle: list[ThreadPoolExecutor] = []

    def lend(self, context: ThreadSensitiveContext) -> ThreadPoolExecutor:
        """A thread for the thread-sensitive calls made in `context` (the request's). Set as
        ThreadSensitiveContext would set the one it makes: asgiref's `executor=` would also make
        a run started by the request (a task that outlives it) fail its later thread-sensitive
        calls, where with Django's own thread they get a thread of their own."""
        thread = self.idle.pop() if self.idle else ThreadPoolExecutor(max_workers=1, thread_name_prefix="request")
        SyncToAsync.context_to_thread_executor[context] = thread
        return thread

    def take_back(self, context: ThreadSensitiveContext, thread: ThreadPoolExecutor) -> None:
        SyncToAsync.context_to_thread_executor.pop(context, None)  # not the context's to shut down
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
