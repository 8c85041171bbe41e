"""The body of a test client's response, streamed (the JSON exports, the events route) or not."""

from __future__ import annotations


def response_body(response) -> bytes:
    # Iterating the response reads an asynchronous stream too (Django warns that it must).
    return b"".join(response) if response.streaming else response.content
