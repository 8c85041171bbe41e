"""chat.eventlog append and takeover: seq allocation, heartbeat, release and the interruption of a
dead process's run (run starts: tests/runs/test_starts.py)."""

from __future__ import annotations

import threading
from datetime import timedelta
from unittest.mock import ANY

import pytest
from django.db import connection
from django.utils import timezone

from chat.conversations.services import conversation_create
from chat.eventlog.append import events_append, events_append_many
from chat.eventlog.takeover import run_interrupt, run_request_cancel, runs_heartbeat, runs_release
from chat.eventlog.types import EventBatch, ModelCallData, RunOutcome, ToolRecordData
from chat.exceptions import ConversationGone
from chat.models import Conversation, Event, Run, ToolRecord
from chat.runs.starts import run_start
from tests.stored import stored_frame

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]

# The fake model reports no usage unless a reply holds a usage chunk.
NO_USAGE = {"promptTokens": 0, "completionTokens": 0, "totalTokens": 0}


def _start(conversation, content="hi", worker=""):
    return run_start(conversation=conversation, user=conversation.owner, content=content, model="m", worker=worker)


def _payloads(run):
    return list(Event.objects.filter(run=run).order_by("seq").values_list("payload", flat=True))


# -- events ----------------------------------------------------------------------------


def test_concurrent_writers_get_gap_free_unique_seqs(conversation):
    run, _ = _start(conversation)
    errors = []

    def write(n):
        try:
            for _ in range(20):
                events_append(
                    conversation_id=conversation.pk, run_id=run.pk, payloads=[{"type": "text", "content": str(n)}] * 3
                )
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    seqs = list(Event.objects.filter(conversation=conversation).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, 1 + 1 + 4 * 20 * 3))
    conversation.refresh_from_db()
    assert conversation.last_seq == seqs[-1]


def test_a_group_of_batches_is_stored_in_one_transaction_each_with_its_frames(make_user):
    alice = make_user("alice")
    first, second = (conversation_create(owner=alice) for _ in range(2))
    run_1, _ = _start(first)
    run_2, _ = _start(second)
    gone = conversation_create(owner=alice)
    run_gone, _ = _start(gone)
    gone_pk = gone.pk
    Conversation.objects.filter(pk=gone_pk).delete()
    record = ToolRecordData("c1", "calculator", "{}", "4", False, timezone.now(), 3)
    call = ModelCallData(2, 1, timezone.now(), 40, 90, 3, 5, 7, 12, "stop", "")
    outcome = RunOutcome(status="succeeded", iterations=2)

    results = events_append_many(
        batches=[
            EventBatch(first.pk, run_1.pk, [{"type": "text", "content": "a"}, {"type": "text", "content": "b"}]),
            EventBatch(gone_pk, run_gone.pk, [{"type": "text", "content": "lost"}]),
            EventBatch(
                second.pk,
                run_2.pk,
                [
                    {
                        "type": "tool_end",
                        "toolName": "calculator",
                        "toolCallId": "c1",
                        "result": "4",
                        "isError": False,
                        "durationMs": 3,
                    },
                    {"type": "complete", "status": "succeeded"},
                ],
                [record],
                outcome,
                [call],
            ),
        ]
    )

    assert results[0] == [
        {"type": "text", "content": "a", "seq": 2, "runId": str(run_1.pk), "ts": ANY},
        {"type": "text", "content": "b", "seq": 3, "runId": str(run_1.pk), "ts": ANY},
    ]
    assert results[1] is None  # its conversation is gone: nothing stored, the others are
    assert [f["seq"] for f in results[2]] == [2, 3]
    # complete carries the run's time and its tokens, summed over its model calls
    assert results[2][-1]["usage"] == {"promptTokens": 5, "completionTokens": 7, "totalTokens": 12}
    assert results[2][-1]["durationMs"] >= 0
    assert [stored_frame(e) for e in Event.objects.filter(run=run_2).order_by("seq")][1:] == results[2]
    assert len({e.created_at for e in Event.objects.exclude(type="user_message")}) == 1  # one round
    run_2.refresh_from_db()
    assert (run_2.status, run_2.iterations, run_2.total_tokens) == ("succeeded", 2, 12)
    assert run_2.finished_at is not None
    assert ToolRecord.objects.get(run=run_2).result == "4"
    run_1.refresh_from_db()
    assert run_1.status == "running"


def test_events_append_into_a_deleted_conversation_raises(conversation):
    run, _ = _start(conversation)
    pk = conversation.pk
    Conversation.objects.filter(pk=pk).delete()
    with pytest.raises(ConversationGone):
        events_append(conversation_id=pk, run_id=run.pk, payloads=[{"type": "text", "content": "x"}])


def test_non_ascii_text_is_stored_as_itself_not_as_escapes(conversation):
    run, _ = _start(conversation)
    answer = "答案是四十二。🙂 é"
    events_append(conversation_id=conversation.pk, run_id=run.pk, payloads=[{"type": "text", "content": answer}])
    assert _payloads(run)[-1] == {"type": "text", "content": answer}
    with connection.cursor() as cursor:  # the stored bytes: jsonb keeps the parsed value, SQLite the text
        cast = "payload::text" if connection.vendor == "postgresql" else "payload"
        cursor.execute(
            f"SELECT {cast} FROM chat_event WHERE run_id = %s AND type = 'text'",
            [run.pk.hex if connection.vendor == "sqlite" else run.pk],
        )
        (stored,) = cursor.fetchone()
    assert answer in stored and "\\u" not in stored


# -- heartbeat, release, interruption -------------------------------------------------------


def test_heartbeat_keeps_the_workers_runs_and_reports_cancels_and_lost_runs(conversation, make_user):
    run, _ = _start(conversation, worker="runs.me")
    other = conversation_create(owner=conversation.owner)
    taken, _ = _start(other, worker="runs.someone-else")
    Run.objects.update(heartbeat_at=timezone.now() - timedelta(minutes=5))

    assert runs_heartbeat(run_ids=[run.pk, taken.pk], worker="runs.me") == (set(), {taken.pk})
    assert Run.objects.get(pk=run.pk).heartbeat_at > timezone.now() - timedelta(minutes=1)
    assert Run.objects.get(pk=taken.pk).heartbeat_at < timezone.now() - timedelta(minutes=1)  # not refreshed

    run_request_cancel(run_id=run.pk)
    assert runs_heartbeat(run_ids=[str(run.pk)], worker="runs.me") == ({str(run.pk)}, set())
    Run.objects.filter(pk=run.pk).update(status="succeeded")
    assert runs_heartbeat(run_ids=[run.pk], worker="runs.me") == (set(), {run.pk})


def test_release_makes_only_the_workers_running_runs_stale_at_once(conversation):
    mine, _ = _start(conversation, worker="runs.me")
    other = conversation_create(owner=conversation.owner)
    theirs, _ = _start(other, worker="runs.other")
    assert runs_release(run_ids=[mine.pk], worker="runs.me", resumes=1) == 0  # not the attempt that was lost
    assert runs_release(run_ids=[mine.pk, theirs.pk], worker="runs.me", resumes=0) == 1
    mine.refresh_from_db()
    theirs.refresh_from_db()
    assert mine.worker == "" and mine.status == "running"
    assert mine.heartbeat_at < timezone.now() - timedelta(days=365)
    assert theirs.worker == "runs.other" and theirs.heartbeat_at > timezone.now() - timedelta(minutes=1)


def _dead_run(conversation, *, age: float = 60):
    run, _ = _start(conversation, worker="runs.dead!x")
    events_append(
        conversation_id=conversation.pk,
        run_id=run.pk,
        payloads=[
            {"type": "text", "content": "Let me check."},
            {"type": "tool_start", "toolName": "calculator", "toolCallId": "c1", "arguments": "{}"},
            {"type": "tool_start", "toolName": "current_time", "toolCallId": "c2", "arguments": "{}"},
            {
                "type": "tool_end",
                "toolName": "current_time",
                "toolCallId": "c2",
                "result": "now",
                "isError": False,
                "durationMs": 1,
            },
        ],
    )
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=age))
    return run


def test_interrupt_with_a_resume_left_hands_the_run_to_the_new_worker(conversation):
    run = _dead_run(conversation)
    cutoff = timezone.now() - timedelta(seconds=20)
    taken = run_interrupt(run_id=run.pk, stale_before=cutoff, message="gone", worker="runs.new", max_resumes=1)
    assert taken.resumed
    assert [{k: v for k, v in f.items() if k not in ("runId", "ts")} for f in taken.frames] == [
        {
            "type": "tool_end",
            "toolName": "calculator",
            "toolCallId": "c1",
            "result": '{"error": "interrupted"}',
            "isError": True,
            "durationMs": 0,
            "seq": 6,
        },
        {"type": "error", "code": "INTERRUPTED", "message": "gone", "detail": "", "resumed": True, "seq": 7},
    ]
    run.refresh_from_db()
    assert (run.status, run.worker, run.resumes) == ("running", "runs.new", 1)
    record = ToolRecord.objects.get(run=run)  # the closed call is indexed like any other
    assert (record.tool_call_id, record.arguments, record.is_error) == ("c1", "{}", True)
    assert run.heartbeat_at > cutoff  # fresh: no other reaper takes it again
    assert run_interrupt(run_id=run.pk, stale_before=cutoff, message="gone", worker="runs.third", max_resumes=5) is None


def test_interrupt_without_resumes_left_completes_the_run_interrupted(conversation):
    run = _dead_run(conversation)
    Run.objects.filter(pk=run.pk).update(resumes=1)
    cutoff = timezone.now() - timedelta(seconds=20)
    closed = run_interrupt(run_id=run.pk, stale_before=cutoff, message="gone", worker="runs.new", max_resumes=1)
    assert not closed.resumed
    assert [f["type"] for f in closed.frames] == ["tool_end", "error", "complete"]
    assert "resumed" not in closed.frames[1] and closed.frames[2]["status"] == "interrupted"
    assert _payloads(run)[-1] == {"type": "complete", "status": "interrupted", "durationMs": ANY, "usage": NO_USAGE}
    run.refresh_from_db()
    assert run.status == "interrupted" and run.error == "INTERRUPTED: gone" and run.finished_at is not None


def test_interrupt_spares_a_run_whose_heartbeat_is_fresh(conversation):
    run = _dead_run(conversation, age=5)
    cutoff = timezone.now() - timedelta(seconds=20)
    assert run_interrupt(run_id=run.pk, stale_before=cutoff, message="x", worker="w", max_resumes=1) is None
    assert _payloads(run)[-1]["type"] == "tool_end"
    assert Run.objects.get(pk=run.pk).resumes == 0


def test_interrupt_expires_a_pending_approval_request(conversation):
    run = _dead_run(conversation)
    events_append(
        conversation_id=conversation.pk,
        run_id=run.pk,
        payloads=[
            {
                "type": "tool_end",
                "toolName": "calculator",
                "toolCallId": "c1",
                "result": "1",
                "isError": False,
                "durationMs": 1,
            },  # fmt: skip
            {
                "type": "approval_request",
                "toolName": "bash",
                "toolCallId": "c9",
                "arguments": '{"command": "ls"}',
                "expiresAt": "2026-01-01T00:00:00.000Z",
            },  # fmt: skip
        ],
    )
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=60))
    cutoff = timezone.now() - timedelta(seconds=20)
    taken = run_interrupt(run_id=run.pk, stale_before=cutoff, message="gone", worker="runs.new", max_resumes=1)
    kinds = [(f["type"], f.get("toolCallId"), f.get("decision")) for f in taken.frames]
    assert kinds == [
        ("approval_result", "c9", "expired"),
        ("tool_end", "c9", None),
        ("error", None, None),
    ]
    assert taken.frames[1]["isError"] is True and "interrupted" in taken.frames[1]["result"]
    assert ToolRecord.objects.get(run=run, tool_call_id="c9").arguments == '{"command": "ls"}'
