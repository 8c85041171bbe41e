"""MCP tools through a real daphne: the server's own process starts the stdio MCP server, the fake
model calls `<server>__<tool>`, the sockets see the results."""

from __future__ import annotations

import json

import pytest

from tests.fakellm import text_reply, tool_call_reply
from tests.mcp.conftest import stdio_server

from .harness import Client, events_only

pytestmark = pytest.mark.services


async def test_mcp_tools_in_a_daphne_run(databases, make_server, replies, tmp_path):
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"t": stdio_server()}}))
    server = make_server(databases.new(), name="mcp", AGENT_MCP_CONFIG=str(config), AGENT_MCP_TIMEOUT="60",
                         SECRET_KEY="e2e-secret-key-that-must-not-leak")  # fmt: skip
    user = await Client(server).signup()
    try:
        message = replies.set(
            "use the mcp server",
            tool_call_reply(("t__add", {"a": 40, "b": 2}), ("t__environment", {})),
            text_reply("done"),
        )
        conversation = await user.create_conversation()
        sock = await user.socket(conversation)
        await sock.sync()
        await sock.message(message)
        events = events_only(await sock.until_complete(timeout=90))
        await sock.close()
    finally:
        await user.aclose()
    assert events[-1]["status"] == "succeeded"
    assert [e["toolName"] for e in events if e["type"] == "tool_start"] == ["t__add", "t__environment"]
    ends = {e["toolName"]: e for e in events if e["type"] == "tool_end"}
    assert (ends["t__add"]["result"], ends["t__add"]["isError"]) == ("42", False)
    # daphne's environment holds a model key, SECRET_KEY and DATABASE_URL; the MCP server sees none.
    environment = json.loads(ends["t__environment"]["result"])
    assert "PATH" in environment
    assert not {"OPENAI_API_KEY", "SECRET_KEY", "DATABASE_URL", "OPENAI_BASE_URL"} & set(environment)
