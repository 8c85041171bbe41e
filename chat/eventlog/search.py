"""Conversation search (`GET /api/conversations/?q=`): what is indexed, how a query matches.

Search matches what the user sees as the conversation: its title, the user messages and the
answers (a run's `text` deltas, without the text of a failed model call that its retry
replaced, as chat.eventlog.history reads it). Thinking and tool payloads are left out: they are long,
mostly machine text (JSON arguments, fetched pages, file contents) that would drown the hits
in noise and make the index grow with every tool call; the transcript export keeps them.

A run's text is indexed once, when it completes (chat.eventlog.append stores its SearchDocument in
the transaction that stores `complete`), and at import: never per delta. A query is split
into words; a conversation matches when its title holds every word, or one of its runs'
documents holds every word as a word prefix ("deploy" finds "deployment"), case-insensitive.
PostgreSQL answers with its GIN index over to_tsvector('simple', body), SQLite with an FTS5
table (migration 0003); 'simple' and unicode61 are both language-neutral (no stemming), so
both databases find the same conversations.

Hits are ranked in two tiers: first the conversations where the user's own words match (the
title, or the user messages a document keeps apart in `asked`), then those matched only by an
answer, whose boilerplate ("let me know if ...") would otherwise push the conversation a user
is looking for down the list; newest first within a tier. Snippets come from the user's words
when they match, and are the text the page shows: Markdown syntax (backticks, emphasis
marks, link targets) is removed by a real CommonMark parser.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.db import connection
from django.db.models import BooleanField, Case, Exists, F, Func, IntegerField, OuterRef, Q, QuerySet, Value, When
from django.db.models.expressions import RawSQL
from markdown_it import MarkdownIt

from chat.agent.text import clean
from chat.models import Event, SearchDocument

MAX_TERMS = 8
# What a document keeps of a run's text (and of its user's words): PostgreSQL refuses a tsvector
# past 1 MB, and the GIN index computes one when the row is stored, in the transaction that stores
# the run's `complete`; a long answer of distinct words (a few MB) then lost the run its database.
# 100,000 characters stay well under that limit however dense in distinct words they are, and hold
# any answer a person reads; words past it are not found (on SQLite alike: both find the same).
MAX_DOCUMENT_CHARS = 100_000
MAX_TERM_CHARS = 64
SNIPPET_CHARS = 160
# Context kept before the first hit: short, so that the hit shows in a narrow sidebar.
SNIPPET_LEAD = 30

# Words as both tokenisers see them: letters and digits; underscores and the rest separate.
_WORD = re.compile(r"[^\W_]+")


def asked_text(payloads: Iterable[dict[str, Any]]) -> str:
    """The user's own words in a run: its user message(s), one paragraph each."""
    return "\n\n".join(p.get("content", "") for p in payloads if p.get("type") == "user_message" and p.get("content"))


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


def documents_write(*, run_ids: Sequence[Any], chunk: int = 500) -> None:
    """Store (or replace) the search documents of the given finished runs: per `chunk` runs one
    query for their events and one insert (chunks keep `IN` lists under SQLite's limit on
    parameters, for an import of many runs)."""
    for start in range(0, len(run_ids), chunk):
        _documents_write(list(run_ids[start : start + chunk]))


def _documents_write(run_ids: list[Any]) -> None:
    rows = (
        Event.objects.filter(run_id__in=run_ids, type__in=("user_message", "text", "error", "tool_start"))
        .order_by("run_id", "seq")
        .values_list("run_id", "conversation_id", "payload")
    )
    grouped: dict[Any, tuple[Any, list[dict[str, Any]]]] = {}
    for run_id, conversation_id, payload in rows:
        grouped.setdefault(run_id, (conversation_id, []))[1].append(payload)
    documents_store(runs=grouped)


def documents_store(*, runs: Mapping[Any, tuple[Any, list[dict[str, Any]]]]) -> None:
    """documents_write for runs whose events the caller has read already: {run_id:
    (conversation_id, payloads in order)} (the writer reads a completing run's events once, for
    this and for its memory checkpoint: chat.eventlog.memory.events_of)."""
    # A run completes once, but a document left by anything else must not make the unique
    # run column refuse the insert, and with it the transaction that stores `complete`.
    SearchDocument.objects.filter(run_id__in=list(runs)).delete()
    SearchDocument.objects.bulk_create(
        # Cleaned: a row stored before text was cleaned on the way in may hold a lone surrogate, which must
        # not keep the run's `complete` from being stored.
        SearchDocument(
            run_id=run_id,
            conversation_id=conversation_id,
            body=clean(run_text(payloads)[:MAX_DOCUMENT_CHARS]),
            asked=clean(asked_text(payloads)[:MAX_DOCUMENT_CHARS]),
        )
        for run_id, (conversation_id, payloads) in runs.items()
    )


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


def _body_match(terms: list[str], *, column: str = "body") -> Q | _TsMatch:
    """A condition on SearchDocument rows: `column` (body, or asked: the user's words) holds
    every term as a word prefix."""
    if connection.vendor == "postgresql":
        # Terms are runs of letters and digits: no tsquery operator or quote inside.
        return _TsMatch(F(column), Value(" & ".join(f"'{term}':*" for term in terms)))
    # FTS5: each term a quoted string (no operator inside), `*` for the prefix; `body` holds the
    # user's words too, so the whole row is searched for it, only the `asked` column for asked.
    match = " ".join(f'"{term}"*' for term in terms)
    if column == "asked":
        match = f"asked : ({match})"
    fts = "SELECT rowid FROM chat_searchdocument_fts WHERE chat_searchdocument_fts MATCH %s"
    return Q(id__in=RawSQL(fts, [match]))


def _title_match(q: str, terms: list[str]) -> Q:
    words = terms or [q.strip()]
    condition = Q()
    for word in words:
        condition &= Q(title__icontains=word)
    return condition


def conversations_matching(conversations: QuerySet, *, q: str, owner) -> QuerySet:
    """The conversations of `conversations` that match `q` (see the module docstring), each with
    its `rank`: 1 where the user's own words match, 0 where only an answer does."""
    terms = query_terms(q)
    title = _title_match(q, terms)
    if not terms:
        return conversations.filter(title).annotate(rank=Value(1, output_field=IntegerField()))
    documents = SearchDocument.objects.filter(conversation__owner=owner)
    asked = documents.filter(conversation_id=OuterRef("pk")).filter(_body_match(terms, column="asked"))
    return conversations.filter(
        title | Q(pk__in=documents.filter(_body_match(terms)).values("conversation_id"))
    ).annotate(rank=Case(When(title | Q(Exists(asked)), then=Value(1)), default=Value(0), output_field=IntegerField()))


def snippets(*, conversations: Sequence[Any], q: str) -> dict[Any, str]:
    """A short plain-text excerpt per conversation around the first place a query word
    appears: in its newest run whose user message matches, else its newest matching run, else
    its title. Plain text: clients highlight the query's words themselves, so nothing here is
    markup, and the Markdown of messages and answers is reduced to its text."""
    terms = query_terms(q)
    out: dict[Any, str] = {c.pk: _excerpt(c.title, terms or [q.strip().lower()]) for c in conversations}
    if not terms or not conversations:
        return out
    documents = SearchDocument.objects.filter(conversation__in=[c.pk for c in conversations])
    for column in ("body", "asked"):  # the user's words last: they replace an answer's excerpt
        rows = (
            documents.filter(_body_match(terms, column=column))
            .order_by("conversation_id", "-id")
            .values_list("conversation_id", column)
        )
        seen: set[Any] = set()
        for conversation_id, text in rows:
            if conversation_id not in seen:
                seen.add(conversation_id)
                out[conversation_id] = _excerpt(markdown_text(text), terms)
    return out


# CommonMark without raw HTML: a `<b>` a user typed stays text, as the chat page shows it.
_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable("table").enable("strikethrough")


def markdown_text(source: str) -> str:
    """The text a reader sees in Markdown: inline text, code spans and blocks as their content,
    link and image text without their targets, blocks separated by a space."""
    parts: list[str] = []
    for token in _MARKDOWN.parse(source):
        if token.type == "inline":
            parts.append("".join(_inline_text(child) for child in token.children or []))
        elif token.type in ("fence", "code_block"):
            parts.append(token.content)
    return " ".join(parts)


def _inline_text(token) -> str:
    if token.type in ("text", "code_inline"):
        return token.content
    if token.type in ("softbreak", "hardbreak"):
        return " "
    if token.type == "image":
        return "".join(_inline_text(child) for child in token.children or [])
    return ""


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
