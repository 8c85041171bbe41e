"""The offline demo model: an httpx2 transport that speaks OpenAI's streaming format.

It lets a fresh install show the whole timeline (thinking, a tool call, the
answer) with no API key, and goes through exactly the client path a real
provider does: AsyncOpenAI -> HTTP request -> server-sent events -> parser.
It is deterministic and says plainly that it is a demo.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import re
import time
import zoneinfo
from collections.abc import AsyncIterator
from typing import Any

import httpx2

from .estimate import estimate_usage, text_tokens
from .titles import TITLE_REQUEST, TITLE_WORDS

DEMO_BASE_URL = "http://demo.agentsite.invalid/v1"

_ARITHMETIC = re.compile(r"[-+(]*\d[\d.\s]*(?:[-+*/%^×÷][\s(]*[-+]?\d[\d.\s)]*)+")
_TIME_WORDS = re.compile(r"\b(time|date|today|clock|hour)\b|时间|几点|日期", re.IGNORECASE)
_REVERSE_STRING = re.compile(r"revers\w*\b.*\bstring|反转字符串", re.IGNORECASE | re.DOTALL)
# The note chat.eventlog.history adds to a message with files, and its first entry: path, then a PDF's text.
_ATTACHED = re.compile(r"\[Attached files in your workspace \(read them with read_file\): (.*)\]\s*$", re.DOTALL)
_ATTACHMENT_ENTRY = re.compile(r"(.+?) \((?:\d+|\?) bytes(?:; its text is in (.+?))?\)(?:, |$)")
# Places named in other scripts than the zone names' (the page's Chinese suggestions ask about 上海).
_PLACE_ALIASES = {"上海": "Asia/Shanghai", "北京": "Asia/Shanghai", "东京": "Asia/Tokyo", "伦敦": "Europe/London"}

HOW_TO_CONFIGURE = (
    "To use a real model, set `OPENAI_API_KEY` (and `OPENAI_BASE_URL` for DeepSeek, MiniMax, "
    "DashScope, Ollama or vLLM) and `AGENT_MODEL`, then restart the server."
)


def _chunks_of(text: str) -> list[str]:
    """Word-sized pieces, like a tokenizer would stream them."""
    return re.findall(r"\s*\S+|\s+", text)


class _Script:
    """The chunks of one streamed reply."""

    def __init__(self) -> None:
        self.deltas: list[dict[str, Any]] = []
        self.finish_reason = "stop"

    def say(self, text: str) -> None:
        self.deltas.extend({"content": piece} for piece in _chunks_of(text))

    def call(self, name: str, arguments: dict[str, Any]) -> None:
        index = sum(1 for d in self.deltas if "tool_calls" in d and d["tool_calls"][0].get("id"))
        args = json.dumps(arguments)
        self.deltas.append(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": f"call_demo_{index}",
                        "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }
                ]
            }
        )
        middle = len(args) // 2
        for piece in (args[:middle], args[middle:]):
            self.deltas.append({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        self.finish_reason = "tool_calls"


def _zone_named_in(question: str) -> str:
    """The IANA zone of a place the question names ("in Shanghai" -> Asia/Shanghai), else UTC."""
    for alias, zone in _PLACE_ALIASES.items():
        if alias in question:
            return zone
    text = " ".join(re.findall(r"[a-z]+", question.lower()))
    for zone in sorted(zoneinfo.available_timezones()):
        place = zone.rsplit("/", 1)[-1].replace("_", " ").lower()
        if "/" in zone and re.search(rf"\b{re.escape(place)}\b", text):
            return zone
    return "UTC"


REVERSE_STRING_ANSWER = """<think>A code request the demo knows by heart.</think>Here is a Python function that reverses a string:

```python
def reverse(text: str) -> str:
    return text[::-1]  # a slice that steps backwards
```

| input | `reverse(input)` |
|---|---|
| `"hello"` | `"olleh"` |
| `"agentsite"` | `"etistnega"` |
| `""` | `""` |

(Written by the offline demo model, which knows only this one program.)"""


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
            return content or ""
    return ""


def _image_sizes(messages: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """(width, height) of each image the last user message shows, as sent."""
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            parts = content if isinstance(content, list) else []
            urls = [(p.get("image_url") or {}).get("url", "") for p in parts if isinstance(p, dict)]
            return [size for size in map(_image_size, urls) if size]
    return []


def _image_size(url: Any) -> tuple[int, int] | None:
    """Width and height from the header of a data URL's PNG or JPEG (what the server sends): the
    demo reads them by hand, the agent core depending on nothing."""
    if not isinstance(url, str) or ";base64," not in url:
        return None
    try:
        data = base64.b64decode(url.split(",", 1)[1][:131072] + "==", validate=False)
    except (binascii.Error, ValueError):
        return None
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    at = 2 if data[:2] == b"\xff\xd8" else len(data)
    while at + 9 <= len(data) and data[at] == 0xFF:
        marker, length = data[at + 1], int.from_bytes(data[at + 2 : at + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a start of frame
            return int.from_bytes(data[at + 7 : at + 9], "big"), int.from_bytes(data[at + 5 : at + 7], "big")
        at += 2 + length
    return None


def _attached_file(question: str) -> str | None:
    """The first file the server's attachment note names (chat.eventlog.history), its text for a PDF."""
    note = _ATTACHED.search(question)
    entry = _ATTACHMENT_ENTRY.match(note.group(1)) if note else None
    if entry is None:
        return None
    return entry.group(2) or entry.group(1)


def _describe_file(content: str) -> str:
    """What the demo can say of a file read_file returned: its lines, a CSV's columns, the start."""
    body = re.sub(r"\n\[\.\.\. \d+ more bytes of \d+;[^\]]*\]$", "", content)
    lines = body.splitlines()
    head = "\n".join(lines[:8])
    fence = "`" * max(3, max((len(m) for m in re.findall(r"`+", head)), default=0) + 1)
    said = f"I read the file: {len(lines)} line{'s' if len(lines) != 1 else ''} in the part I was given."
    if lines and lines[0].count(",") >= 1:
        columns = [column.strip() for column in lines[0].split(",")]
        said += f" It looks like CSV with {len(columns)} columns: {', '.join(columns)}; {len(lines) - 1} data rows."
    return f"{said} It begins:\n\n{fence}\n{head}\n{fence}\n\n(A real model would go on to analyse it; this is the offline demo model.)"


def _called_tool(messages: list[dict[str, Any]]) -> str:
    """The name of the tool the last assistant message called."""
    for message in reversed(messages):
        if message.get("role") == "assistant" and message.get("tool_calls"):
            return message["tool_calls"][0].get("function", {}).get("name", "")
    return ""


def demo_title(first_message: str) -> str:
    """A title the demo makes of a conversation's first message (chat.agent.titles asks): its first
    words, each begun with a capital, without the question's punctuation. Deterministic, offline."""
    line = next((line for line in first_message.splitlines() if line.strip()), "")
    words = [word.strip("?!.,;:？！。，") for word in line.split()[: TITLE_WORDS - 2]]
    return " ".join(word[:1].upper() + word[1:] for word in words if word) or "Demo Conversation"


def demo_reply(body: dict[str, Any]) -> _Script:
    messages = body.get("messages", [])
    tools = {t.get("function", {}).get("name") for t in body.get("tools") or []}
    script = _Script()
    last = messages[-1] if messages else {}
    if last.get("role") == "user" and last.get("content") == TITLE_REQUEST:
        first: dict[str, Any] = next((m for m in messages if m.get("role") == "user"), {})
        script.say(demo_title(_last_user_text([first])))
        return script
    if last.get("role") == "tool":
        results: list[str] = []
        for message in reversed(messages):
            if message.get("role") != "tool":
                break
            results.insert(0, message.get("content", ""))
        script.say("<think>The tool answered; I can reply now.</think>")
        if any(r.startswith('{"error"') for r in results):
            script.say(f"The tool reported a problem: {results[0]} (This is the offline demo model.)")
        elif _called_tool(messages) == "read_file":
            script.say(_describe_file(results[0]))
        else:
            script.say(f"The tool says: **{'; '.join(results)}**. (Answered by the offline demo model.)")
        return script

    question = _last_user_text(messages)
    sizes = _image_sizes(messages)
    if sizes:
        said = "; ".join(f"{width} × {height} pixels" for width, height in sizes)
        script.say(
            f"<think>The user showed me {len(sizes)} image{'s' if len(sizes) > 1 else ''}.</think>"
            f"I was sent {'an image' if len(sizes) == 1 else f'{len(sizes)} images'}: **{said}** (as sent to me, "
            "scaled to fit the server's limit). The offline demo model sees only sizes, not what is in a picture."
        )
        return script
    attached = _attached_file(question)
    if attached and "read_file" in tools:
        script.say(f"<think>The user attached a file; I will read {attached} first.</think>")
        script.call("read_file", {"path": attached})
        return script
    expression = _ARITHMETIC.search(question)
    if expression and "calculator" in tools:
        expr = expression.group(0).strip()
        script.say(f"<think>The user asks for arithmetic: {expr}. I will use the calculator tool.</think>")
        script.call("calculator", {"expression": expr})
        return script
    if _TIME_WORDS.search(question) and "current_time" in tools:
        script.say("<think>The user asks about the time; I will call current_time.</think>")
        script.call("current_time", {"timezone": _zone_named_in(question)})
        return script
    if _REVERSE_STRING.search(question):
        script.say(REVERSE_STRING_ANSWER)
        return script
    script.say(
        "<think>This is not arithmetic or a question about the time, which is all the demo can do.</think>"
        "I am the **offline demo model** of agentsite: I can do arithmetic with the calculator "
        "(try `what is 6 * 7?`) and tell the time (try `what time is it in Tokyo?`), and that is all. "
        + HOW_TO_CONFIGURE
    )
    return script


class _EventStream(httpx2.AsyncByteStream):
    def __init__(self, script: _Script, *, model: str, include_usage: bool, usage: dict[str, int], delay: float):
        self.script = script
        self.model = model
        self.include_usage = include_usage
        self.usage = usage
        self.delay = delay

    def _frame(self, delta: dict[str, Any] | None, finish: str | None = None, usage: dict | None = None) -> bytes:
        chunk: dict[str, Any] = {
            "id": "chatcmpl-demo",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self.model,
            "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if usage is not None:
            chunk["usage"] = usage
        return f"data: {json.dumps(chunk)}\n\n".encode()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self._frame({"role": "assistant", "content": ""})
        for delta in self.script.deltas:
            if self.delay:
                await asyncio.sleep(self.delay)
            yield self._frame(delta)
        yield self._frame({}, finish=self.script.finish_reason)
        if self.include_usage:
            yield self._frame(None, usage=self.usage)
        yield b"data: [DONE]\n\n"


def _reply_texts(script: _Script) -> list[str]:
    """What a reply generated: its text (thinking tags included) and its tool calls' names and arguments."""
    texts = []
    for delta in script.deltas:
        texts.append(delta.get("content") or "")
        for call in delta.get("tool_calls") or ():
            function = call.get("function") or {}
            texts += [function.get("name") or "", function.get("arguments") or ""]
    return texts


def demo_usage(body: dict[str, Any], script: _Script) -> dict[str, int]:
    """The usage the demo reports, counted as chat.agent.estimate counts a call cut by Stop: its
    whole prompt (messages, tool schemas, images) and what it generated. A run stopped in the
    demo then counts tokens of the same kind as one that completes."""
    prompt = estimate_usage(body.get("messages") or [], body.get("tools") or [], "").prompt_tokens
    completion = text_tokens(_reply_texts(script))
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


class DemoTransport(httpx2.AsyncBaseTransport):
    def __init__(self, *, chunk_delay: float = 0.03):
        self.chunk_delay = chunk_delay

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if not request.url.path.endswith("/chat/completions"):
            return httpx2.Response(404, json={"error": {"message": "the demo model only serves chat completions"}})
        body = json.loads(await request.aread() or b"{}")
        script = demo_reply(body)
        stream = _EventStream(
            script,
            model=body.get("model", "demo"),
            include_usage=bool((body.get("stream_options") or {}).get("include_usage")),
            usage=demo_usage(body, script),
            delay=self.chunk_delay,
        )
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)
