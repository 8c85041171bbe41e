"""Conversations to share, written through the event log's own writers (run_start,
events_append): a tool call, thinking, an answer in two versions, an attachment and a hostile
Markdown answer. Used by the HTTP tests and seeded for the browser tests."""

from __future__ import annotations

from chat.conversations.services import conversation_create
from chat.eventlog.append import events_append
from chat.eventlog.types import RunOutcome
from chat.runs.starts import run_start

HOSTILE = (
    "Here: <img src=x onerror=\"document.title='pwned'\"> and [a link](javascript:document.title='pwned') "
    "and <script>document.title='pwned'</script><b onclick=\"document.title='pwned'\">raw html</b>"
    '<iframe src="https://example.com/"></iframe>'
)


def turn(conversation, user, answer: str, *, content: str = "", before=(), status: str = "succeeded", **version):
    """One run: its user_message, `before` (thinking, tools), the answer, complete. Its user_message's seq."""
    run, frames = run_start(conversation=conversation, user=user, content=content, model="m", worker="", **version)
    events_append(
        conversation_id=conversation.pk,
        run_id=run.pk,
        payloads=[*before, {"type": "text", "content": answer}, {"type": "complete", "status": status}],
        outcome=RunOutcome(status=status),
    )
    return frames[0]["seq"]


TOOL_ROUND = [
    {"type": "thinking", "content": "The user wants a product; the calculator is exact."},
    {"type": "tool_start", "toolName": "calculator", "toolCallId": "call-1", "arguments": '{"expression": "6*7"}'},
    {
        "type": "tool_end",
        "toolName": "calculator",
        "toolCallId": "call-1",
        "result": "42",
        "isError": False,
        "durationMs": 3,
    },
]


def shareable(owner, title: str = "Sums and a trap"):
    """A conversation of three turns: a tool call with thinking; a question answered twice
    (a regenerate: two versions of its answer); a hostile Markdown answer."""
    conversation = conversation_create(owner=owner, title=title)
    turn(conversation, owner, "It is **42**.", content="What is 6*7?", before=TOOL_ROUND)
    second = turn(conversation, owner, "Blue, version one.", content="Name a colour.")
    turn(conversation, owner, "Green, version two.", regenerates=second)
    turn(conversation, owner, HOSTILE, content="Show me some markup.")
    return conversation
