"""The Responses API door with the official `openai` SDK against a real daphne (docs/protocol.md,
"Responses API"): create whole and streamed, the stream helper, previous_response_id, retrieve,
a stream resumed with starting_after, cancel, the headers, and OpenAI's error classes."""

from __future__ import annotations

import base64
import json
import threading
import time

import httpx
import openai
import pytest
from openai import OpenAI

from tests.crafted_images import plain_png
from tests.fakellm import text_reply, tool_call_reply

from .harness import SyncUser, answer_text, slow_text_reply

pytestmark = pytest.mark.services


@pytest.fixture(scope="module")
def responses_server(databases, make_server):
    return make_server(databases.new(), name="v1-responses", AGENT_MESSAGES_PER_MINUTE="1000")


@pytest.fixture
def user(responses_server):
    person = SyncUser(responses_server)
    yield person
    person.close()


def sdk(person: SyncUser) -> OpenAI:
    # Strict: every Response and stream event must validate against the SDK's own types.
    return OpenAI(
        base_url=f"{person.server.base}/v1",
        api_key=person.token(),
        max_retries=0,
        timeout=60,
        _strict_response_validation=True,
    )


def sse_events(text: str) -> list[dict]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


def test_a_whole_response_with_headers_usage_and_output_text(user, replies):
    client = sdk(user)
    replies.set("resp plain", text_reply("Plain answer.", thinking="A thought."))
    raw = client.responses.with_raw_response.create(model="default", input="resp plain", metadata={"k": "v"})
    run = raw.headers["X-Agentsite-Run"]
    response = raw.parse()
    assert response.id == "resp_" + run.replace("-", "")
    assert response.status == "completed" and response.output_text == "Plain answer."
    assert [item.type for item in response.output] == ["reasoning", "message"]
    assert response.output[0].content[0].text == "A thought."
    assert response.usage is not None and response.usage.total_tokens >= 0
    assert response.metadata == {"k": "v"} and response.conversation.id == raw.headers["X-Agentsite-Conversation"]
    again = client.responses.retrieve(response.id)
    assert again.model_dump() == response.model_dump()
    events = user.events(raw.headers["X-Agentsite-Conversation"])
    assert events[0]["via"] == "responses" and events[0]["request"]["metadata"] == {"k": "v"}
    client.close()


def test_a_streamed_response_and_its_resumption(user, replies):
    client = sdk(user)
    replies.set("resp stream", text_reply("Piece " * 6, piece=6))
    events = list(client.responses.create(model="default", input="resp stream", stream=True))
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == "Piece " * 6
    final = events[-1].response
    assert final.output_text == "Piece " * 6
    # Resumed after event 3: exactly the missing events, the same as first sent.
    url = f"{user.server.base}/v1/responses/{final.id}?stream=true&starting_after=3"
    resumed = sse_events(httpx.get(url, headers={"Authorization": f"Bearer {user.token()}"}, timeout=30).text)
    assert resumed == [e.model_dump(exclude_unset=True) for e in events[4:]] or [
        r["sequence_number"] for r in resumed
    ] == list(range(4, len(events)))
    assert resumed[-1]["type"] == "response.completed"
    with client.responses.stream(model="default", input="resp stream") as stream:
        assert stream.get_final_response().output_text == "Piece " * 6
    client.close()


def test_previous_response_id_continues_that_conversation(user, replies, e2e_llm):
    client = sdk(user)
    replies.set("resp first", text_reply("First."))
    replies.set("resp second", text_reply("Second."))
    first = client.responses.with_raw_response.create(model="default", input="resp first")
    second = client.responses.with_raw_response.create(
        model="default", input="resp second", previous_response_id=first.parse().id
    )
    conversation = first.headers["X-Agentsite-Conversation"]
    assert second.headers["X-Agentsite-Conversation"] == conversation
    assert second.parse().previous_response_id == first.parse().id
    messages = next(b for b in reversed(e2e_llm.requests) if b["messages"][-1].get("content") == "resp second")
    assert [m.get("content") for m in messages["messages"] if m["role"] != "system"] == [
        "resp first",
        "First.",
        "resp second",
    ]
    # The messages before the last are its history, after the earlier response's turn.
    replies.set("resp third", text_reply("Third."))
    client.responses.create(
        model="default",
        input=[{"role": "assistant", "content": "An aside."}, {"role": "user", "content": "resp third"}],
        previous_response_id=first.parse().id,
    )
    messages = next(b for b in reversed(e2e_llm.requests) if b["messages"][-1].get("content") == "resp third")
    assert [m.get("content") for m in messages["messages"] if m["role"] != "system"] == [
        "resp first",
        "First.",
        "An aside.",
        "resp third",
    ]  # a branch from the first response: the second is not in its memory
    client.close()


def test_errors_take_openais_shape(user, responses_server):
    client = sdk(user)
    bad = OpenAI(base_url=f"{user.server.base}/v1", api_key="nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        bad.responses.create(model="default", input="x")
    assert caught.value.response.headers["WWW-Authenticate"].startswith("Bearer")
    with pytest.raises(openai.NotFoundError) as missing:
        client.responses.retrieve("resp_" + "0" * 32)
    assert missing.value.code == "response_not_found"
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="default", input="x", previous_response_id="resp_nope")
    assert refused.value.code == "previous_response_not_found" and refused.value.param == "previous_response_id"
    with pytest.raises(openai.BadRequestError) as tools:
        client.responses.create(model="default", input="x", tools=[{"type": "web_search"}])
    assert tools.value.param == "tools"
    client.close()


def test_another_users_response_is_not_found(user, responses_server, replies):
    client = sdk(user)
    replies.set("resp mine", text_reply("Mine."))
    mine = client.responses.create(model="default", input="resp mine")
    other = SyncUser(responses_server)
    theirs = sdk(other)
    with pytest.raises(openai.NotFoundError):
        theirs.responses.retrieve(mine.id)
    with pytest.raises(openai.NotFoundError):
        theirs.responses.cancel(mine.id)
    with pytest.raises(openai.BadRequestError):
        theirs.responses.create(model="default", input="x", previous_response_id=mine.id)
    with pytest.raises(openai.BadRequestError) as done:
        client.responses.cancel(mine.id)
    assert done.value.code == "not_cancellable"
    theirs.close()
    other.close()
    client.close()


def test_input_items_are_the_recorded_input(user, replies):
    client = sdk(user)
    replies.set("resp items", text_reply("Items."))
    response = client.responses.create(
        model="default",
        input=[
            {"role": "user", "content": "earlier"},
            {"role": "assistant", "content": [{"type": "output_text", "text": "reply"}]},
            {"role": "user", "content": [{"type": "input_text", "text": "resp items"}]},
        ],
    )
    items = client.responses.input_items.list(response.id, order="asc").data
    assert [(i.role, i.content[0].text) for i in items] == [
        ("user", "earlier"),
        ("assistant", "reply"),
        ("user", "resp items"),
    ]
    newest = client.responses.input_items.list(response.id, limit=1)
    assert newest.data[0].content[0].text == "resp items" and newest.has_more
    client.close()


def test_instructions_reach_this_run_alone(user, replies, e2e_llm):
    client = sdk(user)
    replies.set("resp told", text_reply("Told."))
    replies.set("resp after", text_reply("After."))
    first = client.responses.create(model="default", input="resp told", instructions="Be terse.")
    assert first.instructions == "Be terse."
    told = next(b for b in reversed(e2e_llm.requests) if b["messages"][-1].get("content") == "resp told")
    assert [m["role"] for m in told["messages"]][:2] == ["system", "system"]
    assert told["messages"][1]["content"] == "Be terse."
    client.responses.create(model="default", input="resp after", previous_response_id=first.id)
    after = next(b for b in reversed(e2e_llm.requests) if b["messages"][-1].get("content") == "resp after")
    assert all(m.get("content") != "Be terse." for m in after["messages"])
    client.close()


def read_events(response: httpx.Response, count: int | None = None) -> list[dict]:
    """The data of the SSE events of a streamed answer, at most `count` of them."""
    events: list[dict] = []
    for line in response.iter_lines():
        if line.startswith("data: "):
            events.append(json.loads(line[6:]))
            if count is not None and len(events) == count:
                break
    return events


def test_a_stream_cut_half_way_resumes_with_exactly_the_missing_events(user, replies):
    token = user.token()
    headers = {"Authorization": f"Bearer {token}"}
    text = answer_text(60, "cut")
    replies.set("resp cut", slow_text_reply(text, chunks=60, delay=0.03))
    base = user.server.base
    with httpx.stream(
        "POST",
        f"{base}/v1/responses",
        json={"model": "default", "input": "resp cut", "stream": True},
        headers=headers,
        timeout=30,
    ) as live:
        run = live.headers["X-Agentsite-Run"]
        first = read_events(live, count=8)  # then the client goes
    response = "resp_" + run.replace("-", "")
    last = first[-1]["sequence_number"]
    with httpx.stream(
        "GET", f"{base}/v1/responses/{response}?stream=true&starting_after={last}", headers=headers, timeout=30
    ) as resumed_stream:
        resumed = read_events(resumed_stream)
    assert [e["sequence_number"] for e in resumed] == list(range(last + 1, last + 1 + len(resumed)))
    assert resumed[-1]["type"] == "response.completed"
    whole = sse_events(httpx.get(f"{base}/v1/responses/{response}?stream=true", headers=headers, timeout=30).text)
    assert whole == first + resumed  # event n is the same on every read
    deltas = "".join(e["delta"] for e in whole if e["type"] == "response.output_text.delta")
    assert deltas == text == resumed[-1]["response"]["output"][0]["content"][0]["text"]
    # Last-Event-ID counts as starting_after
    again = httpx.get(
        f"{base}/v1/responses/{response}?stream=true", headers={**headers, "Last-Event-ID": str(last)}, timeout=30
    )
    assert sse_events(again.text) == resumed


def test_cancel_and_run_in_progress(user, replies):
    client = sdk(user)
    replies.set("resp long", slow_text_reply(answer_text(200, "long"), chunks=200, delay=0.05))
    started = client.responses.create(model="default", input="resp long", background=True)
    assert started.status == "in_progress" and started.background
    with pytest.raises(openai.ConflictError) as busy:
        client.responses.create(model="default", input="x", previous_response_id=started.id)
    assert busy.value.code == "run_in_progress"
    cancelled = client.responses.cancel(started.id)
    assert cancelled.status == "cancelled" and cancelled.usage is not None
    assert client.responses.cancel(started.id).status == "cancelled"  # unchanged
    assert client.responses.retrieve(started.id).status == "cancelled"
    client.close()


def test_delete_removes_the_conversation_and_every_response_of_it(user, replies):
    client = sdk(user)
    replies.set("resp gone 1", text_reply("One."))
    replies.set("resp gone 2", text_reply("Two."))
    first = client.responses.create(model="default", input="resp gone 1")
    second = client.responses.create(model="default", input="resp gone 2", previous_response_id=first.id)
    other = SyncUser(user.server)
    with pytest.raises(openai.NotFoundError):
        sdk(other).responses.delete(second.id)
    other.close()
    client.responses.delete(second.id)
    for gone in (first.id, second.id):
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(gone)
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="default", input="x", previous_response_id=first.id)
    assert refused.value.code == "previous_response_not_found"
    client.close()


def test_conversation_continues_the_newest_branch(user, replies, e2e_llm):
    client = sdk(user)
    replies.set("resp conv 1", text_reply("C1."))
    replies.set("resp conv 2", text_reply("C2."))
    raw = client.responses.with_raw_response.create(model="default", input="resp conv 1")
    conversation = raw.headers["X-Agentsite-Conversation"]
    second = client.responses.create(model="default", input="resp conv 2", conversation=conversation)
    assert second.conversation.id == conversation and second.output_text == "C2."
    with pytest.raises(openai.NotFoundError) as missing:
        client.responses.create(model="default", input="x", conversation="00000000-0000-0000-0000-000000000000")
    assert missing.value.code == "conversation_not_found"
    with pytest.raises(openai.BadRequestError) as mismatch:
        client.responses.create(model="other", input="x", conversation=conversation)
    assert mismatch.value.code == "model_mismatch" and mismatch.value.param == "model"
    client.close()


@pytest.fixture(scope="module")
def one_stream_server(databases, make_server):
    return make_server(
        databases.new(),
        name="v1-responses-seats",
        AGENT_MESSAGES_PER_MINUTE="1000",
        AGENT_MAX_SOCKETS_PER_USER="1",
        AGENT_APPROVAL_TOOLS="calculator",
    )


def test_streams_count_in_the_users_open_streams(one_stream_server, replies):
    person = SyncUser(one_stream_server)
    client = sdk(person)
    replies.set("resp seat", slow_text_reply(answer_text(40, "seat"), chunks=40, delay=0.1))
    replies.set("resp seat 2", text_reply("Second."))
    started = client.responses.create(model="default", input="resp seat", background=True)
    headers = {"Authorization": f"Bearer {person.token()}"}
    url = f"{one_stream_server.base}/v1/responses/{started.id}?stream=true"
    opened, read = threading.Event(), []

    def reader() -> None:  # a client that reads its stream as it comes
        with httpx.stream("GET", url, headers=headers, timeout=30) as held:
            for line in held.iter_lines():
                if line.startswith("data: "):
                    read.append(json.loads(line[6:]))
                    opened.set()

    thread = threading.Thread(target=reader)
    thread.start()
    assert opened.wait(10)
    with pytest.raises(openai.RateLimitError) as refused:
        client.responses.create(model="default", input="x", stream=True)
    assert refused.value.code == "rate_limit_exceeded"
    thread.join(30)
    assert read[-1]["type"] == "response.completed"
    events = list(client.responses.create(model="default", input="resp seat 2", stream=True))
    assert events[-1].response.output_text == "Second."  # the seat came back
    client.close()
    person.close()


def test_a_tool_call_is_an_mcp_call_item_streamed_and_whole(user, replies):
    client = sdk(user)
    replies.set(
        "resp tool",
        tool_call_reply(("calculator", {"expression": "2*21"}), ("calculator", {"expression": "1/0"})),
        text_reply("42."),
    )
    events = list(client.responses.create(model="default", input="resp tool", stream=True))
    final = events[-1].response
    assert [item.type for item in final.output] == ["mcp_call", "mcp_call", "message"]
    good, bad = final.output[0], final.output[1]
    assert (good.name, good.server_label, good.status, good.output) == ("calculator", "agentsite", "completed", "42")
    assert json.loads(good.arguments) == {"expression": "2*21"}
    assert bad.status == "failed" and bad.error is not None
    types = [e.type for e in events]
    assert types.count("response.mcp_call_arguments.done") == 2 and "response.mcp_call.failed" in types
    assert final.output_text == "42."
    assert client.responses.retrieve(final.id).model_dump() == final.model_dump()
    client.close()


def test_a_stream_whose_conversation_is_deleted_ends_with_an_error_event(user, replies):
    token = user.token()
    headers = {"Authorization": f"Bearer {token}"}
    replies.set("resp doomed", slow_text_reply(answer_text(100, "doom"), chunks=100, delay=0.05))
    base = user.server.base
    with httpx.stream(
        "POST",
        f"{base}/v1/responses",
        json={"model": "default", "input": "resp doomed", "stream": True},
        headers=headers,
        timeout=30,
    ) as live:
        conversation = live.headers["X-Agentsite-Conversation"]
        events: list[dict] = []
        for line in live.iter_lines():
            if not line.startswith("data: "):
                continue
            events.append(json.loads(line[6:]))
            if len(events) == 5:
                gone = httpx.delete(f"{base}/api/conversations/{conversation}/", headers=headers, timeout=10)
                assert gone.status_code == 204
    last = events[-1]
    assert (last["type"], last["code"], last["param"]) == ("error", "not_found", None)
    assert last["sequence_number"] == events[-2]["sequence_number"] + 1


def test_a_chat_page_run_is_a_response_and_a_responses_run_on_its_conversation_is_unattended(
    one_stream_server, replies
):
    person = SyncUser(one_stream_server)
    client = sdk(person)
    conversation = person.conversation()
    replies.set("page first", text_reply("Page answer."))
    sent = person.http.post(
        f"/api/conversations/{conversation}/messages/",
        json={"content": "page first"},
        headers=person.unsafe_headers,
    )
    assert sent.status_code == 202, sent.text
    page_response = "resp_" + sent.json()["runId"].replace("-", "")
    for _ in range(100):
        if client.responses.retrieve(page_response).status != "in_progress":
            break
        time.sleep(0.1)
    page = client.responses.retrieve(page_response)
    assert page.status == "completed" and page.output_text == "Page answer."
    (item,) = client.responses.input_items.list(page_response).data
    assert item.content[0].text == "page first"
    # Continued through the Responses API, a tool needing approval is denied at once.
    replies.set("resp approve", tool_call_reply(("calculator", {"expression": "1+1"})), text_reply("Denied."))
    answer = client.responses.create(model="default", input="resp approve", previous_response_id=page_response)
    call = answer.output[0]
    assert call.type == "mcp_call" and call.status == "failed"
    assert json.loads(call.arguments) == {"expression": "1+1"}
    assert answer.output_text == "Denied." and answer.conversation.id == conversation
    client.close()
    person.close()


def image_message(text: str, png: bytes) -> list[dict]:
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    return [
        {"role": "user", "content": [{"type": "input_text", "text": text}, {"type": "input_image", "image_url": url}]}
    ]


def test_images_of_a_continued_conversation_keep_the_earlier_ones(user, replies):
    client = sdk(user)
    replies.set("resp pic 1", text_reply("One."))
    replies.set("resp pic 2", text_reply("Two."))
    first = client.responses.create(model="default", input=image_message("resp pic 1", plain_png(4, 3)))
    second = client.responses.create(
        model="default", input=image_message("resp pic 2", plain_png(5, 2)), previous_response_id=first.id
    )
    images = [
        client.responses.input_items.list(response.id).data[0].content[1].image_url for response in (first, second)
    ]
    conversation = first.conversation.id
    assert images == [
        f"/api/conversations/{conversation}/files/image-1.png",
        f"/api/conversations/{conversation}/files/image-2.png",
    ]
    files = {f["path"]: f["size"] for f in user.http.get(f"/api/conversations/{conversation}/files/").json()["files"]}
    assert files == {"image-1.png": len(plain_png(4, 3)), "image-2.png": len(plain_png(5, 2))}
    client.close()


def test_a_session_creates_with_its_csrf_token_and_is_refused_without(user, replies):
    replies.set("resp session", text_reply("Session answer."))
    body = {"model": "default", "input": "resp session"}
    r = user.http.post("/v1/responses", json=body, headers=user.unsafe_headers)
    assert r.status_code == 200, r.text
    assert r.json()["output"][-1]["content"][0]["text"] == "Session answer."
    assert user.http.get(f"/v1/responses/{r.json()['id']}").json()["status"] == "completed"
    r = user.http.post("/v1/responses", json=body, headers={"Referer": user.server.base})
    assert (r.status_code, r.json()["error"]["code"]) == (403, "csrf_failed")


def test_a_stream_whose_token_is_revoked_ends_with_invalid_api_key(user, replies):
    made = user.http.post("/api/tokens/", json={"name": "doomed"}, headers=user.unsafe_headers).json()
    headers = {"Authorization": f"Bearer {made['token']}"}
    replies.set("resp revoked", slow_text_reply(answer_text(100, "rv"), chunks=100, delay=0.05))
    with httpx.stream(
        "POST",
        f"{user.server.base}/v1/responses",
        json={"model": "default", "input": "resp revoked", "stream": True},
        headers=headers,
        timeout=30,
    ) as live:
        events: list[dict] = []
        for line in live.iter_lines():
            if not line.startswith("data: "):
                continue
            events.append(json.loads(line[6:]))
            if len(events) == 5:
                gone = user.http.delete(f"/api/tokens/{made['id']}/", headers=user.unsafe_headers)
                assert gone.status_code in (200, 204), gone.text
    assert (events[-1]["type"], events[-1]["code"]) == ("error", "invalid_api_key")
    assert events[-1]["sequence_number"] == events[-2]["sequence_number"] + 1
