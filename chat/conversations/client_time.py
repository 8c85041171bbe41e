"""The one parser of times a client sends: an imported event's `ts`, a paging cursor's time.

`datetime.fromisoformat` accepts what no stored time can be: a valid ISO string whose offset
takes it out of Python's range once made UTC (`0001-01-01T00:00:00+14:00`,
`9999-12-31T23:59:59-14:00`) raises OverflowError, not ValueError, where it is converted (at
once here, on SQLite in the query's parameters otherwise). Every failure becomes one
`BadTime`, which the caller turns into the request's 400.
"""

from __future__ import annotations

from datetime import UTC, datetime


class BadTime(ValueError):
    pass


def parse_client_time(value: object) -> datetime:
    """The aware UTC time an ISO 8601 string with an offset names; BadTime otherwise."""
    if not isinstance(value, str):
        raise BadTime("is not an ISO 8601 time")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise BadTime("is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        raise BadTime("has no time zone")
    try:
        return moment.astimezone(UTC)
    except (OverflowError, ValueError):
        raise BadTime("is out of range (years 1 to 9999 in UTC)") from None
