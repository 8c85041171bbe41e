"""Server-sent events: a conversation followed over HTTP (GET .../stream/), a member of the sockets' hub."""
