"""The socket edge (docs/architecture.md, "realtime/"): the consumer (consumers.py) and its
routes, which origins may open a socket (origins.py), sessions that end closing their sockets
(revocation.py), the per-process socket count (sockets.py) and the in-memory channel layer of
a one-process deployment (layers.py)."""
