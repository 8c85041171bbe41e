"""Keyset pages of a queryset, pinned first, newest first, behind an opaque cursor.

A page is ordered by (pinned, updated_at, id) descending, and the cursor holds the three values
of its last row: rows that share an updated_at are neither repeated nor skipped across pages, and
a row that changes while someone pages on (a new message moves it to the top) moves out of
the pages still to come instead of shifting them. The cursor is base64url text so that
clients treat it as opaque; it is validated, a bad one is a `BadCursor` (ValueError).

Ranked rows (search hits, annotated with an integer `rank`) are ordered by rank first, and
their cursor holds the rank too; a cursor of one kind of list is refused by the other.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import datetime

from django.db.models import Q, QuerySet

from chat.conversations.client_time import parse_client_time

MAX_CURSOR_CHARS = 200


class BadCursor(ValueError):
    pass


def cursor_of(row, *, ranked: bool = False) -> str:
    raw = f"{row.updated_at.isoformat()}|{row.pk}|{int(row.pinned)}" + (f"|{row.rank}" if ranked else "")
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode(cursor: str, *, ranked: bool) -> tuple[datetime, uuid.UUID, bool, int]:
    problem = BadCursor("before is not a cursor of this list: pass the `next` value of the previous page")
    if len(cursor) > MAX_CURSOR_CHARS:
        raise problem
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        parts = raw.split("|")
        if len(parts) != (4 if ranked else 3) or parts[2] not in ("0", "1"):
            raise problem
        updated_at, row_id, pinned = parse_client_time(parts[0]), uuid.UUID(parts[1]), parts[2] == "1"
        rank = int(parts[3]) if ranked else 0
    except (binascii.Error, UnicodeDecodeError, ValueError):  # BadTime is a ValueError
        raise problem from None
    return updated_at, row_id, pinned, rank


def page_of(rows: QuerySet, *, limit: int, before: str | None = None, ranked: bool = False) -> tuple[list, str | None]:
    """Up to `limit` rows after the cursor, and the cursor of the next page (None: the last).
    Pinned rows come first (docs/protocol.md, "Conversations"), search hits by rank within them."""
    order = ["-pinned", "-rank", "-updated_at", "-pk"] if ranked else ["-pinned", "-updated_at", "-pk"]
    if before:
        updated_at, row_id, pinned, rank = _decode(before, ranked=ranked)
        after = Q(updated_at__lt=updated_at) | Q(updated_at=updated_at, pk__lt=row_id)
        if ranked:
            after = Q(rank__lt=rank) | (Q(rank=rank) & after)
        # Below a pinned row: the pinned ones after it, then every unpinned one.
        rows = rows.filter(Q(pinned=False) | after if pinned else Q(pinned=False) & after)
    page = list(rows.order_by(*order)[: limit + 1])
    if len(page) <= limit:
        return page, None
    page = page[:limit]
    return page, cursor_of(page[-1], ranked=ranked)
