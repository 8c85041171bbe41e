"""The AG-UI door against a real daphne (docs/protocol.md, "AG-UI"): every event of each stream
validated by ag-ui-protocol's own models and checked for AG-UI's order; text, reasoning, tool
calls and results; a thread continued; an approval as an interrupt and its resume; reconnecting
with `connect`; ownership and authentication."""

from __future__ import annotations

import base64
import json

import httpx
import pytest

from tests.crafted_images import plain_png
from tests.fakellm import text_reply, tool_call_reply

from .agui_stream import check_order, of_type, post_stream, run_input, text_of, validated
from .harness import SyncUser, answer_text, shell, slow_text_reply

pytestmark = pytest.mark.services


@pytest.fixture(scope="module")
def agui_server(databases, make_server):
    return make_server(
        databases.new(),
        name="agui",
        AGENT_MESSAGES_PER_MINUTE="1000",
        AGENT_APPROVAL_TOOLS="calc*",
        AGENT_APPROVAL_TIMEOUT="120",
    )


@pytest.fixture
def user(agui_server):
    person = SyncUser(agui_server)
    yield person
    person.close()


def bearer(person: SyncUser) -> dict[str, str]:
    return {"Authorization": f"Bearer {person.token()}"}


def run(person: SyncUser, body: dict, headers: dict, **more):
    return post_stream(person.server.base, "/api/agui/default/", body, headers, **more)


def test_text_reasoning_usage_and_the_conversation_it_makes(user, replies):
    headers = bearer(user)
    replies.set("agui plain", text_reply("Plain answer, in pieces.", thinking="Thinking first."))
    body = run_input("agui plain", context=[{"description": "Page", "value": "/pricing"}])
    answered, status, events = run(user, body, headers)
    assert status == 200, events
    validated(events)
    check_order(events)
    kinds = [e["type"] for e in events]
    assert kinds[:3] == ["RUN_STARTED", "REASONING_START", "REASONING_MESSAGE_START"]
    assert kinds[-2:] == ["TEXT_MESSAGE_END", "RUN_FINISHED"]
    started, finished = events[0], events[-1]
    assert (started["threadId"], started["runId"], started["protocolVersion"]) == (
        body["threadId"],
        body["runId"],
        "1.0",
    )
    assert finished["outcome"] == {"type": "success"} and finished["runId"] == body["runId"]
    (usage,) = finished["usage"]
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"] and usage["model"]
    assert text_of(events) == "Plain answer, in pieces."
    thinking = "".join(e["delta"] for e in of_type(events, "REASONING_MESSAGE_CONTENT"))
    assert thinking == "Thinking first."
    run_hex = answered["X-Agentsite-Run"].replace("-", "")
    assert of_type(events, "TEXT_MESSAGE_START")[0]["messageId"].startswith(f"msg_{run_hex}_")
    assert all(isinstance(e.get("timestamp"), int) for e in events[1:])
    conversation = answered["X-Agentsite-Conversation"]
    stored = user.events(conversation)
    assert stored[0]["via"] == "agui"
    assert stored[0]["request"] == {
        "threadId": body["threadId"],
        "runId": body["runId"],
        "messageId": body["messages"][0]["id"],
        "context": [{"description": "Page", "value": "/pricing"}],
    }
    listed = user.http.get(f"/api/conversations/{conversation}/").json()
    assert listed["source"] == "agui" and listed["title"] == "agui plain"


def test_the_context_is_a_system_message_of_this_run_alone(user, replies, e2e_llm):
    headers = bearer(user)
    replies.set("agui context", text_reply("With context."))
    replies.set("agui after", text_reply("Without."))
    body = run_input("agui context", context=[{"description": "Page", "value": "/pricing"}])
    assert run(user, body, headers)[1] == 200
    asked = next(b for b in reversed(e2e_llm.requests) if b["messages"][-1].get("content") == "agui context")
    assert [m["content"] for m in asked["messages"] if m["role"] == "system"][-1] == "Page: /pricing"
    assert run(user, run_input("agui after", thread=body["threadId"]), headers)[1] == 200
    later = next(b for b in reversed(e2e_llm.requests) if b["messages"][-1].get("content") == "agui after")
    assert "Page: /pricing" not in [m["content"] for m in later["messages"] if m["role"] == "system"]


def test_a_made_up_thread_is_found_again_and_its_log_is_the_memory(user, replies, e2e_llm):
    headers = bearer(user)
    replies.set("agui one", text_reply("One."))
    replies.set("agui two", text_reply("Two."))
    history = [{"id": "h1", "role": "user", "content": "earlier"}, {"id": "h2", "role": "assistant", "content": "ok"}]
    first = run_input("agui one", thread="my-thread")
    first["messages"] = history + first["messages"]
    one, _, _ = run(user, first, headers)
    second = run_input("agui two", thread="my-thread")
    second["messages"] = [{"id": "x", "role": "user", "content": "ignored for an existing thread"}] + second["messages"]
    two, _, events = run(user, second, headers)
    check_order(validated(events) and events)
    assert one["X-Agentsite-Conversation"] == two["X-Agentsite-Conversation"]
    asked = next(b for b in reversed(e2e_llm.requests) if b["messages"][-1].get("content") == "agui two")
    assert [m["content"] for m in asked["messages"] if m["role"] != "system"] == [
        "earlier",
        "ok",
        "agui one",
        "One.",
        "agui two",
    ]
    # Another user's "my-thread" is another conversation.
    other = SyncUser(user.server)
    replies.set("agui other", text_reply("Other."))
    theirs, status, _ = run(other, run_input("agui other", thread="my-thread"), bearer(other))
    assert status == 200 and theirs["X-Agentsite-Conversation"] != one["X-Agentsite-Conversation"]
    other.close()


def test_tool_calls_and_their_results(user, replies):
    headers = bearer(user)
    # One model turn that says something, then calls a tool: the call's parent is that text.
    turn = {"chunks": text_reply("Let me look.")["chunks"][:-1] + tool_call_reply(("current_time", {}))["chunks"]}
    replies.set("agui tools", turn, text_reply("Done."))
    _, status, events = run(user, run_input("agui tools"), headers)
    assert status == 200, events
    validated(events)
    check_order(events)
    (start,) = of_type(events, "TOOL_CALL_START")
    (result,) = of_type(events, "TOOL_CALL_RESULT")
    assert start["toolCallName"] == "current_time" and start["toolCallId"].startswith("call_")
    assert start["parentMessageId"] == of_type(events, "TEXT_MESSAGE_START")[0]["messageId"]
    assert result["toolCallId"] == start["toolCallId"] and result["role"] == "tool" and result["content"]
    assert result["messageId"].startswith("tool_")
    assert text_of(events) == "Let me look.Done."


def test_an_approval_is_an_interrupt_answered_with_resume(user, replies):
    headers = bearer(user)
    replies.set("agui approve", tool_call_reply(("calculator", {"expression": "6*7"})), text_reply("It is 42."))
    body = run_input("agui approve")
    answered, _, events = run(user, body, headers)
    validated(events)
    check_order(events)
    finished = events[-1]
    assert finished["type"] == "RUN_FINISHED" and finished["outcome"]["type"] == "interrupt"
    (interrupt,) = finished["outcome"]["interrupts"]
    (call,) = of_type(events, "TOOL_CALL_START")
    assert interrupt["id"] == interrupt["toolCallId"] == call["toolCallId"]
    assert interrupt["reason"] == "tool_approval" and interrupt["expiresAt"]
    assert interrupt["metadata"]["toolName"] == "calculator"
    assert interrupt["responseSchema"]["properties"]["approved"] == {"type": "boolean"}
    assert not of_type(events, "TOOL_CALL_RESULT")
    # The run waits; a message meanwhile is refused.
    busy = run(user, run_input("agui busy", thread=body["threadId"]), headers)
    assert (busy[1], busy[2]["error"]["code"]) == (409, "RUN_IN_PROGRESS")
    resume = run_input(
        None,
        thread=body["threadId"],
        resume=[{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}],
    )
    again, status, rest = run(user, resume, headers)
    assert status == 200, rest
    validated(rest)
    check_order(rest, announced=(call["toolCallId"],))
    assert rest[0]["runId"] == resume["runId"] and again["X-Agentsite-Run"] == answered["X-Agentsite-Run"]
    (result,) = of_type(rest, "TOOL_CALL_RESULT")
    assert result["toolCallId"] == call["toolCallId"] and result["content"] == "42"
    assert not of_type(rest, "TOOL_CALL_START")  # announced already
    assert text_of(rest) == "It is 42." and rest[-1]["outcome"] == {"type": "success"}
    # Answered: 409; an id of no interrupt of this thread: 400.
    late = run(user, resume, headers)
    assert (late[1], late[2]["error"]["code"]) == (409, "ALREADY_ANSWERED")
    resume["resume"][0]["interruptId"] = "call_" + "0" * 32 + "_1"
    assert run(user, resume, headers)[1] == 400


def test_a_denied_interrupt_reads_as_a_failed_call(user, replies):
    headers = bearer(user)
    replies.set("agui deny", tool_call_reply(("calculator", {"expression": "1+1"})), text_reply("Denied, fine."))
    body = run_input("agui deny")
    _, _, events = run(user, body, headers)
    (interrupt,) = events[-1]["outcome"]["interrupts"]
    resume = run_input(
        None,
        thread=body["threadId"],
        resume=[{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": False, "reason": "no"}}],
    )
    _, _, rest = run(user, resume, headers)
    validated(rest)
    (result,) = of_type(rest, "TOOL_CALL_RESULT")
    assert "denied by the user: no" in result["content"] and text_of(rest) == "Denied, fine."


def test_connect_gives_the_snapshot_then_exactly_the_rest(user, replies):
    headers = bearer(user)
    answer = answer_text(60, "cn")
    replies.set("agui connect", slow_text_reply(answer, chunks=60, delay=0.05))
    body = run_input("agui connect")
    _, _, cut = run(user, body, headers, stop_after=6)  # the client leaves; the run goes on
    assert [e["type"] for e in cut[:2]] == ["RUN_STARTED", "TEXT_MESSAGE_START"]
    connect = {"threadId": body["threadId"], "runId": "ignored", "messages": []}
    _, status, events = post_stream(user.server.base, "/api/agui/default/connect/", connect, headers)
    assert status == 200, events
    validated(events)
    started, snapshot = events[0], events[1]
    assert started["runId"] == body["runId"] and snapshot["type"] == "MESSAGES_SNAPSHOT"
    assert snapshot["messages"][0] == {"id": body["messages"][0]["id"], "role": "user", "content": "agui connect"}
    so_far = [m for m in snapshot["messages"] if m["role"] == "assistant"]
    message_id = cut[1]["messageId"]
    if events[-1]["type"] == "RUN_FINISHED" and len(events) == 3:  # it ended meanwhile
        assert so_far[0]["content"] == answer
    else:
        assert (events[2]["type"], events[2]["messageId"], events[2]["role"]) == (
            "TEXT_MESSAGE_START",
            message_id,
            "assistant",
        )
        check_order(events)
        assert (so_far[0]["content"] if so_far else "") + text_of(events) == answer
    # An ended thread: the snapshot, then its RUN_FINISHED.
    _, _, ended = post_stream(user.server.base, "/api/agui/default/connect/", connect, headers)
    validated(ended)
    assert [e["type"] for e in ended] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert [m["content"] for m in ended[1]["messages"]] == ["agui connect", answer]


def test_connect_to_a_run_waiting_for_approval_ends_with_its_interrupt(user, replies):
    headers = bearer(user)
    replies.set("agui wait", tool_call_reply(("calculator", {"expression": "2+2"})), text_reply("4."))
    body = run_input("agui wait")
    _, _, events = run(user, body, headers)
    (interrupt,) = events[-1]["outcome"]["interrupts"]
    connect = {"threadId": body["threadId"], "runId": "r", "messages": []}
    _, _, again = post_stream(user.server.base, "/api/agui/default/connect/", connect, headers)
    validated(again)
    assert [e["type"] for e in again] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert again[-1]["outcome"]["interrupts"] == [interrupt]
    (assistant,) = [m for m in again[1]["messages"] if m["role"] == "assistant"]
    assert assistant["toolCalls"][0]["id"] == interrupt["id"]  # a call awaiting approval: no result


def test_ownership_authentication_and_refusals(user, replies):
    headers = bearer(user)
    mine = user.conversation()
    other = SyncUser(user.server)
    theirs = other.conversation()
    replies.set("agui mine", text_reply("Mine."))
    # Any conversation of the user is a thread; another user's is 404 and untouched.
    answered, status, _ = run(user, run_input("agui mine", thread=mine), headers)
    assert status == 200 and answered["X-Agentsite-Conversation"] == mine
    for path in ("/api/agui/default/", "/api/agui/default/connect/"):
        _, status, error = post_stream(user.server.base, path, run_input("agui theirs", thread=theirs), headers)
        assert (status, error["error"]["code"]) == (404, "NOT_FOUND")
    assert other.events(theirs) == []
    other.close()
    # No credentials: 401 with WWW-Authenticate; a session without CSRF: 403.
    head, status, error = post_stream(user.server.base, "/api/agui/default/", run_input("x"), {})
    assert (status, error["error"]["code"], head["WWW-Authenticate"]) == (401, "NOT_AUTHENTICATED", "Bearer")
    refused = user.http.post("/api/agui/default/", json=run_input("x"), headers={"Referer": user.server.base})
    assert refused.status_code == 403
    # Bad input, an unknown agent, an unknown thread to connect to: nothing is made.
    before = len(user.http.get("/api/conversations/").json()["conversations"])
    for body, expected in (
        ({"threadId": "t"}, 400),
        (run_input(None), 400),
        ({**run_input("x"), "runId": ""}, 400),
        ({**run_input("x"), "messages": [{"role": "assistant", "content": "hi"}]}, 400),
    ):
        _, status, error = run(user, body, headers)
        assert (status, error["error"]["code"]) == (expected, "BAD_REQUEST"), body
    assert post_stream(user.server.base, "/api/agui/nope/", run_input("x"), headers)[1] == 404
    connect = {"threadId": "never-used", "runId": "r", "messages": []}
    assert post_stream(user.server.base, "/api/agui/default/connect/", connect, headers)[1] == 404
    assert len(user.http.get("/api/conversations/").json()["conversations"]) == before


def test_capabilities_and_a_session_run(user, replies):
    capabilities = user.http.get("/api/agui/default/").json()
    assert capabilities["identity"]["provider"] == "agentsite"
    assert capabilities["humanInTheLoop"] == {"supported": True, "approvals": True, "interrupts": True}
    assert capabilities["tools"]["clientProvided"] is False
    assert "calculator" in [tool["name"] for tool in capabilities["tools"]["items"]]
    assert user.http.get("/api/agui/nope/").status_code == 404
    replies.set("agui session", text_reply("Session."))
    with user.http.stream(
        "POST", "/api/agui/default/", json=run_input("agui session"), headers=user.unsafe_headers
    ) as answer:
        assert answer.status_code == 200
        events = [json.loads(line[6:]) for line in answer.iter_lines() if line.startswith("data: ")]
    assert events[-1]["type"] == "RUN_FINISHED" and text_of(events) == "Session."


def test_an_image_part_becomes_a_file_of_the_thread(user, replies):
    headers = bearer(user)
    png = plain_png(4, 3)
    part = {
        "type": "image",
        "source": {"type": "data", "value": base64.b64encode(png).decode(), "mimeType": "image/png"},
    }
    body = run_input(
        None, messages=[{"id": "p1", "role": "user", "content": [{"type": "text", "text": "agui picture"}, part]}]
    )
    answered, status, events = run(user, body, headers)
    assert status == 200 and events[-1]["outcome"] == {"type": "success"}, events
    conversation = answered["X-Agentsite-Conversation"]
    assert user.events(conversation)[0]["attachments"][0]["path"] == "image-1.png"
    files = user.http.get(f"/api/conversations/{conversation}/files/").json()["files"]
    assert [(f["path"], f["size"]) for f in files] == [("image-1.png", len(png))]
    # A URL source is refused, and so is data that is no image: nothing is made.
    for source in ({"type": "url", "value": "https://example.com/a.png"}, {"type": "data", "value": "bm9wZQ=="}):
        refused = run_input(
            None, messages=[{"id": "p2", "role": "user", "content": [{"type": "image", "source": source}]}]
        )
        _, status, error = run(user, refused, headers)
        assert (status, error["error"]["code"]) == (400, "BAD_REQUEST")


def test_a_stream_whose_conversation_is_deleted_ends_with_run_error(user, replies):
    headers = bearer(user)
    replies.set("agui doomed", slow_text_reply(answer_text(100, "dm"), chunks=100, delay=0.05))
    events: list[dict] = []
    with httpx.stream(
        "POST", f"{user.server.base}/api/agui/default/", json=run_input("agui doomed"), headers=headers, timeout=30
    ) as live:
        conversation = live.headers["X-Agentsite-Conversation"]
        for line in live.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
                if len(events) == 4:
                    gone = httpx.delete(f"{user.server.base}/api/conversations/{conversation}/", headers=headers)
                    assert gone.status_code == 204
    validated(events)
    assert (events[-1]["type"], events[-1]["code"]) == ("RUN_ERROR", "NOT_FOUND")
    connect = {"threadId": events[0]["threadId"], "runId": "r", "messages": []}
    assert post_stream(user.server.base, "/api/agui/default/connect/", connect, headers)[1] == 404


def test_the_inspector_tags_an_agui_run(user, replies):
    replies.set("agui inspected", text_reply("Seen."))
    answered, _, _ = run(user, run_input("agui inspected"), bearer(user))
    shell(
        user.server,
        f"from django.contrib.auth.models import User; User.objects.filter(username='{user.username}').update(is_staff=True)",
    )
    listed = user.http.get("/inspect/")
    assert listed.status_code == 200 and ">AG-UI</span>" in listed.text
    page = user.http.get(f"/inspect/runs/{answered['X-Agentsite-Run']}/")
    assert "Started by an AG-UI front-end" in page.text


def test_a_stream_whose_token_is_revoked_ends_with_run_error(user, replies):
    made = user.http.post("/api/tokens/", json={"name": "doomed"}, headers=user.unsafe_headers).json()
    headers = {"Authorization": f"Bearer {made['token']}"}
    replies.set("agui revoked", slow_text_reply(answer_text(100, "rv"), chunks=100, delay=0.05))
    events: list[dict] = []
    with httpx.stream(
        "POST", f"{user.server.base}/api/agui/default/", json=run_input("agui revoked"), headers=headers, timeout=30
    ) as live:
        for line in live.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
                if len(events) == 4:
                    gone = user.http.delete(f"/api/tokens/{made['id']}/", headers=user.unsafe_headers)
                    assert gone.status_code == 204
    validated(events)
    assert (events[-1]["type"], events[-1]["code"]) == ("RUN_ERROR", "NOT_AUTHENTICATED")
