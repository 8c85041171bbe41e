"""The WebSocket door: the protocol of /ws/chat/<id>/, its routing, the origins it accepts, its credentials."""
