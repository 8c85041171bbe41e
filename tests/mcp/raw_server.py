"""A hand-written stdio MCP server of the initialize-handshake era (no SDK), for what the SDK's
own server never does: answer a call with garbage, and announce a tool-list change with the
`notifications/tools/list_changed` notification.

Tools: `echo(text)`, `garbage()` (a result that is not a tool result), `announce()` (adds the
tool `later` and sends the notification before answering)."""

import json
import sys

TOOLS = [
    {"name": "echo", "description": "Echo a text.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
    {"name": "garbage", "description": "Answer with garbage.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "announce", "description": "Add a tool.", "inputSchema": {"type": "object", "properties": {}}},
]  # fmt: skip


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request):
    method, params = request["method"], request.get("params") or {}
    if method == "initialize":
        return {"protocolVersion": "2025-06-18", "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "raw", "version": "1"}}  # fmt: skip
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        name, arguments = params["name"], params.get("arguments") or {}
        if name == "echo":
            return {"content": [{"type": "text", "text": arguments.get("text", "")}], "isError": False}
        if name == "garbage":
            return {"content": "not a list", "isError": "maybe"}
        if name == "announce":
            TOOLS.append({"name": "later", "description": "Added later.", "inputSchema": {"type": "object"}})
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            return {"content": [{"type": "text", "text": "announced"}]}
    if method == "ping":
        return {}
    return None


for line in sys.stdin:
    request = json.loads(line)
    if "id" not in request:
        continue  # a notification
    result = answer(request)
    if result is None:
        send({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "Method not found"}})
    else:
        send({"jsonrpc": "2.0", "id": request["id"], "result": result})
