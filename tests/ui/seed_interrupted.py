"""`python -m tests.ui.seed_interrupted USERNAME`: a conversation of interrupted runs for USERNAME.

Three runs whose server died: one closed `interrupted` by the real services, one resumed by
them (its first attempt's text discarded), and one as logs stored before this version held it
(the dead worker's channel name in the error's `detail`). Prints the conversation's id.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta

OLD_WORKER = "runs..inmemory!OldDeadWorker"


def main() -> None:
    username = sys.argv[1]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from chat.conversations.services import conversation_create
    from chat.eventlog.append import events_append
    from chat.eventlog.takeover import run_interrupt
    from chat.eventlog.types import RunOutcome
    from chat.models import Run
    from chat.runs.starts import run_start

    user = get_user_model().objects.get(username=username)
    conversation = conversation_create(owner=user, title="Interrupted runs")

    def dead_run(question: str, said: str, worker: str) -> Run:
        run, _ = run_start(conversation=conversation, user=user, content=question, model="m", worker=worker)
        events_append(conversation_id=conversation.pk, run_id=run.pk, payloads=[{"type": "text", "content": said}])
        return run

    def finish(run: Run, payloads: list[dict], status: str) -> None:
        events_append(
            conversation_id=conversation.pk,
            run_id=run.pk,
            payloads=payloads,
            outcome=RunOutcome(status=status),
        )

    closed = dead_run("Closed question", "Half an answer", "runs..inmemory!DeadWorkerOne")
    run_interrupt(run_id=closed.pk, message="The server running this run stopped before it finished.")

    resumed = dead_run("Resumed question", "Lost words of the dead attempt", "runs..inmemory!DeadWorkerTwo")
    Run.objects.filter(pk=resumed.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    run_interrupt(
        run_id=resumed.pk,
        stale_before=timezone.now(),
        message="The server running this run stopped before it finished.",
        worker="runs.seed!alive",
        max_resumes=1,
    )
    finish(
        resumed,
        [{"type": "text", "content": "The answer after the resume."}, {"type": "complete", "status": "succeeded"}],
        "succeeded",
    )

    old = dead_run("Old log question", "Old half answer", OLD_WORKER)
    message = "The server running this run stopped before it finished."
    finish(
        old,
        [
            {"type": "error", "code": "INTERRUPTED", "message": message, "detail": OLD_WORKER},
            {"type": "complete", "status": "interrupted"},
        ],
        "interrupted",
    )
    print(conversation.pk)


if __name__ == "__main__":
    main()
