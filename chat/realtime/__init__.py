"""Live delivery to the doors that follow a conversation (the socket, server-sent events, /v1):
the hub (one channel of the layer per process, its messages handed to each member), a member's
bounded backlog (backlog.py), sessions and tokens that end (revocation.py), deleted conversations
(deletion.py), and the channel layers (layers.py in one process, redis_layer.py across several)."""
