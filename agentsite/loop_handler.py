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
the loop's thread, which never holds a database connection, nor on a request's thread, which is
new for each request (the thread's connection was never closed by them either: CONN_MAX_AGE
keeps it). A receiver that queried would fail loudly on the loop (Django's async-unsafe guard),
not block it. A request whose middleware or view does block still gets its thread as in
Django: the ThreadSensitiveContext is kept.
"""

from __future__ import annotations

import asyncio

from asgiref.sync import ThreadSensitiveContext
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.urls import set_script_prefix


class LoopASGIHandler(ASGIHandler):
    """ASGIHandler.handle with the two signals' calls on the loop; the rest as Django's."""

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        async with ThreadSensitiveContext():
            await self.handle(scope, receive, send)

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
