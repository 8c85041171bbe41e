"""The official npm `openai` package (tests/openai_js, installed by `make openai-js` from its
package-lock.json) against the Responses API door of a real daphne (docs/protocol.md,
"Responses API"): create whole and streamed, the stream helper, previous_response_id with input
items, background and cancel, and the SDK's error classes; its answers compared with the stored
runs."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from openai import OpenAI

from tests.fakellm import text_reply

from .harness import SyncUser, answer_text, slow_text_reply

pytestmark = pytest.mark.services

CLIENT = Path(__file__).resolve().parents[1] / "openai_js" / "responses.mjs"


@pytest.fixture(scope="module")
def npm_server(databases, make_server):
    return make_server(databases.new(), name="v1-responses-npm", AGENT_MESSAGES_PER_MINUTE="1000")


@pytest.fixture
def user(npm_server):
    person = SyncUser(npm_server)
    yield person
    person.close()


def node(person: SyncUser, scenario: str, **env: str) -> dict:
    done = subprocess.run(
        ["node", str(CLIENT), scenario],
        env={**os.environ, "BASE_URL": f"{person.server.base}/v1", "TOKEN": person.token(), **env},
        cwd=CLIENT.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    return json.loads(done.stdout.strip().splitlines()[-1])


def stored_text(person: SyncUser, conversation: str) -> str:
    return "".join(e["content"] for e in person.events(conversation) if e["type"] == "text")


def test_a_whole_response_is_the_stored_run(user, replies):
    replies.set("npm plain", text_reply("Plain from npm.", thinking="A thought."))
    got = node(user, "plain", INPUT="npm plain")
    assert got["status"] == "completed" and got["outputText"] == "Plain from npm."
    assert got["types"] == ["reasoning", "message"] and got["retrievedSame"]
    assert got["id"] == "resp_" + got["run"].replace("-", "")
    assert stored_text(user, got["conversation"]) == got["outputText"]


def test_a_stream_and_the_stream_helper(user, replies):
    replies.set("npm stream", text_reply("Piece " * 6, piece=6))
    replies.set("npm helper", text_reply("Helped along."))
    got = node(user, "stream", INPUT="npm stream", INPUT_2="npm helper")
    assert got["types"][:2] == ["response.created", "response.in_progress"]
    assert got["types"][-1] == "response.completed"
    assert got["sequence"] == list(range(len(got["types"])))
    assert got["text"] == "Piece " * 6
    assert got["helperText"] == got["helperFinal"] == "Helped along." and got["helperStatus"] == "completed"
    whole = OpenAI(base_url=f"{user.server.base}/v1", api_key=user.token(), max_retries=0)
    assert whole.responses.retrieve(got["completedId"]).output_text == got["text"]
    whole.close()


def test_previous_response_id_and_input_items(user, replies):
    replies.set("npm first", text_reply("First."))
    replies.set("npm second", text_reply("Second."))
    got = node(user, "chain", INPUT="npm first", INPUT_2="npm second")
    assert got["previous"] == got["first"] and got["secondText"] == "Second."
    assert got["items"] >= 1


def test_background_cancel_and_a_busy_conversation(user, replies):
    replies.set("npm long", slow_text_reply(answer_text(200, "long"), chunks=200, delay=0.05))
    got = node(user, "cancel", INPUT="npm long")
    assert got["started"] == "in_progress" and got["background"] is True
    assert got["busy"] == {"class": "ConflictError", "status": 409, "code": "run_in_progress", "param": None}
    assert got["cancelled"] == got["retrieved"] == "cancelled"


def test_error_classes_and_another_users_response(user, npm_server, replies):
    other = SyncUser(npm_server)
    replies.set("npm theirs", text_reply("Theirs."))
    theirs = node(other, "plain", INPUT="npm theirs")
    got = node(user, "errors", OTHER_ID=theirs["id"])
    assert got["auth"]["class"] == "AuthenticationError" and got["auth"]["status"] == 401
    assert got["missing"] == {"class": "NotFoundError", "status": 404, "code": "response_not_found", "param": None}
    assert got["previous"]["class"] == "BadRequestError" and got["previous"]["param"] == "previous_response_id"
    assert got["other"]["class"] == "NotFoundError"
    other.close()
