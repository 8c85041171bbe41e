"""The middleware chain on the event loop: under daphne, an HTTP request goes to a thread only
for the work that blocks.

Django runs the chain in async mode only when every middleware can. One that cannot (WhiteNoise,
or any of ours before this) puts the whole chain in a thread, which then waits, blocked, until
the async view returns: a non-streamed completion held a thread for its whole run, and every
request of a burst queued for threads and switched between them and the loop several times.
And in async mode each hook of Django's own middleware (MiddlewareMixin) is still sent to a
thread, about twenty round trips a request, although most of them only read headers and cookies.

Here the hooks that never block run inline on the loop; those that may touch the database
(saving a modified session, storing messages) or parse a form body go to the request's thread,
exactly as Django sends them. The same classes work in sync mode (the test client, WSGI), where
they are Django's own. settings.MIDDLEWARE names these in place of Django's; Django's deployment
checks, which find its middleware by dotted name, see them as Django's (django_names, chat.checks).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib import auth as contrib_auth
from django.contrib.auth import middleware as auth
from django.contrib.messages import middleware as messages
from django.contrib.sessions import middleware as sessions
from django.middleware import clickjacking, common, csrf, locale, security
from django.utils.module_loading import import_string
from whitenoise import middleware as whitenoise

# The database work of async views and of these middlewares runs on this many long-lived threads,
# each keeping its connection (CONN_MAX_AGE). Not on the request's own thread, which Django makes
# for every request under ASGI (thread-sensitive calls): each request then opened a database
# connection of its own (a fifth of the server's time in a burst of API calls, and on PostgreSQL
# a new backend process each), and a server-sent event stream kept a thread and a connection for
# its whole life.
REQUEST_DB_THREADS = 4
_request_db = ThreadPoolExecutor(max_workers=REQUEST_DB_THREADS, thread_name_prefix="request-db")


def request_db(function: Callable) -> Callable:
    """`function` (ORM work that needs no other call's thread) as a coroutine function run on the
    request database threads, with Channels' connection hygiene around each call."""
    return database_sync_to_async(function, thread_sensitive=False, executor=_request_db)


class OnTheLoop:
    """For a MiddlewareMixin whose process_request never blocks: in async mode its hooks run
    inline, process_response in the request's thread when `response_blocks` says it may block."""

    get_response: object

    def response_blocks(self, request, response) -> bool:
        return False

    async def __acall__(self, request):
        response = self.process_request(request) if hasattr(self, "process_request") else None
        response = response or await self.get_response(request)  # type: ignore[operator]
        if not hasattr(self, "process_response"):
            return response
        if self.response_blocks(request, response):
            return await sync_to_async(self.process_response, thread_sensitive=True)(request, response)
        return self.process_response(request, response)


class SecurityMiddleware(OnTheLoop, security.SecurityMiddleware):
    pass


class SessionMiddleware(OnTheLoop, sessions.SessionMiddleware):
    """The store is made lazily (nothing is read before the session is used); only saving a
    modified session writes."""

    def response_blocks(self, request, response) -> bool:
        session = getattr(request, "session", None)
        return session is not None and (session.modified or settings.SESSION_SAVE_EVERY_REQUEST)


class LocaleMiddleware(OnTheLoop, locale.LocaleMiddleware):
    pass


class CommonMiddleware(OnTheLoop, common.CommonMiddleware):
    pass


class CsrfViewMiddleware(OnTheLoop, csrf.CsrfViewMiddleware):
    """The check reads the token from a form body when the request has one (parsing an upload
    can take a while: in the thread) and from the header otherwise."""

    def __init__(self, get_response):
        super().__init__(get_response)
        if self.async_mode:
            # The handler picks the view hook up once, after __init__: a coroutine is not sent to a thread.
            self.process_view = self._process_view_async  # type: ignore[method-assign]

    async def _process_view_async(self, request, callback, callback_args, callback_kwargs):
        check = super().process_view
        if request.method == "POST" and request.content_type in (
            "multipart/form-data",
            "application/x-www-form-urlencoded",
        ):
            return await sync_to_async(check, thread_sensitive=True)(request, callback, callback_args, callback_kwargs)
        return check(request, callback, callback_args, callback_kwargs)


class AuthenticationMiddleware(OnTheLoop, auth.AuthenticationMiddleware):
    """Sets the user lazily: an async view reads it with `await request.auser()`, which here
    returns the user `request.user` read already (a middleware in the request's thread, or a
    bearer token's): Django keeps the two reads apart, each with a query of its own."""

    def process_request(self, request):
        super().process_request(request)
        request.auser = partial(_user_once, request)


async def _user_once(request):
    if not hasattr(request, "_cached_user"):
        request._cached_user = await request_db(contrib_auth.get_user)(request)
    return request._cached_user


class MessageMiddleware(OnTheLoop, messages.MessageMiddleware):
    def response_blocks(self, request, response) -> bool:
        storage = getattr(request, "_messages", None)
        return storage is not None and (storage.used or storage.added_new)


class XFrameOptionsMiddleware(OnTheLoop, clickjacking.XFrameOptionsMiddleware):
    pass


class WhiteNoiseMiddleware(whitenoise.WhiteNoiseMiddleware):
    """WhiteNoise, which has no async mode: a request for anything but a static file passes
    through on the loop; a static file is opened and served from the request's thread."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response=None, settings=settings):
        super().__init__(get_response, settings)
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.async_mode:
            return self._serve_async(request)
        return super().__call__(request)

    async def _serve_async(self, request):
        if self.autorefresh:  # development: looked up on the disk
            static_file = await sync_to_async(self.find_file, thread_sensitive=True)(request.path_info)
        else:
            static_file = self.files.get(request.path_info)
        if static_file is not None:
            return await sync_to_async(self.serve, thread_sensitive=True)(static_file, request)
        return await self.get_response(request)


class DualMiddleware:
    """A middleware of ours, in both modes: `call_sync` under the test client and WSGI,
    `call_async` on daphne's loop."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)

    def __call__(self, request):
        return self.call_async(request) if self.async_mode else self.call_sync(request)

    def call_sync(self, request):
        raise NotImplementedError

    async def call_async(self, request):
        raise NotImplementedError


class InlineMiddleware(DualMiddleware):
    """One whose own work never blocks: `before` (a response ends the request there) and `after`
    run inline in both modes."""

    def call_sync(self, request):
        return self.before(request) or self.after(request, self.get_response(request))

    async def call_async(self, request):
        return self.before(request) or self.after(request, await self.get_response(request))

    def before(self, request):
        return None

    def after(self, request, response):
        return response


def django_names(paths: list[str]) -> list[str]:
    """settings.MIDDLEWARE with each of this module's subclasses of Django's middleware named as
    the Django class it runs (what Django's deployment checks look for)."""
    names = []
    for path in paths:
        cls = import_string(path)
        parent = next(
            (
                base
                for base in cls.__mro__[1:]
                if base.__module__.startswith("django.middleware.") or base.__module__.startswith("django.contrib.")
            ),
            None,
        )
        names.append(f"{parent.__module__}.{parent.__qualname__}" if cls.__module__ == __name__ and parent else path)
    return names
