"""The npm AG-UI client (@ag-ui/client 1.0.0's HttpAgent, its event verifier and its reducer)
consuming runs of the AG-UI door of a real daphne (docs/protocol.md, "AG-UI"): a run with a tool
call, an approval interrupt resumed, and a reconnect (tests/agui/client.mjs, installed by
`make agui-client` from tests/agui/package-lock.json)."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.fakellm import text_reply, tool_call_reply

from .harness import SyncUser

pytestmark = pytest.mark.services

CLIENT = Path(__file__).resolve().parents[1] / "agui" / "client.mjs"


@pytest.fixture(scope="module")
def agui_client_server(databases, make_server):
    return make_server(
        databases.new(),
        name="agui-client",
        AGENT_MESSAGES_PER_MINUTE="1000",
        AGENT_APPROVAL_TOOLS="calc*",
        AGENT_APPROVAL_TIMEOUT="120",
    )


@pytest.fixture
def user(agui_client_server):
    person = SyncUser(agui_client_server)
    yield person
    person.close()


def client(person: SyncUser, scenario: str, *, thread: str, message: str = "", token: str | None = None) -> list:
    env = {
        **os.environ,
        "AGUI_URL": f"{person.server.base}/api/agui/default/",
        "TOKEN": token or person.token(),
        "THREAD": thread,
        "MESSAGE": message,
    }
    done = subprocess.run(
        ["node", str(CLIENT), scenario], env=env, cwd=CLIENT.parent, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr + done.stdout
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_npm_client_renders_a_run_with_a_tool_call(user, replies):
    turn = {"chunks": text_reply("Checking.")["chunks"][:-1] + tool_call_reply(("current_time", {}))["chunks"]}
    replies.set("npm tools", turn, text_reply("It is now."))
    thread = f"npm-{uuid.uuid4().hex[:8]}"
    (ran,) = client(user, "run", thread=thread, message="npm tools")
    assert ran["types"][0] == "RUN_STARTED" and ran["types"][-1] == "RUN_FINISHED"
    assert "TOOL_CALL_RESULT" in ran["types"] and ran["pending"] == []
    roles = [m["role"] for m in ran["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
    first, tool, last = ran["messages"][1], ran["messages"][2], ran["messages"][3]
    assert first["content"] == "Checking." and first["toolCalls"][0]["function"]["name"] == "current_time"
    assert tool["toolCallId"] == first["toolCalls"][0]["id"] and last["content"] == "It is now."


def test_the_npm_client_resumes_an_interrupt_and_reconnects(user, replies):
    replies.set("npm approve", tool_call_reply(("calculator", {"expression": "20+22"})), text_reply("Forty-two."))
    thread = f"npm-{uuid.uuid4().hex[:8]}"
    token = user.token()
    asked, resumed = client(user, "approve", thread=thread, message="npm approve", token=token)
    (interrupt,) = asked["pending"]
    assert interrupt["reason"] == "tool_approval" and asked["types"][-1] == "RUN_FINISHED"
    assert resumed["pending"] == [] and resumed["types"][-1] == "RUN_FINISHED"
    assert [m["content"] for m in resumed["messages"] if m["role"] == "tool"] == ["42"]
    assert resumed["messages"][-1]["content"] == "Forty-two."
    # A new client of the same thread reconnects: the snapshot is the whole thread.
    (connected,) = client(user, "connect", thread=thread, token=token)
    assert connected["types"] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert [m["role"] for m in connected["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert connected["messages"][0] == {"id": "client-message-1", "role": "user", "content": "npm approve"}
