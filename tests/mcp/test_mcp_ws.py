"""An MCP tool end to end: a WebSocket message, the fake model calling `<server>__<tool>`, the real
server answering, the stored run."""

from __future__ import annotations

import json

import pytest

from chat.models import ToolRecord
from tests.asgi_socket import Socket
from tests.fakellm import text_reply, tool_call_reply

from .conftest import stdio_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


async def test_mcp_tools_over_a_websocket(conversation, registry, llm_settings, mcp_config, mcp_sessions, settings):
    settings.AGENT_WORKSPACE_ROOT = mcp_config({"t": stdio_server()}).parent / "workspaces"
    llm_settings.script(
        tool_call_reply(("t__add", {"a": 6, "b": 7}), ("t__fail", {"message": "full"}), ("t__picture", {})),
        text_reply("done"),
    )
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": "use the server"})
    frames = await socket.run_to_end()
    await socket.close()
    assert frames[-1]["type"] == "complete" and frames[-1]["status"] == "succeeded"
    assert [f["toolName"] for f in frames if f["type"] == "tool_start"] == ["t__add", "t__fail", "t__picture"]
    ends = {f["toolName"]: f for f in frames if f["type"] == "tool_end"}
    assert (ends["t__add"]["result"], ends["t__add"]["isError"]) == ("13", False)
    assert ends["t__fail"]["isError"] is True
    assert json.loads(ends["t__fail"]["result"])["error"] == "cannot do that: full"
    saved = ends["t__picture"]["result"].split(" as ")[1].split(" ")[0]
    assert (settings.AGENT_WORKSPACE_ROOT / str(conversation.pk) / saved).is_file()
    records = {r.tool_name: r async for r in ToolRecord.objects.filter(run_id=frames[0]["runId"])}
    assert set(records) == {"t__add", "t__fail", "t__picture"} and records["t__fail"].is_error is True
