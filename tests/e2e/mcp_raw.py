"""Raw JSON-RPC over HTTP to /mcp for the MCP server's e2e tests: what the official client does
not show (headers, a call left without a result, a request sent to another process)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx2

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
VERSION = "2025-11-25"


def initialize_body(version: str = VERSION) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
    }


async def initialize(http: httpx2.AsyncClient, base: str, token: str) -> str:
    r = await http.post(f"{base}/mcp", json=initialize_body(), headers={**HEADERS, "Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text
    return r.headers["Mcp-Session-Id"]


def session_headers(token: str, session: str) -> dict[str, str]:
    return {**HEADERS, "Authorization": f"Bearer {token}", "Mcp-Session-Id": session, "MCP-Protocol-Version": VERSION}


async def cancelled_call(*, call_base: str, cancel_base: str, token: str, session: str, message: str) -> list[dict]:
    """tools/call (id 7, with a progress token) on `call_base`; after its first progress
    notification, `notifications/cancelled` on `cancel_base`. Every message the call's stream
    carried until it ended."""
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "ask_default", "arguments": {"message": message}, "_meta": {"progressToken": "p"}},
    }
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7, "reason": "enough"}}
    received: list[dict[str, Any]] = []
    headers = session_headers(token, session)
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=60)) as http:
        async with http.stream("POST", f"{call_base}/mcp", json=call, headers=headers) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            with anyio.fail_after(60):
                async for line in stream.aiter_lines():
                    if line.startswith("data: "):
                        received.append(json.loads(line[6:]))
                        if len(received) == 1:
                            r = await http.post(f"{cancel_base}/mcp", json=cancel, headers=headers)
                            assert r.status_code == 202, r.text
    return received


async def dropped_call(*, base: str, token: str, session: str, message: str) -> dict[str, Any]:
    """tools/call with a progress token whose connection is closed after its first notification
    (no `notifications/cancelled`): that notification."""
    call = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "tools/call",
        "params": {"name": "ask_default", "arguments": {"message": message}, "_meta": {"progressToken": "p"}},
    }
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=60)) as http:
        async with http.stream("POST", f"{base}/mcp", json=call, headers=session_headers(token, session)) as stream:
            with anyio.fail_after(60):
                async for line in stream.aiter_lines():
                    if line.startswith("data: "):
                        return json.loads(line[6:])
    raise AssertionError("the call's stream ended without a notification")
