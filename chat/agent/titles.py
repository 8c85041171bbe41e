"""A conversation's title, asked of its model after its first answer (docs/protocol.md, "Titles, pinning, archiving").

One small model call: the first message and its answer, then a request for a title; what comes
back is cleaned into a few words. The server (chat.runtime.titles) decides when to ask, records
the call and stores the title: this module, like the rest of chat/agent, knows nothing of it.

    attempt = await ask_title(model, question="what is 6*7?", answer="42.")
    attempt.title    # "Multiplying six by seven"; "" when the call failed or said nothing usable
    attempt.record   # the ModelCallRecord of the call, failed or not
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from .llm import ChatModel
from .model_errors import ModelCallError
from .text import clean
from .trace import ModelCallRecord
from .turns import ModelRequest, ModelTurn, Usage

# The last message of a title request: the demo model knows a title request by it (chat.agent.demo).
TITLE_REQUEST = (
    "Write a title for this conversation: 2 to 8 words, in the language of the conversation, "
    "without quotes or final punctuation. Answer with the title alone."
)
TITLE_WORDS = 8
TITLE_CHARS = 60
# The message and the answer are cut to this: a title needs their gist, not their length.
EXCERPT_CHARS = 2000

_LABEL = re.compile(r"^\s*(?:title|标题)\s*[:：]\s*", re.IGNORECASE)
_WRAPPING = "\"'“”‘’«»「」『』《》*_#`"
_FINAL_PUNCTUATION = ".,;:!?。，；：！？、…"


@dataclass(frozen=True)
class TitleAttempt:
    title: str  # "" when the call failed or its reply held no title
    record: ModelCallRecord
    error: str = ""  # why there is no title


def title_messages(question: str, answer: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": question[:EXCERPT_CHARS]},
        {"role": "assistant", "content": answer[:EXCERPT_CHARS]},
        {"role": "user", "content": TITLE_REQUEST},
    ]


def title_of(reply: str) -> str:
    """The title in a model's reply: its first line with text, without a "Title:" label, quotes,
    Markdown marks or final punctuation; at most TITLE_WORDS words and TITLE_CHARS characters."""
    line = next((line for line in reply.splitlines() if line.strip(_WRAPPING + " \t")), "")
    text = " ".join(_LABEL.sub("", line.strip(_WRAPPING + " \t")).split()).strip(_WRAPPING + " ")
    text = " ".join(text.split()[:TITLE_WORDS])
    if len(text) > TITLE_CHARS:
        cut = text[:TITLE_CHARS]
        # On a word's end when there is one in the second half (a language without spaces has none).
        text = cut[: cut.rfind(" ")] if cut.rfind(" ") > TITLE_CHARS // 2 else cut
    return clean(text.rstrip(_FINAL_PUNCTUATION + _WRAPPING + " "))


async def ask_title(model: ChatModel, *, question: str, answer: str, keep_messages: bool = False) -> TitleAttempt:
    """One call of `model` for the title of a conversation that began with `question` and `answer`;
    never raises ModelCallError (the attempt says why it has no title). `keep_messages`: the
    record holds the request's messages (AGENT_TRACE_REQUESTS)."""
    request = ModelRequest(messages=title_messages(question, answer), options=model.options)
    started_at, t0 = time.time(), time.monotonic()
    first: float | None = None
    turn: ModelTurn | None = None
    error = ""
    try:
        async for item in model.stream(request):
            if isinstance(item, ModelTurn):
                turn = item
            elif first is None:
                first = time.monotonic()
    except ModelCallError as exc:
        error = exc.detail
    usage = (turn.usage if turn is not None else None) or Usage()
    record = ModelCallRecord(
        iteration=0,  # no round of the loop
        attempt=1,
        started_at=started_at,
        first_token_ms=None if first is None else int((first - t0) * 1000),
        duration_ms=int((time.monotonic() - t0) * 1000),
        message_count=len(request.messages),
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
        finish_reason=(turn.finish_reason or "") if turn is not None else "",
        error=error,
        messages=list(request.messages) if keep_messages else None,
        purpose="title",
    )
    title = title_of(turn.content) if turn is not None else ""
    if not title and not error:
        error = "the model's reply held no title"
    return TitleAttempt(title=title, record=record, error=error)
