"""The server under the Django project: daphne started and tuned for this application (its
event loop, its connections' bounded send buffers, its access log, its allocator and garbage
collector) and the middleware and handler that run Django's request path on that loop.

It knows nothing of the chat: chat/ and agentsite/ import it, never the other way round.
"""
