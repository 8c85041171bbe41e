"""Conversation search (`GET /api/conversations/?q=`): what is indexed, how a query matches.

Search matches what the user sees as the conversation: its title, the user messages and the
answers (a run's `text` deltas, without the text of a failed model call that its retry
replaced, as chat.history reads it). Thinking and tool payloads are left out: they are long,
mostly machine text (JSON arguments, fetched pages, file contents) that would drown the hits
in noise and make the index grow with every tool call; the transcript export keeps them.

A run's text is indexed once, when it completes (chat.services stores its SearchDocument in
the transaction that stores `complete`), and at import: never per delta. A query is split
into words; a conversation matches when its title holds every word, or one of its runs'
documents holds every word as a word prefix ("deploy" finds "deployment"), case-insensitive.
PostgreSQL answers with its GIN index over to_tsvector('simple', body), SQLite with an FTS5
table (migration 0003); 'simple' and unicode61 are both language-neutral (no stemming), so
both databases find the same conversations.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.db import connection
from django.db.models import BooleanField, F, Func, Q, QuerySet, Value
from django.db.models.expressions import RawSQL

from .text import clean

MAX_TERMS = 8
MAX_TERM_CHARS = 64
SNIPPET_CHARS = 160
# Context kept before the first hit: short, so that the hit shows in a narrow sidebar.
SNIPPET_LEAD = 30

# Words as both tokenisers see them: letters and digits; underscores and the rest separate.
_WORD = re.compile(r"[^\W_]+")


def run_text(payloads: Iterable[dict[str, Any]]) -> str:
    """A run's searchable text: its user message(s) and its answer, one paragraph each."""
    parts: list[str] = []
    answer: list[str] = []
    for payload in payloads:
        kind = payload.get("type")
        if kind == "user_message":
            parts.append(payload.get("content", ""))
        elif kind == "text":
            answer.append(payload.get("content", ""))
        elif kind == "error" and (payload.get("code") == "LLM_CALL_FAILED" or payload.get("resumed")):
            answer = []  # the retry answers anew: the discarded attempt is not the answer
        elif kind == "tool_start" and answer:
            # Text before a tool round is part of what the user saw; keep it as a paragraph.
            parts.append("".join(answer))
            answer = []
    if answer:
        parts.append("".join(answer))
    return "\n\n".join(part for part in parts if part)


def documents_write(*, run_ids: Sequence[Any], runs=None, events=None, documents=None, chunk: int = 500) -> None:
    """Store (or replace) the search documents of the given finished runs: per `chunk` runs one
    query for their events and one insert (chunks keep `IN` lists under SQLite's limit on
    parameters, for an import of many runs). The model classes can be passed for a
    migration's historical models."""
    if runs is None:
        from .models import Event, SearchDocument

        events, documents = Event, SearchDocument
    for start in range(0, len(run_ids), chunk):
        _documents_write(list(run_ids[start : start + chunk]), events, documents)


def _documents_write(run_ids: list[Any], events, documents) -> None:
    rows = (
        events.objects.filter(run_id__in=run_ids, type__in=("user_message", "text", "error", "tool_start"))
        .order_by("run_id", "seq")
        .values_list("run_id", "conversation_id", "payload")
    )
    grouped: dict[Any, tuple[Any, list[dict[str, Any]]]] = {}
    for run_id, conversation_id, payload in rows:
        grouped.setdefault(run_id, (conversation_id, []))[1].append(payload)
    _documents_store(grouped, documents)


def documents_store(*, runs: Mapping[Any, tuple[Any, list[dict[str, Any]]]]) -> None:
    """documents_write for runs whose events the caller has read already: {run_id:
    (conversation_id, payloads in order)} (the writer reads a completing run's events once, for
    this and for its memory checkpoint: chat.memory.events_of)."""
    from .models import SearchDocument

    _documents_store(runs, SearchDocument)


def _documents_store(runs: Mapping[Any, tuple[Any, list[dict[str, Any]]]], documents) -> None:
    # A run completes once, but a document left by anything else must not make the unique
    # run column refuse the insert, and with it the transaction that stores `complete`.
    documents.objects.filter(run_id__in=list(runs)).delete()
    documents.objects.bulk_create(
        # Cleaned: a row stored before chat.text existed may hold a lone surrogate, which must
        # not keep the run's `complete` from being stored.
        documents(run_id=run_id, conversation_id=conversation_id, body=clean(run_text(payloads)))
        for run_id, (conversation_id, payloads) in runs.items()
    )


def documents_rebuild(*, runs, events, documents) -> None:
    """Index every finished run (migration 0003 on an existing database)."""
    finished = list(runs.objects.exclude(status="running").values_list("pk", flat=True).order_by("pk"))
    documents_write(run_ids=finished, runs=runs, events=events, documents=documents)


def query_terms(q: str) -> list[str]:
    """The words of a query, lower-cased, deduplicated, at most MAX_TERMS of MAX_TERM_CHARS."""
    terms: list[str] = []
    for word in _WORD.findall(q.lower()):
        word = word[:MAX_TERM_CHARS]
        if word not in terms:
            terms.append(word)
    return terms[:MAX_TERMS]


class _TsMatch(Func):
    """to_tsvector('simple', body) @@ to_tsquery('simple', query): the expression of the GIN
    index of migration 0003, written the same so that the planner uses it."""

    template = "to_tsvector('simple'::regconfig, %(expressions)s)"
    arg_joiner = ") @@ to_tsquery('simple'::regconfig, "
    output_field = BooleanField()


def _body_match(terms: list[str]) -> Q | _TsMatch:
    """A condition on SearchDocument rows: the body holds every term as a word prefix."""
    if connection.vendor == "postgresql":
        # Terms are runs of letters and digits: no tsquery operator or quote inside.
        return _TsMatch(F("body"), Value(" & ".join(f"'{term}':*" for term in terms)))
    # FTS5: each term a quoted string (no operator inside), `*` for the prefix.
    match = " ".join(f'"{term}"*' for term in terms)
    fts = "SELECT rowid FROM chat_searchdocument_fts WHERE chat_searchdocument_fts MATCH %s"
    return Q(id__in=RawSQL(fts, [match]))


def _title_match(q: str, terms: list[str]) -> Q:
    words = terms or [q.strip()]
    condition = Q()
    for word in words:
        condition &= Q(title__icontains=word)
    return condition


def conversations_matching(conversations: QuerySet, *, q: str, owner) -> QuerySet:
    """The conversations of `conversations` that match `q` (see the module docstring)."""
    from .models import SearchDocument

    terms = query_terms(q)
    condition = _title_match(q, terms)
    if terms:
        hits = SearchDocument.objects.filter(conversation__owner=owner).filter(_body_match(terms))
        condition |= Q(pk__in=hits.values("conversation_id"))
    return conversations.filter(condition)


def snippets(*, conversations: Sequence[Any], q: str) -> dict[Any, str]:
    """A short plain-text excerpt per conversation around the first place a query word
    appears: in its newest matching run, else in its title. Plain text: clients highlight
    the query's words themselves, so nothing here is markup."""
    from .models import SearchDocument

    terms = query_terms(q)
    out: dict[Any, str] = {c.pk: _excerpt(c.title, terms or [q.strip().lower()]) for c in conversations}
    if not terms or not conversations:
        return out
    rows = (
        SearchDocument.objects.filter(conversation__in=[c.pk for c in conversations])
        .filter(_body_match(terms))
        .order_by("conversation_id", "-id")
        .values_list("conversation_id", "body")
    )
    seen: set[Any] = set()
    for conversation_id, body in rows:
        if conversation_id not in seen:
            seen.add(conversation_id)
            out[conversation_id] = _excerpt(body, terms)
    return out


def _excerpt(text: str, terms: list[str]) -> str:
    text = " ".join(text.split())
    lowered = text.lower()
    found = [i for i in (lowered.find(term) for term in terms if term) if i >= 0]
    at = min(found) if found else 0
    start = max(0, at - SNIPPET_LEAD)
    if start:
        # Start at a word boundary, not inside a word.
        space = text.find(" ", start)
        start = space + 1 if 0 <= space < at else start
    end = min(len(text), start + SNIPPET_CHARS)
    if end < len(text):
        space = text.rfind(" ", start, end)
        end = space if space > at else end
    return ("…" if start else "") + text[start:end] + ("…" if end < len(text) else "")
