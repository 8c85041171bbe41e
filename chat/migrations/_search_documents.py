"""A frozen copy, for migrations 0006 and 0015, of how a finished run's search document was made
when they were written (chat.eventlog.search): a migration must not import application code,
which moves and changes, so it keeps what it needs here. The leading underscore keeps Django's
migration loader from taking this module for a migration."""

from __future__ import annotations

import re

_BAD = re.compile("[\x00\ud800-\udfff]")


def _clean(text: str) -> str:
    if _BAD.search(text) is None:
        return text
    text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text.replace("\x00", "\ufffd")


def _asked_text(payloads: list[dict]) -> str:
    return "\n\n".join(p.get("content", "") for p in payloads if p.get("type") == "user_message" and p.get("content"))


def _run_text(payloads: list[dict]) -> str:
    parts: list[str] = []
    answer: list[str] = []
    for payload in payloads:
        kind = payload.get("type")
        if kind == "user_message":
            parts.append(payload.get("content", ""))
        elif kind == "text":
            answer.append(payload.get("content", ""))
        elif kind == "error" and (payload.get("code") == "LLM_CALL_FAILED" or payload.get("resumed")):
            answer = []
        elif kind == "tool_start" and answer:
            parts.append("".join(answer))
            answer = []
    if answer:
        parts.append("".join(answer))
    return "\n\n".join(part for part in parts if part)


def index_finished_runs(apps, schema_editor) -> None:
    """(Re)write the search document of every finished run, 500 runs at a time."""
    runs, events = apps.get_model("chat", "Run"), apps.get_model("chat", "Event")
    documents = apps.get_model("chat", "SearchDocument")
    has_asked = any(field.name == "asked" for field in documents._meta.get_fields())
    finished = list(runs.objects.exclude(status="running").values_list("pk", flat=True).order_by("pk"))
    for start in range(0, len(finished), 500):
        run_ids = finished[start : start + 500]
        rows = (
            events.objects.filter(run_id__in=run_ids, type__in=("user_message", "text", "error", "tool_start"))
            .order_by("run_id", "seq")
            .values_list("run_id", "conversation_id", "payload")
        )
        grouped: dict = {}
        for run_id, conversation_id, payload in rows:
            grouped.setdefault(run_id, (conversation_id, []))[1].append(payload)
        documents.objects.filter(run_id__in=list(grouped)).delete()
        documents.objects.bulk_create(
            documents(
                run_id=run_id,
                conversation_id=conversation_id,
                body=_clean(_run_text(payloads)),
                **({"asked": _clean(_asked_text(payloads))} if has_asked else {}),
            )
            for run_id, (conversation_id, payloads) in grouped.items()
        )
