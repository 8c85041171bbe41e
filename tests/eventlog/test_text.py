"""chat.agent.text: what may be stored and sent, and the one cleaning step every row passes."""

from __future__ import annotations

import importlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx2
import orjson
import pytest

from chat.agent.text import REPLACEMENT, clean, clean_value, invalid_reason
from chat.conversations.services import conversation_create, conversation_rename
from chat.eventlog.append import events_append
from chat.eventlog.types import RunOutcome
from chat.runs.starts import run_start

BAD = ["\ud800", "\udfff", "a\x00b", "\ud83d", "\x00"]


@pytest.mark.parametrize("text", BAD)
def test_bad_text_has_a_reason_and_is_cleaned_to_storable_text(text):
    assert invalid_reason(text)
    cleaned = clean(text)
    cleaned.encode("utf-8")  # would raise on a surrogate
    assert "\x00" not in cleaned and REPLACEMENT in cleaned
    assert invalid_reason(cleaned) is None


def test_reasons_say_what_and_where():
    assert invalid_reason("ab\x00") == "a NUL character at position 2"
    assert invalid_reason("x\ud800") == "a lone surrogate (U+D800) at position 1"


@pytest.mark.parametrize("text", ["", "plain", "é ü 中文 😀", "tab\tand\nnewline", "\ufffd already"])
def test_good_text_passes_unchanged(text):
    assert invalid_reason(text) is None
    assert clean(text) == text


def test_clean_keeps_the_rest_and_joins_split_pairs():
    assert clean("ok \ud800 and \x00 end") == f"ok {REPLACEMENT} and {REPLACEMENT} end"
    # unicode_escape decodes "\\ud83d\\ude00" to two code points: they are one character.
    assert clean(b"\\ud83d\\ude00".decode("unicode_escape")) == "😀"
    assert clean("\udc00\ud800") == REPLACEMENT * 2  # the wrong order is no pair


def test_clean_value_reaches_nested_values_and_keys():
    value = {
        "type": "reference",
        "references": [{"title": "t\ud800", "url": "u\x00", "snippet": ["\udfff", 3]}],
        "k\x00": None,
        "n": 1.5,
        "b": True,
    }
    cleaned = clean_value(value)
    assert cleaned == {
        "type": "reference",
        "references": [{"title": "t\ufffd", "url": "u\ufffd", "snippet": ["\ufffd", 3]}],
        "k\ufffd": None,
        "n": 1.5,
        "b": True,
    }
    orjson.dumps(cleaned)  # sendable
    assert "\\u0000" not in json.dumps(cleaned)  # storable in PostgreSQL's jsonb


# --- the one cleaning step of the event log (chat/eventlog/append.py) --------------------------------------------


def is_clean(value) -> bool:
    return clean_value(value) == value


@pytest.mark.django_db(transaction=True)
@pytest.mark.services
def test_events_tool_records_and_outcome_are_stored_clean(conversation):
    from django.utils import timezone

    from chat.eventlog.append import events_append
    from chat.eventlog.reads import events_after
    from chat.eventlog.types import RunOutcome, ToolRecordData
    from chat.models import Event, Run, ToolRecord
    from chat.runs.starts import run_start

    run, _ = run_start(conversation=conversation, user=conversation.owner, content="hi", model="m", worker="w")
    payloads = [
        {"type": "text", "content": "a\x00b\ud800c"},
        {"type": "reference", "references": [{"title": "t\ud800", "url": "https://x.example/\x00", "snippet": "s"}]},
        {"type": "tool_start", "toolName": "to\x00ol", "toolCallId": "c\ud8001", "arguments": '{"p": "\x00"}'},
        {
            "type": "tool_end",
            "toolName": "to\x00ol",
            "toolCallId": "c\ud8001",
            "result": "r\x00\udfff",
            "isError": False,
            "durationMs": 1,
        },
        {"type": "complete", "status": "failed"},
    ]
    record = ToolRecordData(
        tool_call_id="c\ud8001",
        tool_name="to\x00ol",
        arguments='{"p": "\x00"}',
        result="r\x00\udfff",
        is_error=False,
        started_at=timezone.now(),
        duration_ms=1,
    )
    outcome = RunOutcome(status="failed", error="LLM_CALL_FAILED: bad \x00 byte \ud800")
    frames = events_append(
        conversation_id=conversation.pk, run_id=run.pk, payloads=payloads, tool_records=[record], outcome=outcome
    )

    assert frames[0]["content"] == "a\ufffdb\ufffdc"
    assert frames[1]["references"][0] == {"title": "t\ufffd", "url": "https://x.example/\ufffd", "snippet": "s"}
    assert frames[3]["result"] == "r\ufffd\ufffd"
    replay = events_after(conversation_id=conversation.pk)
    assert replay[1:] == frames  # what was published is what is stored
    orjson.dumps(replay)  # every frame can be sent
    assert all(is_clean(e.payload) for e in Event.objects.filter(conversation=conversation))
    stored = ToolRecord.objects.get(run=run)
    assert (stored.tool_call_id, stored.tool_name, stored.arguments, stored.result) == (
        "c\ufffd1",
        "to\ufffdol",
        '{"p": "\ufffd"}',
        "r\ufffd\ufffd",
    )
    assert Run.objects.get(pk=run.pk).error == "LLM_CALL_FAILED: bad \ufffd byte \ufffd"


@pytest.mark.django_db(transaction=True)
@pytest.mark.services
def test_services_clean_titles(make_user):

    conversation = conversation_create(owner=make_user("alice"), title=" a\x00b\ud800 ")
    conversation.refresh_from_db()
    assert conversation.title == "a\ufffdb\ufffd"
    conversation_rename(conversation=conversation, title="\udfffx\x00")
    conversation.refresh_from_db()
    assert conversation.title == "\ufffdx\ufffd"


# --- refused at the edge --------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.services
@pytest.mark.parametrize("title", ["bad \ud800 title", "nul \x00 title"], ids=["surrogate", "nul"])
def test_api_refuses_titles_that_cannot_be_stored(make_user, title):
    from django.test import Client

    from chat.models import Conversation

    client = Client()
    client.force_login(make_user("alice"))
    body = json.dumps({"title": title})  # the JSON escape, as a browser would send it
    created = client.post("/api/conversations/", data=body, content_type="application/json")
    assert created.status_code == 400
    assert created.json()["error"] == "bad_request" and "cannot be stored" in created.json()["message"]
    assert not Conversation.objects.exists()

    fine = client.post("/api/conversations/", data={"title": "fine"}, content_type="application/json")
    conversation_id = fine.json()["id"]
    patched = client.patch(f"/api/conversations/{conversation_id}/", data=body, content_type="application/json")
    assert patched.status_code == 400 and "cannot be stored" in patched.json()["message"]
    assert client.get(f"/api/conversations/{conversation_id}/").json()["title"] == "fine"


@pytest.mark.django_db(transaction=True)
@pytest.mark.services
@pytest.mark.parametrize("content", ["hi \ud800", "\udfff", "nul \x00 here"], ids=["surrogate", "low", "nul"])
async def test_socket_refuses_messages_that_cannot_be_stored(conversation, registry, content):
    from asgiref.sync import sync_to_async

    from chat.models import Event, Run
    from tests.asgi_socket import Socket

    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": content})
    error = await socket.recv()
    assert error["type"] == "error" and error["code"] == "BAD_REQUEST" and "seq" not in error
    assert "cannot be stored" in error["message"] and "position" in error["detail"]
    await socket.send({"type": "ping"})  # the socket stays open
    assert (await socket.recv())["type"] == "pong"
    await socket.close()
    assert not await sync_to_async(Run.objects.exists)()
    assert not await sync_to_async(Event.objects.exists)()


# --- a whole run whose model and tools produce text that cannot be stored as it is --------


class _Pages(BaseHTTPRequestHandler):
    PAGES = {
        # utf-7 would decode "+2AA-" to a lone surrogate: only real text encodings are used.
        "/utf7": ("text/plain; charset=utf-7", b"caf+AOk- +2AA- end"),
        "/escape": ("text/plain; charset=unicode_escape", b"x \\ud800 y"),
        "/nul": ("text/plain; charset=utf-8", b"before\x00after"),
    }

    def log_message(self, *args):
        pass

    def do_GET(self):
        content_type, body = self.PAGES[self.path]
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def pages():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def bad_search(monkeypatch):
    """Tavily answering with JSON escapes of a lone surrogate and NUL in a title and an extract."""
    search = importlib.import_module("chat.tools.web_search")  # the module: chat.tools.web_search names the tool

    body = b'{"results": [{"title": "Hit \\ud800", "url": "https://example.org/", "content": "nul \\u0000 \\udfff"}]}'
    monkeypatch.setattr(
        search,
        "TRANSPORT",
        httpx2.MockTransport(
            lambda request: httpx2.Response(200, content=body, headers={"content-type": "application/json"})
        ),
    )


@pytest.fixture
def text_tool_settings(settings, llm_settings, tmp_path):
    settings.AGENT_WORKSPACE_ROOT = tmp_path
    settings.AGENT_TOOLS = ["fetch_url", "web_search"]
    settings.AGENT_FETCH_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.TAVILY_API_KEY = "tvly-test"
    return llm_settings


@pytest.mark.django_db(transaction=True)
@pytest.mark.services
async def test_a_run_full_of_bad_text_is_stored_replayed_and_remembered(
    conversation, registry, text_tool_settings, pages, bad_search
):
    from asgiref.sync import sync_to_async

    from chat.models import Event, ToolRecord
    from tests.asgi_socket import Socket
    from tests.fakellm import text_reply, tool_call_reply

    fake = text_tool_settings
    calls = tool_call_reply(
        ("web_search", {"query": "q"}),
        ("fetch_url", {"url": f"{pages}/utf7"}),
        ("fetch_url", {"url": f"{pages}/escape"}),
        ("fetch_url", {"url": f"{pages}/nul"}),
        ("no\x00such_tool", '{"a": "\x00"}'),  # the model names a tool and arguments with NUL
    )
    calls["chunks"].insert(0, {"delta": {"content": "model \x00 says \ud800 "}})  # a lone surrogate escape
    fake.script(calls, text_reply("answer \x00 with \udfff", thinking="think \ud800"), text_reply("second answer"))

    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": "go"})
    live = await socket.until(lambda f: f["type"] == "complete", timeout=20)
    await socket.close()
    assert live[-1]["status"] == "succeeded", live[-3:]
    assert all(is_clean(frame) for frame in live)
    text = "".join(f["content"] for f in live if f["type"] == "text")
    assert text == "model \ufffd says \ufffd answer \ufffd with \ufffd"
    ends = sorted((f for f in live if f["type"] == "tool_end"), key=lambda f: f["toolCallId"])  # call_0...
    assert len(ends) == 5
    assert "Hit \ufffd" in ends[0]["result"] and "nul \ufffd \ufffd" in ends[0]["result"]
    assert "caf+AOk- +2AA- end" in ends[1]["result"]  # read as UTF-8, not utf-7
    assert "x \\ud800 y" in ends[2]["result"]  # the escape stays text
    assert "before\ufffdafter" in ends[3]["result"]
    assert ends[4]["isError"] and ends[4]["toolName"] == "no\ufffdsuch_tool"
    (reference,) = [f for f in live if f["type"] == "reference"]
    assert reference["references"][0]["title"] == "Hit \ufffd"

    # The tool results went back to the model: a request the SDK could send.
    memory = fake.requests[1]["messages"]
    assert is_clean(memory) and "Hit \ufffd" in memory[-5]["content"]

    # Everything stored is clean, and a new socket replays exactly what the live one got.
    events = await sync_to_async(lambda: [e.payload for e in Event.objects.filter(conversation=conversation)])()
    assert events and all(is_clean(payload) for payload in events)
    records = await sync_to_async(lambda: list(ToolRecord.objects.values("tool_name", "arguments", "result")))()
    assert len(records) == 5 and all(is_clean(record) for record in records)
    again = Socket(conversation.owner, conversation.pk)
    await again.connect()
    replay = await again.history()
    assert replay[:-1] == live

    # The next run's memory, read back from those rows, reaches the model too.
    await again.send({"type": "message", "content": "more"})
    second = await again.until(lambda f: f["type"] == "complete", timeout=20)
    await again.close()
    assert second[-1]["status"] == "succeeded"
    memory = fake.requests[-1]["messages"]
    assert is_clean(memory) and "Hit \ufffd" in json.dumps(memory, ensure_ascii=False)


# --- conversations poisoned before this step existed (SQLite stored their surrogates) ------


@pytest.mark.django_db(transaction=True)
async def test_a_conversation_stored_with_a_surrogate_opens_and_goes_on(conversation, registry, llm_settings):
    """Not `services`: PostgreSQL never stored such a row, so there is nothing to recover there."""
    from asgiref.sync import sync_to_async

    from chat.models import Event
    from tests.asgi_socket import Socket
    from tests.fakellm import text_reply

    def poison():
        run, _ = run_start(conversation=conversation, user=conversation.owner, content="old", model="m", worker="w")
        # Written the way the old code wrote it: straight to the row, no cleaning.
        Event.objects.filter(run=run, seq=1).update(payload={"type": "user_message", "content": "old \ud800"})
        events_append(
            conversation_id=conversation.pk,
            run_id=run.pk,
            payloads=[{"type": "complete", "status": "succeeded"}],
            outcome=RunOutcome(status="succeeded"),
        )

    await sync_to_async(poison)()
    llm_settings.script(text_reply("fine"))
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    history = await socket.history()
    assert history[0]["content"] == "old \ufffd" and history[-1]["type"] == "sync"
    await socket.send({"type": "message", "content": "new"})
    frames = await socket.until(lambda f: f["type"] == "complete", timeout=20)
    await socket.close()
    assert frames[-1]["status"] == "succeeded"
    users = [m["content"] for m in llm_settings.requests[-1]["messages"] if m["role"] == "user"]
    assert users == ["old \ufffd", "new"]  # the memory went out, cleaned


def test_event_json_keeps_text_as_utf8_and_an_old_surrogate_escaped():
    from chat.models import Utf8JSONEncoder

    assert Utf8JSONEncoder().encode({"content": "中文"}) == '{"content": "中文"}'
    # A lone surrogate read back from an older row cannot be UTF-8: it is written escaped, not refused.
    assert Utf8JSONEncoder().encode({"content": "old \ud800 中"}) == '{"content": "old \\ud800 \\u4e2d"}'
