"""The A2A agent (docs/protocol.md, "A2A agent"): each agent a user may use answers A2A 1.0 over
JSON-RPC at `/a2a/<slug>/`, its tasks being the runs of the user's conversations with it."""
