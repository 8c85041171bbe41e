"""A schedule's slots (docs/protocol.md, "Schedules"): cron in its time zone, Vixie cron's day OR,
DST gaps skipped and folds fired once; `every` from its anchor; the newest passed slot."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from chat.scheduling.timing import TimingError, cron_checked, newest_slot, next_slot, zone

NEW_YORK = zone("America/New_York")


def fires(cron: str, tz, after: datetime, count: int) -> list[datetime]:
    out = []
    for _ in range(count):
        after = next_slot(cron=cron, every=None, at=None, tz=tz, anchor=after, after=after)
        out.append(after)
    return out


def test_a_time_in_the_spring_gap_is_skipped():
    # 2026-03-08 02:30 does not exist in New York.
    got = fires("30 2 * * *", NEW_YORK, datetime(2026, 3, 7, 12, tzinfo=UTC), 2)
    assert got == [datetime(2026, 3, 9, 6, 30, tzinfo=UTC), datetime(2026, 3, 10, 6, 30, tzinfo=UTC)]


def test_a_time_of_the_autumn_fold_fires_once():
    # 2026-11-01 01:30 happens twice in New York (EDT, then EST).
    got = fires("30 1 * * *", NEW_YORK, datetime(2026, 10, 31, 12, tzinfo=UTC), 2)
    assert got == [datetime(2026, 11, 1, 5, 30, tzinfo=UTC), datetime(2026, 11, 2, 6, 30, tzinfo=UTC)]
    hourly = fires("30 * * * *", NEW_YORK, datetime(2026, 11, 1, 4, tzinfo=UTC), 3)
    assert [f.hour for f in hourly] == [4, 5, 7]  # 00:30 EDT, 01:30 EDT, 02:30 EST


def test_both_day_fields_restricted_fire_on_either():
    # The 13th, or any Friday: 2026-02-06 is a Friday, 2026-02-13 a Friday the 13th, 2026-03-13 too.
    got = fires("0 12 13 * FRI", UTC, datetime(2026, 2, 1, tzinfo=UTC), 4)
    assert [f.day for f in got] == [6, 13, 20, 27]
    assert [f.weekday() for f in fires("0 0 * * 7", UTC, datetime(2026, 2, 1, tzinfo=UTC), 2)] == [6, 6]


def test_every_counts_from_its_anchor():
    anchor = datetime(2026, 1, 1, tzinfo=UTC)
    assert next_slot(cron=None, every=90, at=None, tz=UTC, anchor=anchor, after=anchor) == anchor + timedelta(
        seconds=90
    )
    after = anchor + timedelta(seconds=200)
    assert next_slot(cron=None, every=90, at=None, tz=UTC, anchor=anchor, after=after) == anchor + timedelta(
        seconds=270
    )


def test_newest_slot_of_missed_ones():
    anchor = datetime(2026, 1, 1, tzinfo=UTC)
    now = anchor + timedelta(seconds=1000)
    newest = newest_slot(
        cron=None, every=60, tz=UTC, anchor=anchor, slot=anchor + timedelta(seconds=60), now=now, since=anchor
    )
    assert newest == anchor + timedelta(seconds=960)
    newest = newest_slot(
        cron="*/5 * * * *", every=None, tz=UTC, anchor=anchor, slot=anchor, now=now, since=now - timedelta(hours=1)
    )
    assert newest == anchor + timedelta(minutes=15)


@pytest.mark.parametrize("cron", ["0 0 31 2 *", "1-0 * * * *", "*/5,@ * * * *", "0 0 * * MON#1", "0 0 1 ** *"])
def test_more_refused(cron):
    with pytest.raises(TimingError):
        cron_checked(cron, min_seconds=60)
