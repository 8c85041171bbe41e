"""Keyset pages of a queryset, newest first, behind an opaque cursor.

A page is ordered by (updated_at, id) descending, and the cursor holds both values of its
last row: rows that share an updated_at are neither repeated nor skipped across pages, and
a row that changes while someone pages on (a new message moves it to the top) moves out of
the pages still to come instead of shifting them. The cursor is base64url text so that
clients treat it as opaque; it is validated, a bad one is a `BadCursor` (ValueError).
"""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import datetime

from django.db.models import Q, QuerySet

from .client_time import parse_client_time

MAX_CURSOR_CHARS = 200


class BadCursor(ValueError):
    pass


def cursor_of(row) -> str:
    raw = f"{row.updated_at.isoformat()}|{row.pk}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(cursor: str) -> tuple[datetime, uuid.UUID]:
    problem = BadCursor("before is not a cursor of this list: pass the `next` value of the previous page")
    if len(cursor) > MAX_CURSOR_CHARS:
        raise problem
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        stamp, _, pk = raw.partition("|")
        updated_at, row_id = parse_client_time(stamp), uuid.UUID(pk)
    except (binascii.Error, UnicodeDecodeError, ValueError):  # BadTime is a ValueError
        raise problem from None
    return updated_at, row_id


def page_of(rows: QuerySet, *, limit: int, before: str | None = None) -> tuple[list, str | None]:
    """Up to `limit` rows older than the cursor, and the cursor of the next page (None: the last)."""
    if before:
        updated_at, row_id = _decode(before)
        rows = rows.filter(Q(updated_at__lt=updated_at) | Q(updated_at=updated_at, pk__lt=row_id))
    page = list(rows.order_by("-updated_at", "-pk")[: limit + 1])
    if len(page) <= limit:
        return page, None
    page = page[:limit]
    return page, cursor_of(page[-1])
