"""chat.runs.admission: the rules of a start, in the order a user is told, counted through a
group of starts; and the daily quota while runs are in progress (docs/configuration.md, "The
quota and runs in progress"): under a quota a user's runs start one at a time, whatever the
conversation and however the starts are batched, so at most one run goes past an exhausted
quota; a run that ends past it refuses the next; users without a quota are not held."""

from __future__ import annotations

import os
import threading
import time

import pytest
from django.contrib.auth.models import Group
from django.db import connection, transaction
from django.utils import timezone

from chat.accounts.budgets import Cap
from chat.accounts.limits import Limits
from chat.conversations.services import conversation_create
from chat.eventlog.types import Message, RunStart
from chat.exceptions import AgentUnavailable, QuotaBusy, QuotaExceeded, RateLimited, RunInProgress
from chat.models import GroupLimits, ModelCall, Run
from chat.runs.admission import Admission
from chat.runs.starts import run_start, runs_start

pytestmark = [pytest.mark.django_db, pytest.mark.services]


class _User:
    pk = 1


def _admission(*, quota=0, rate=0, spent=0, reserved=0, **counts) -> Admission:
    caps = [Cap("default", None, None, "day", "tokens", quota, user_id=1)] if quota else []
    return Admission(
        limits={1: Limits(daily_token_quota=quota, messages_per_minute=rate)},
        recent=counts.get("recent", {}),
        busy=counts.get("busy", set()),
        agent_ids=counts.get("agent_ids", {}),
        usable=counts.get("usable", {}),
        now=timezone.now(),
        caps={(1, counts.get("agent_ids", {}).get("c1"), None): caps, (1, None, None): caps},
        used={cap.key: spent for cap in caps},
        reserved={cap.key: reserved for cap in caps},
    )


def _refusal(admission: Admission, key="c1"):
    return admission.refusal(RunStart(Message(None, _User(), "hi"), "m", "w"), key)


def test_the_refusals_come_in_the_order_a_user_is_told():
    everything = dict(recent={1: 5}, spent=100, reserved=4096, busy={"c1"}, agent_ids={"c1": 7}, usable={})
    assert isinstance(_refusal(_admission(quota=50, rate=5, **everything)), AgentUnavailable)
    everything["usable"] = {(1, 7): object()}
    assert isinstance(_refusal(_admission(quota=50, rate=5, **everything)), RateLimited)
    assert isinstance(_refusal(_admission(quota=50, rate=6, **everything)), QuotaExceeded)
    assert isinstance(_refusal(_admission(quota=500, rate=6, **everything)), RunInProgress)
    everything["busy"] = set()
    assert isinstance(_refusal(_admission(quota=500, rate=6, **everything)), QuotaBusy)
    assert _refusal(_admission(quota=0, rate=0, **everything)) is None  # no limits: only the agent and the conversation


def test_an_admitted_start_counts_against_the_rest_of_its_group(settings):
    settings.AGENT_RUN_TOKEN_RESERVE = "60"
    admission = _admission(quota=100, rate=3)
    start = RunStart(Message(None, _User(), "hi"), "m", "w")
    assert admission.refusal(start, "c1") is None
    assert admission.reserve(start, "c1") == 60
    assert isinstance(admission.refusal(start, "c1"), RunInProgress)
    assert admission.refusal(start, "c2") is None  # 60 reserved of 100: room left
    admission.reserve(start, "c2")
    refused = admission.refusal(start, "c3")  # 120 reserved of 100
    assert isinstance(refused, QuotaBusy) and refused.budget["reserved"] == 120
    assert 1 <= refused.retry_after <= 60
    admission.reserve(start, "c4")
    assert isinstance(admission.refusal(start, "c5"), RateLimited)  # three this minute


def start(user, conversation=None):
    conversation = conversation or conversation_create(owner=user)
    run, _ = run_start(conversation=conversation, user=user, content="hi", model="m", worker="w")
    return run


def end(run, tokens: int) -> None:
    ModelCall.objects.create(run=run, iteration=1, attempt=1, started_at=timezone.now(), total_tokens=tokens)
    Run.objects.filter(pk=run.pk).update(status="succeeded")


def test_under_a_quota_runs_start_one_at_a_time_and_one_ends_past_it(make_user, settings):
    settings.AGENT_DAILY_TOKEN_QUOTA, settings.AGENT_MESSAGES_PER_MINUTE = 20, 0
    alice = make_user("alice")
    first = start(alice)
    # Nothing used yet, but a run in progress may use it all: another conversation waits.
    with pytest.raises(QuotaBusy, match="0 of 20 tokens used today .* and a run in progress"):
        start(alice)
    # Its own conversation still says a run is in progress there.
    with pytest.raises(RunInProgress):
        start(alice, first.conversation)
    end(first, 8)
    second = start(alice)  # 8 of 20: the quota is not used up
    end(second, 16)  # this one ends past the quota (24 of 20) ...
    with pytest.raises(QuotaExceeded, match="24 of 20 tokens") as refused:
        start(alice)  # ... and the next is refused at its start
    assert not isinstance(refused.value, QuotaBusy)
    assert Run.objects.filter(user=alice).count() == 2


def test_a_batch_of_starts_admits_one_run_per_user_under_a_quota(make_user, settings):
    settings.AGENT_DAILY_TOKEN_QUOTA, settings.AGENT_MESSAGES_PER_MINUTE = 20, 0
    alice, bob = make_user("alice"), make_user("bob")
    unlimited = Group.objects.create(name="unlimited")
    GroupLimits.objects.create(group=unlimited, daily_token_quota=0)
    unlimited.user_set.add(bob)
    starts = [RunStart(Message(conversation_create(owner=user), user, "hi"), "m", "w") for user in (alice, bob) * 4]
    results = runs_start(starts=starts)
    alices, bobs = results[0::2], results[1::2]
    assert sum(isinstance(r, tuple) for r in alices) == 1
    assert all(isinstance(r, QuotaBusy) for r in alices if not isinstance(r, tuple))
    assert all(isinstance(r, tuple) for r in bobs)  # no quota: his runs go in parallel
    assert Run.objects.filter(user=alice, status="running").count() == 1


def _waiting_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0] > 0


@pytest.mark.multiprocess
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")), reason="needs PostgreSQL"
)
def test_a_start_in_another_transaction_is_counted_before_this_one(make_user, settings):
    """Two processes' starts of one user, as two connections: the first has stored its run and
    not committed yet when the second counts. The second waits on the user's row and then
    counts the first's run; a count outside that lock would read no run and admit both."""
    settings.AGENT_DAILY_TOKEN_QUOTA, settings.AGENT_MESSAGES_PER_MINUTE = 20, 0
    alice = make_user("alice")
    theirs, ours = conversation_create(owner=alice), conversation_create(owner=alice)
    stored, done = threading.Event(), threading.Event()
    outcome: list = []

    def other_process() -> None:
        try:
            with transaction.atomic():
                outcome.extend(runs_start(starts=[RunStart(Message(theirs, alice, "first"), "m", "w")]))
                stored.set()
                # Commit once this test's start waits on a lock (or has finished without one).
                deadline = time.monotonic() + 60
                while not (done.is_set() or _waiting_on_a_lock()) and time.monotonic() < deadline:
                    time.sleep(0.01)
        finally:
            stored.set()
            connection.close()

    thread = threading.Thread(target=other_process)
    thread.start()
    stored.wait()
    try:
        with pytest.raises(QuotaBusy):
            start(alice, ours)
    finally:
        done.set()
        thread.join()
    assert isinstance(outcome[0], tuple)
    assert Run.objects.filter(user=alice).count() == 1
