"""Import of a conversation (docs/protocol.md, "Export and import"): the file parsed and checked
(parse_import: every field's type, text that can be stored, nesting, times, tool calls that
pair up), then written as a new conversation of the importer (conversation_import) whose
runs are history: marked imported, never counted as activity."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext

from chat import nesting
from chat.agent.approval import call_outcome
from chat.agent.events import (
    RunStatus,
)
from chat.conversations.import_checks import (
    ImportRefused,
    check_compaction,
    check_text,
    is_attachment,
    is_of,
    timestamp_of,
)
from chat.conversations.services import TITLE_MAX
from chat.eventlog import memory, search
from chat.eventlog.frames import CHILD_KEY
from chat.models import (
    Conversation,
    Event,
    Run,
    TitleSource,
    ToolRecord,
)


def imported_title(title: str) -> str:
    """An imported conversation's title: the exported one marked as imported (in the importing
    user's language), so that it is told apart from the conversation it was exported from."""
    title = " ".join(title.split())
    if not title:
        return gettext("Imported conversation")
    marked = gettext("%(title)s (imported)")
    return marked % {"title": title[: TITLE_MAX - len(marked % {"title": ""})]}


def conversation_import(*, owner, imported: Imported, title: str | None = None) -> Conversation:
    """A new conversation of `owner` holding an import's events (parsed and checked by
    chat.transfer): new conversation and run ids, every seq and field kept, each event's
    time its `ts` when it has one, the title marked as imported (or `title`, a copy of a shared
    link's). One transaction: nothing is left of a failed import."""
    now = timezone.now()
    moments = [ts for run in imported.runs for _, _, ts in run.events if ts is not None]
    with transaction.atomic():
        conversation = Conversation.objects.create(
            owner=owner,
            title=imported_title(imported.title) if title is None else title,
            # A copy of a shared link keeps nothing of how its owner organized it.
            title_source=imported.title_source,
            pinned=imported.pinned and title is None,
            archived=imported.archived and title is None,
            created_at=min(moments, default=now),
            updated_at=now,
            last_seq=sum(len(run.events) for run in imported.runs) + len(imported.loose),
        )
        runs, records = [], []
        events = [
            Event(
                conversation=conversation,
                run=None,
                seq=seq,
                type=payload["type"],
                payload=payload,
                created_at=ts or now,
            )
            for seq, payload, ts in imported.loose
        ]
        made: dict[str, Run] = {}  # the file's run id ->
        for imported_run in imported.runs:
            first, last = imported_run.events[0], imported_run.events[-1]
            parent = made[imported_run.parent] if imported_run.parent is not None else None
            usage = last[1].get("usage") if isinstance(last[1].get("usage"), dict) else {}
            run = Run(
                conversation=conversation,
                user=owner,
                status=imported_run.status,
                imported=True,
                parent=parent,
                parent_tool_call_id=str(first[1].get("parentToolCallId", "")) if parent is not None else "",
                depth=parent.depth + 1 if parent is not None else 0,
                started_at=first[2] or now,
                finished_at=last[2] or now,
                heartbeat_at=now,
                **{
                    column: value
                    for column, key in _USAGE_COLUMNS.items()
                    if isinstance(value := usage.get(key), int) and not isinstance(value, bool) and 0 <= value < 2**31
                },
            )
            runs.append(run)
            made[imported_run.run_id] = run
            starts: dict[str, dict[str, Any]] = {}
            decisions: dict[str, str] = {}
            for seq, payload, ts in imported_run.events:
                if parent is not None:  # parentRunId: the new id of its parent
                    payload = {**payload, CHILD_KEY: str(parent.pk)}
                events.append(
                    Event(
                        conversation=conversation,
                        run=run,
                        seq=seq,
                        type=payload["type"],
                        payload=payload,
                        created_at=ts or now,
                    )
                )
                if payload["type"] == "tool_start":
                    starts[payload["toolCallId"]] = payload
                elif payload["type"] == "approval_result" and isinstance(payload["decision"], str):
                    decisions[payload["toolCallId"]] = payload["decision"]
                elif payload["type"] == "tool_end":
                    start = starts.get(payload["toolCallId"], {})
                    records.append(
                        ToolRecord(
                            run=run,
                            tool_call_id=payload["toolCallId"],
                            tool_name=payload["toolName"],
                            arguments=start.get("arguments", ""),
                            result=payload["result"],
                            is_error=payload["isError"],
                            outcome=call_outcome(
                                is_error=payload["isError"], decision=decisions.pop(payload["toolCallId"], None)
                            ),
                            started_at=ts or now,
                            duration_ms=payload["durationMs"],
                        )
                    )
        Run.objects.bulk_create(runs)
        Event.objects.bulk_create(events)
        ToolRecord.objects.bulk_create(records)
        search.documents_write(run_ids=[run.pk for run in runs])
        memory.checkpoints_fill(conversation_id=conversation.pk)
    return conversation


_USAGE_COLUMNS = {
    "prompt_tokens": "promptTokens",
    "completion_tokens": "completionTokens",
    "total_tokens": "totalTokens",
}


EVENT_TYPES: dict[str, dict[str, type | tuple[type, ...]]] = {
    "user_message": {"content": str},
    "thinking": {"content": str},
    "text": {"content": str},
    "tool_start": {"toolName": str, "toolCallId": str, "arguments": str},
    "tool_end": {"toolName": str, "toolCallId": str, "result": str, "isError": bool, "durationMs": int},
    "error": {"code": str, "message": str, "detail": str},
    "complete": {"status": str},
    "reference": {"references": list},
    "approval_request": {"toolCallId": str, "toolName": str, "arguments": str},
    "approval_result": {"toolCallId": str, "decision": str},
    # The conversation's, not a run's: their runId is null (docs/protocol.md, "Queued messages").
    "queued": {"queueId": str, "content": str},
    "unqueued": {"queueId": str, "reason": str},
    "steer": {"queueId": str, "content": str},
    "steer_applied": {"queueId": str},
    "compaction": {
        "summary": str,
        "throughSeq": int,
        "turns": int,
        "tokensBefore": int,
        "tokensAfter": int,
        "trigger": str,
    },
}

CONVERSATION_EVENTS = ("queued", "unqueued")


RUN_STATUSES = {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.INTERRUPTED}


# Fields some events carry optionally, with their types; any other field is kept as JSON.
OPTIONAL_FIELDS: dict[str, type | tuple[type, ...]] = {
    "durationMs": int,
    "usage": dict,
    "resumed": bool,
    "ts": str,
    "attachments": list,
    "steered": bool,
    "context": dict,
    # A child run's (docs/protocol.md, "Sub-agents"): mapped to the new run ids.
    "parentRunId": str,
    "parentToolCallId": str,
}


FRAME_COLUMNS = ("seq", "runId", "ts")  # columns of an Event row, not payload


_FIELD_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")


MAX_RUN_ID_CHARS = 100


@dataclass
class ImportedRun:
    events: list[tuple[int, dict[str, Any], datetime | None]] = field(default_factory=list)  # seq, payload, ts
    status: str = ""
    run_id: str = ""  # as the file names it
    parent: str | None = None  # a child run's parentRunId, as the file names it


@dataclass
class Imported:
    title: str
    runs: list[ImportedRun]
    # queued and unqueued (runId null): seq, payload, ts
    loose: list[tuple[int, dict[str, Any], datetime | None]] = field(default_factory=list)
    # How the conversation was organized, as exported (an older export has none of them).
    title_source: str = TitleSource.DEFAULT
    pinned: bool = False
    archived: bool = False


def _loads(raw: bytes) -> Any:
    try:
        return nesting.loads(raw)
    except nesting.TooDeep as exc:
        raise ImportRefused(f"the file is {exc}") from None
    except ValueError:  # UnicodeDecodeError is one
        raise ImportRefused("the file is not valid JSON (UTF-8)") from None


def parse_import(raw: bytes) -> Imported:
    """The conversation a JSON export holds, checked through; ImportRefused otherwise."""
    return _parse_document(_loads(raw))


def parse_import_file(raw: bytes) -> Imported | list[Imported]:
    """What an import file holds: one conversation's export, or the export of all of a user's
    (`{"conversations": [...]}`, a list), every one checked through before anything is written;
    ImportRefused naming the first problem (and the conversation it is in) otherwise."""
    data = _loads(raw)
    if not (isinstance(data, dict) and "conversations" in data):
        return _parse_document(data)
    if set(data) != {"conversations"} or not isinstance(data["conversations"], list):
        raise ImportRefused('an export of all conversations is a JSON object with "conversations" (a list) only')
    if not data["conversations"]:
        raise ImportRefused("the file holds no conversation")
    parsed = []
    for index, document in enumerate(data["conversations"]):
        try:
            parsed.append(_parse_document(document))
        except ImportRefused as exc:
            raise ImportRefused(f"conversations[{index}]: {exc}", status=exc.status) from None
    return parsed


def conversations_import(*, owner, imported: list[Imported]) -> list[Conversation]:
    """Every conversation of an export of all, each a new conversation of `owner`, in one
    transaction: all of them or, when one fails, none."""
    with transaction.atomic():
        return [conversation_import(owner=owner, imported=one) for one in imported]


def _parse_document(data: Any) -> Imported:
    if not isinstance(data, dict) or not isinstance(data.get("conversation"), dict):
        raise ImportRefused('the file must be a JSON object with "conversation" (an object) and "events" (a list)')
    if not isinstance(data.get("events"), list):
        raise ImportRefused('"events" must be a list')
    extra = set(data) - {"conversation", "events"}
    if extra:
        raise ImportRefused(f"unknown top-level field {sorted(extra)[0]!r}")
    title = data["conversation"].get("title", "")
    if not isinstance(title, str):
        raise ImportRefused("conversation.title must be a string")
    if len(title) > 200:
        raise ImportRefused("conversation.title is longer than 200 characters")
    check_text(title, "conversation.title")
    organized = _organized(data["conversation"])
    if not data["events"]:
        raise ImportRefused("the conversation has no events")

    runs: list[ImportedRun] = []
    loose: list[tuple[int, dict[str, Any], datetime | None]] = []
    by_id: dict[str, ImportedRun] = {}
    top: ImportedRun | None = None  # the newest top-level run
    for index, frame in enumerate(data["events"]):
        where = f"events[{index}]"
        if not isinstance(frame, dict):
            raise ImportRefused(f"{where} is not an object")
        seq, run_id, kind = frame.get("seq"), frame.get("runId"), frame.get("type")
        if not is_of(seq, int) or seq != index + 1:
            raise ImportRefused(f"{where}: seq must be {index + 1} (seqs run 1, 2, 3, ... without gap)")
        if kind in CONVERSATION_EVENTS:
            if run_id is not None:
                raise ImportRefused(f"{where}: runId of {kind} must be null")
        elif not isinstance(run_id, str) or not run_id or len(run_id) > MAX_RUN_ID_CHARS:
            raise ImportRefused(f"{where}: runId must be a non-empty string")
        if kind not in EVENT_TYPES:
            raise ImportRefused(f"{where}: unknown event type {str(kind)[:40]!r}")
        for name, kind_of in EVENT_TYPES[kind].items():
            if name not in frame:
                raise ImportRefused(f"{where} ({kind}) lacks {name}")
            if not is_of(frame[name], kind_of):
                raise ImportRefused(f"{where} ({kind}): {name} has the wrong type")
        for name, value in frame.items():
            if not isinstance(name, str) or not _FIELD_NAME.fullmatch(name):
                raise ImportRefused(f"{where}: field name {str(name)[:40]!r} is not allowed")
            if name in OPTIONAL_FIELDS and name not in EVENT_TYPES[kind] and not is_of(value, OPTIONAL_FIELDS[name]):
                raise ImportRefused(f"{where} ({kind}): {name} has the wrong type")
        check_text(frame, where)
        if kind == "reference" and not all(
            isinstance(ref, dict) and all(isinstance(v, str) for v in ref.values()) for ref in frame["references"]
        ):
            raise ImportRefused(f"{where}: references must be objects of strings")
        if kind == "compaction":
            check_compaction(frame, where)
        if "attachments" in frame and not all(is_attachment(item) for item in frame["attachments"]):
            raise ImportRefused(f'{where}: attachments must be objects with "path" (a string) and "size" (an integer)')
        ts = timestamp_of(frame["ts"], where) if "ts" in frame else None
        if kind in CONVERSATION_EVENTS:  # between a run's events or between runs, in no run
            loose.append((seq, {k: v for k, v in frame.items() if k not in FRAME_COLUMNS}, ts))
            continue

        if run_id not in by_id:
            _run_begins(frame, where, by_id=by_id)
            by_id[run_id] = ImportedRun(run_id=run_id, parent=frame.get(CHILD_KEY))
            runs.append(by_id[run_id])
            if by_id[run_id].parent is None:
                top = by_id[run_id]
        run = by_id[run_id]
        if frame.get(CHILD_KEY) != run.parent:
            raise ImportRefused(f"{where}: parentRunId differs from its run's first event")
        if run.parent is None and run is not top:
            raise ImportRefused(f"{where}: the events of run {run_id[:40]!r} are not together")
        if run.status:
            raise ImportRefused(f"{where}: an event after its run's complete")
        if kind == "tool_end" and not 0 <= frame["durationMs"] < 2**31:
            raise ImportRefused(f"{where}: durationMs out of range")
        if kind == "complete":
            if frame["status"] not in RUN_STATUSES:
                raise ImportRefused(f"{where}: complete status must be one of {sorted(RUN_STATUSES)}")
            run.status = frame["status"]
        payload = {k: v for k, v in frame.items() if k not in FRAME_COLUMNS}
        run.events.append((seq, payload, ts))
    if not runs:
        raise ImportRefused("the conversation has no run")
    if not all(run.status for run in runs):
        raise ImportRefused("the last run has no complete event (a run left running)")
    for run in runs:
        _check_tool_calls(run)
        _check_compaction_run(run)
    return Imported(title=title, runs=runs, loose=loose, **organized)


def _run_begins(frame: dict[str, Any], where: str, *, by_id: dict[str, ImportedRun]) -> None:
    """Check the first event of a run: a user_message (a compaction run's, top-level, a
    `compaction` or an `error`: _check_compaction_run); a child run's names a run still going on
    as its parentRunId, a top-level run's follows the complete of every run before it."""
    parent = frame.get(CHILD_KEY)
    if frame["type"] != "user_message" and (parent is not None or frame["type"] not in ("compaction", "error")):
        raise ImportRefused(f"{where}: a run must begin with user_message")
    if parent is not None:
        if parent not in by_id or by_id[parent].status:
            raise ImportRefused(f"{where}: parentRunId names no run going on")
        return
    if any(not run.status for run in by_id.values()):
        raise ImportRefused(f"{where}: the run before it has no complete event (a run left running)")


def _check_compaction_run(run: ImportedRun) -> None:
    """A run without user_message is a compaction run (docs/protocol.md, "Compaction"): its
    `compaction`, or its `error` COMPACTION_FAILED, then its `complete`."""
    kinds = [payload["type"] for _, payload, _ in run.events]
    if kinds[0] == "user_message":
        return
    first = run.events[0][1]
    if kinds != [kinds[0], "complete"] or (kinds[0] == "error" and first.get("code") != "COMPACTION_FAILED"):
        raise ImportRefused(
            f"seq {run.events[0][0]}: a run without user_message holds a compaction or a COMPACTION_FAILED "
            "error, then complete"
        )


def _organized(conversation: dict[str, Any]) -> dict[str, Any]:
    """titleSource, pinned and archived of an exported conversation, each checked when present."""
    out: dict[str, Any] = {}
    source = conversation.get("titleSource", TitleSource.DEFAULT)
    if source not in TitleSource.values:
        raise ImportRefused(f"conversation.titleSource must be one of {sorted(TitleSource.values)}")
    out["title_source"] = source
    for name in ("pinned", "archived"):
        value = conversation.get(name, False)
        if not isinstance(value, bool):
            raise ImportRefused(f"conversation.{name} must be true or false")
        out[name] = value
    return out


def _check_tool_calls(run: ImportedRun) -> None:
    started: set[str] = set()
    ended: set[str] = set()
    for seq, payload, _ in run.events:
        call_id = payload.get("toolCallId")
        if payload["type"] == "tool_start":
            if call_id in started:
                raise ImportRefused(f"seq {seq}: tool call {call_id[:40]!r} started twice")
            started.add(call_id)
        elif payload["type"] == "tool_end":
            if call_id in ended:
                raise ImportRefused(f"seq {seq}: tool call {call_id[:40]!r} ended twice")
            ended.add(call_id)
    # A call refused at approval ends without a start; a started one must end.
    if started - ended:
        raise ImportRefused(f"tool call {sorted(started - ended)[0][:40]!r} never ended")
