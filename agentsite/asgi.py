"""ASGI entry point: HTTP through Django, WebSockets through Channels (origin-checked; the consumer
signs its socket in itself, chat.doors.socket.credentials)."""

import gc
import os

import django
from django.conf import settings

from agentsite import startup
from serving.collector import FullCollections
from serving.loop_handler import LoopASGIHandler
from serving.malloc import give_back_large_blocks

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
with startup.one_line_errors():  # a bad setting or database: one line and exit, not a traceback
    django.setup(set_prefix=False)  # as get_asgi_application, with the handler that keeps requests on the loop
    django_asgi_app = LoopASGIHandler()
    if settings.CHECK_BEFORE_SERVING:
        startup.check_before_serving()

from chat.doors.mcp_server.gate import McpGate  # noqa: E402
from chat.doors.socket.origins import OriginValidator  # noqa: E402 - needs the app registry loaded
from chat.doors.socket.routing import SocketRouter, websocket_urlpatterns  # noqa: E402
from chat.runtime.lifecycle import RunRegistryStarter  # noqa: E402
from chat.scheduling.poller import SchedulePollerStarter  # noqa: E402

websocket_app = OriginValidator(SocketRouter(websocket_urlpatterns))
mcp_app = McpGate()  # /mcp: the SDK's Streamable HTTP transport behind the project's gate, beside Django
MCP_PATHS = ("/mcp", "/mcp/")


def by_protocol(scope, receive, send):
    """Channels' ProtocolTypeRouter as a plain call: that one awaited the next application, so
    its frame lived as long as each socket; this hands back the next one's coroutine."""
    if scope["type"] == "http":
        if scope["path"] in MCP_PATHS:
            return mcp_app(scope, receive, send)
        return django_asgi_app(scope, receive, send)
    if scope["type"] == "websocket":
        return websocket_app(scope, receive, send)
    raise ValueError(f"No application configured for scope type {scope['type']!r}")


application = SchedulePollerStarter(RunRegistryStarter(by_protocol))
if settings.GC_FULL_COLLECTION_SECONDS > 0:
    application = FullCollections(application, every=settings.GC_FULL_COLLECTION_SECONDS)

# What is loaded by now lives as long as the process: freeze it out of the collector's
# reach, and collect the young generation less often (streaming allocates many short-lived
# objects). With the defaults, collections cost 1.46 s of the server's ~9.5 s CPU over two
# rounds of 200 concurrent streams, full ones walking ~200,000 long-lived objects; after: 0.12 s.
# With these thresholds a full collection would wait for hours: FullCollections runs one a minute.
gc.freeze()
gc.set_threshold(10_000, 20, 100)
# A decoded image's memory goes back to the system when it is freed (serving.malloc).
give_back_large_blocks()
