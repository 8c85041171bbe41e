"""`python -m tests.ui.seed_history USERNAME EVENTS`: a long finished conversation for USERNAME.

Writes the rows directly (runs of 20 events: a question, thinking, two tool calls, an
answer in Markdown deltas with a code block and a table), so that the page's history
rendering can be measured without waiting for hundreds of model runs. Prints the id.
"""

from __future__ import annotations

import os
import sys


def run_events(index: int) -> list[dict]:
    answer = [
        f"## Answer {index}\n\n",
        "Here is what I found, **step by step**:\n\n",
        "1. computed the value\n2. checked the time\n3. wrote it down\n\n",
        "```python\n",
        f"def answer_{index}(x):\n    return x * {index}\n",
        "```\n\n",
        "| input | output |\n|---|---|\n",
        f"| 1 | {index} |\n| 2 | {2 * index} |\n\n",
        f"Done with question {index}.",
    ]
    events = [{"type": "user_message", "content": f"Question number {index}: what is {index} * 6?"}]
    events += [{"type": "thinking", "content": part} for part in ("I should ", "use the ", "calculator.")]
    events += [
        {
            "type": "tool_start",
            "toolName": "calculator",
            "toolCallId": f"c{index}a",
            "arguments": f'{{"expression": "{index} * 6"}}',
        },
        {
            "type": "tool_end",
            "toolName": "calculator",
            "toolCallId": f"c{index}a",
            "result": str(index * 6),
            "isError": False,
            "durationMs": 3,
        },
        {"type": "tool_start", "toolName": "current_time", "toolCallId": f"c{index}b", "arguments": "{}"},
        {
            "type": "tool_end",
            "toolName": "current_time",
            "toolCallId": f"c{index}b",
            "result": "2026-01-01T00:00:00+00:00",
            "isError": False,
            "durationMs": 1,
        },
    ]
    events += [{"type": "text", "content": part} for part in answer]
    events.append({"type": "complete", "status": "succeeded"})
    events[1:1] = [{"type": "thinking", "content": "Let me think. "}] * 2
    return events  # 1 + 2 + 3 + 4 + 9 + 1 = 20 events


def main() -> None:
    username, total = sys.argv[1], int(sys.argv[2])
    if total % 20:
        raise SystemExit("EVENTS must be a multiple of 20 (whole runs)")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import transaction

    from chat.models import Conversation, Event, Run

    user = get_user_model().objects.get(username=username)
    with transaction.atomic():
        conversation = Conversation.objects.create(owner=user, title=f"Long history ({total} events)")
        rows: list[Event] = []
        seq = 0
        for index in range(1, total // 20 + 1):
            run = Run.objects.create(conversation=conversation, user=user, status=Run.Status.SUCCEEDED, model="seed")
            for payload in run_events(index):
                seq += 1
                rows.append(Event(conversation=conversation, run=run, seq=seq, type=payload["type"], payload=payload))
        Event.objects.bulk_create(rows, batch_size=500)
        Conversation.objects.filter(pk=conversation.pk).update(last_seq=seq)
    print(conversation.pk)


if __name__ == "__main__":
    main()
