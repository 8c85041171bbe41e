"""`python -m tests.ui.seed_inspector USERNAME`: makes USERNAME staff and writes a day of runs of
three other users (statuses, models, model calls with times to first token, tool calls, some
failing), so that the run inspector's dashboard has something to draw. Deterministic."""

from __future__ import annotations

import os
import random
import sys
from datetime import timedelta


def main() -> None:
    username = sys.argv[1]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import transaction
    from django.utils import timezone

    from chat.models import Conversation, ModelCall, Run, ToolRecord

    users = get_user_model().objects
    users.filter(username=username).update(is_staff=True)
    pick = random.Random(7)
    now = timezone.now()
    with transaction.atomic():
        for name in ("ana", "ben", "chen"):
            user, _ = users.get_or_create(username=f"seed-{name}")
            conversation = Conversation.objects.create(owner=user, title=f"{name}'s questions")
            for _ in range(pick.randint(12, 30)):
                started = now - timedelta(minutes=pick.randint(5, 23 * 60))
                status = pick.choices(["succeeded", "failed", "cancelled", "interrupted"], [85, 8, 5, 2])[0]
                seconds = pick.uniform(0.8, 25)
                model = pick.choice(["gpt-4o-mini", "gpt-4o-mini", "qwen2.5-72b", "claude-compatible"])
                tokens = pick.randint(300, 6000)
                run = Run.objects.create(
                    conversation=conversation,
                    user=user,
                    status=status,
                    model=model,
                    started_at=started,
                    finished_at=started + timedelta(seconds=seconds),
                    iterations=2,
                    prompt_tokens=tokens * 3 // 4,
                    completion_tokens=tokens // 4,
                    total_tokens=tokens,
                    error="HTTP 500: upstream overloaded" if status == "failed" else "",
                )
                ModelCall.objects.create(
                    run=run,
                    iteration=1,
                    attempt=1,
                    started_at=started,
                    first_token_ms=pick.randint(150, 2500),
                    duration_ms=int(seconds * 400),
                    total_tokens=tokens,
                    finish_reason="tool_calls",
                )
                tool = pick.choice(["calculator", "fetch", "bash", "web_search"])
                ToolRecord.objects.create(
                    run=run,
                    tool_call_id=f"c{run.pk.hex[:6]}",
                    tool_name=tool,
                    arguments="{}",
                    result="ok",
                    is_error=pick.random() < {"fetch": 0.4, "bash": 0.25}.get(tool, 0.05),
                    started_at=started + timedelta(seconds=seconds / 2),
                    duration_ms=pick.randint(3, 2000),
                )


if __name__ == "__main__":
    main()
