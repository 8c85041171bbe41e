"""A schedule's timing (docs/protocol.md, "Schedules"): a five-field `cron` read in the schedule's
time zone, `every` so many seconds from an anchor, or one moment `at`; and its slots.

Cron expressions are checked here against what the protocol takes, then evaluated by cronsim
(Vixie cron's day-of-month / day-of-week OR). cronsim follows Debian cron at a DST change (a
time in the gap fires at the end of the gap); the protocol skips such a time instead, and fires a
time of a fold once."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

EVERY_MAX = 31622400  # seconds: a leap year

_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
# (name, lowest, highest, names numbered from `lowest`) of each field, in order.
_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),
)
_ITEM = re.compile(r"^(?:(\*)|(\w+)(?:-(\w+))?)(?:/(\d+))?$", re.ASCII)
# How far ahead the closest two fires of a cron are looked for.
_GAP_HORIZON = timedelta(days=400)
_GAP_FIRES = 2000


class TimingError(ValueError):
    """A timing the protocol refuses; the message names what is wrong."""


def zone(name) -> ZoneInfo:
    if not isinstance(name, str) or not name or "\x00" in name:
        raise TimingError("timezone must be an IANA time zone name, such as Asia/Shanghai")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise TimingError(f"timezone {name!r} is not a time zone this server knows") from None


def _value(text: str, low: int, high: int, names: tuple[str, ...], field: str) -> int:
    if text.isdigit():
        number = int(text)
    elif text.upper() in names:
        number = names.index(text.upper()) + (low if names is _MONTHS else 0)
    else:
        raise TimingError(f"cron: {text!r} is not a value of the {field} field")
    if not low <= number <= high:
        raise TimingError(f"cron: {number} is out of range for the {field} field ({low}-{high})")
    return number


def _check_field(text: str, field: str, low: int, high: int, names: tuple[str, ...]) -> None:
    for item in text.split(","):
        match = _ITEM.match(item)
        if match is None:
            raise TimingError(f"cron: {item!r} is not a valid item of the {field} field")
        star, start, end, step = match.groups()
        if step is not None and int(step) < 1:
            raise TimingError(f"cron: a step of the {field} field must be at least 1")
        if star:
            continue
        first = _value(start, low, high, names, field)
        if end is not None:
            if _value(end, low, high, names, field) < first:
                raise TimingError(f"cron: the range {item!r} of the {field} field runs backwards")
        elif step is not None:
            raise TimingError(f"cron: a step of the {field} field needs * or a range before it")


def cron_checked(expression, *, min_seconds: int) -> str:
    """The expression, trimmed, if the protocol takes it; else TimingError."""
    if not isinstance(expression, str):
        raise TimingError("cron must be a string of five fields")
    fields = expression.split()
    if len(fields) != 5:
        raise TimingError("cron must have five fields: minute hour day-of-month month day-of-week")
    for text, (field, low, high, names) in zip(fields, _FIELDS, strict=True):
        _check_field(text, field, low, high, names)
    normal = " ".join(fields)
    try:
        CronSim(normal, datetime(2026, 1, 1, tzinfo=UTC))
    except CronSimError as exc:
        raise TimingError(f"cron: {exc}") from None
    if _closest_fires(normal) < min_seconds:
        raise TimingError(f"cron: two fires are closer than {min_seconds} seconds")
    return normal


def _closest_fires(expression: str) -> float:
    """The shortest time between two consecutive fires over the next year or so (in UTC)."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    closest = float("inf")
    previous = None
    for count, fire in enumerate(CronSim(expression, start)):
        if previous is not None:
            closest = min(closest, (fire - previous).total_seconds())
        if fire - start > _GAP_HORIZON or count >= _GAP_FIRES:
            break
        previous = fire
    return closest


def every_checked(value, *, min_seconds: int) -> int:
    if type(value) is not int or not min_seconds <= value <= EVERY_MAX:
        raise TimingError(f"every must be a whole number of seconds from {min_seconds} to {EVERY_MAX}")
    return value


def at_checked(value, *, tz: ZoneInfo, now: datetime) -> datetime:
    """An ISO 8601 time, read in `tz` when it has no offset; in the past: TimingError."""
    if not isinstance(value, str):
        raise TimingError("at must be an ISO 8601 time")
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise TimingError("at must be an ISO 8601 time, such as 2026-12-01T07:00:00+08:00") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=tz)
    moment = moment.astimezone(UTC)
    if moment <= now:
        raise TimingError("at is in the past")
    return moment


def _cron_fires(expression: str, tz: ZoneInfo, after: datetime) -> Iterator[datetime]:
    """The cron's fires strictly after `after`, in UTC: a local time in a DST gap skipped, one of a
    fold once (its first occurrence)."""
    spec = CronSim(expression, after.astimezone(tz))
    for fire in spec:
        local = fire.astimezone(tz)
        if local.minute not in spec.minutes or local.hour not in spec.hours:
            continue  # moved out of a DST gap by cronsim: that local time did not exist
        if local.fold and local.replace(fold=0).astimezone(UTC) != local.astimezone(UTC):
            continue  # the second occurrence of a local time
        yield fire.astimezone(UTC)


def next_slot(
    *, cron: str | None, every: int | None, at: datetime | None, tz: ZoneInfo, anchor: datetime, after: datetime
) -> datetime | None:
    """The first slot strictly after `after` (None: an `at` passed, or a cron that never fires)."""
    if cron:
        return next(_cron_fires(cron, tz, after), None)
    if every:
        if after < anchor:
            return anchor + timedelta(seconds=every)
        k = int((after - anchor).total_seconds() // every) + 1
        return anchor + timedelta(seconds=k * every)
    if at is not None and at > after:
        return at
    return None


def newest_slot(
    *,
    cron: str | None,
    every: int | None,
    tz: ZoneInfo,
    anchor: datetime,
    slot: datetime,
    now: datetime,
    since: datetime,
) -> datetime:
    """The newest slot from the due `slot` up to `now`; slots older than `since` are not looked
    through one by one (the answer is then older than `since` too)."""
    newest = slot
    if cron:
        for fire in _cron_fires(cron, tz, max(slot, since) - timedelta(seconds=1)):
            if fire > now:
                break
            newest = fire
    elif every:
        k = int((now - anchor).total_seconds() // every)
        newest = max(slot, anchor + timedelta(seconds=k * every))
    return newest
