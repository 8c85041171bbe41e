"""Budgets (docs/protocol.md, "Budgets"): every scope refuses a start once used up, the tightest
applies, group budgets are an allowance per member (the most generous group wins), an agent
budget is one pool of all users, reservations fill a budget until the runs settle, periods of
TIME_ZONE's calendar, and the refusal's retryAfter / resetsAt / budget."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from chat.accounts.budgets import budget_stop, caps_for, period_bounds
from chat.conversations.services import conversation_create
from chat.eventlog.types import Message, RunStart
from chat.exceptions import QuotaBusy, QuotaExceeded
from chat.models import AgentProfile, ApiToken, Budget, GroupLimits, ModelCall, QueuedMessage, Run
from chat.runs.queue import message_queue, start_next
from chat.runs.starts import run_start, runs_start

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def start(user, conversation=None):
    conversation = conversation or conversation_create(owner=user)
    run, _ = run_start(conversation=conversation, user=user, content="hi", model="m", worker="w")
    return run


def spend(user, tokens: int, *, agent=None, token=None) -> Run:
    """A finished run of the user's whose one model call used `tokens`."""
    run = start(user)
    Run.objects.filter(pk=run.pk).update(status="succeeded", agent=agent, api_token=token)
    ModelCall.objects.create(run=run, iteration=1, attempt=1, started_at=timezone.now(), total_tokens=tokens)
    return run


@pytest.fixture(autouse=True)
def no_other_limits(settings):
    settings.AGENT_DAILY_TOKEN_QUOTA, settings.AGENT_MESSAGES_PER_MINUTE = 0, 0
    settings.AGENT_RUN_TOKEN_RESERVE = "10"


def test_a_user_budget_refuses_once_used_up_with_its_reset(make_user):
    alice = make_user("alice")
    budget = Budget.objects.create(scope="user", user=alice, period="week", tokens=100)
    spend(alice, 99)
    start(alice)  # 99 of 100: room
    Run.objects.filter(user=alice).update(status="succeeded")
    spend(alice, 1)
    with pytest.raises(QuotaExceeded) as refused:
        start(alice)
    assert not isinstance(refused.value, QuotaBusy)
    _, end = period_bounds("week", timezone.now())
    assert refused.value.budget == {
        "id": budget.pk,
        "scope": "user",
        "name": "alice",
        "period": "week",
        "unit": "tokens",
        "limit": 100,
        "used": 100,
        "reserved": 0,
        "remaining": 0,
        "resetsAt": end.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        "exhausted": True,
    }
    assert 1 <= refused.value.retry_after <= 7 * 86400
    assert refused.value.resets_at == refused.value.budget["resetsAt"]


def test_reservations_fill_a_budget_until_the_runs_settle(make_user):
    alice = make_user("alice")
    Budget.objects.create(scope="user", user=alice, period="day", tokens=25)
    first, second = start(alice), start(alice)  # 0 + 10, then 10 + 10 reserved: below 25
    assert (first.reserved_tokens, second.reserved_tokens) == (10, 10)
    start(alice)  # 20 reserved: below 25, room still
    with pytest.raises(QuotaBusy) as refused:  # 30 reserved
        start(alice)
    assert refused.value.budget["reserved"] == 30 and 1 <= refused.value.retry_after <= 60
    Run.objects.filter(user=alice).update(status="succeeded")  # settled: nothing reserved any more
    start(alice)


def test_group_budgets_are_an_allowance_per_member_and_the_most_generous_wins(make_user):
    alice, bob = make_user("alice"), make_user("bob")
    tight, loose = Group.objects.create(name="tight"), Group.objects.create(name="loose")
    tight.user_set.add(alice, bob)
    loose.user_set.add(bob)
    Budget.objects.create(scope="group", group=tight, period="month", tokens=50)
    Budget.objects.create(scope="group", group=loose, period="month", tokens=500)
    spend(alice, 50)
    spend(bob, 50)  # bob's own use: not alice's, and under his more generous group's limit
    with pytest.raises(QuotaExceeded) as refused:
        start(alice)
    assert refused.value.budget["scope"] == "group" and refused.value.budget["name"] == "tight"
    start(bob)
    assert [(c.name, c.limit) for c in caps_for(user_id=bob.pk, agent_id=None)] == [("loose", 500)]


def test_a_groups_daily_quota_is_its_day_tokens_budget_else_the_setting(make_user, settings):
    settings.AGENT_DAILY_TOKEN_QUOTA = 30
    alice, bob = make_user("alice"), make_user("bob")
    team = Group.objects.create(name="team")
    GroupLimits.objects.create(group=team, daily_token_quota=1000)
    team.user_set.add(bob)
    assert [(c.scope, c.name, c.limit) for c in caps_for(user_id=alice.pk, agent_id=None)] == [("default", None, 30)]
    assert [(c.scope, c.name, c.limit) for c in caps_for(user_id=bob.pk, agent_id=None)] == [("group", "team", 1000)]
    spend(alice, 30)
    spend(bob, 30)
    with pytest.raises(QuotaExceeded, match="30 of 30 tokens used today"):
        start(alice)
    start(bob)


def test_an_agent_budget_is_one_pool_of_all_users(make_user):
    alice, bob = make_user("alice"), make_user("bob")
    Budget.objects.create(scope="agent", agent=None, period="day", tokens=100)  # the environment's agent
    other = AgentProfile.objects.create(name="Other", slug="other", model="m")
    spend(bob, 60)
    spend(bob, 500, agent=other)  # another agent's: not this pool
    start(alice)  # 60 used + 0 reserved
    Run.objects.filter(user=alice).update(status="succeeded")
    spend(alice, 40)
    with pytest.raises(QuotaExceeded) as refused:
        start(alice)
    assert refused.value.budget["scope"] == "agent" and refused.value.budget["name"] == "default"
    assert refused.value.budget["used"] == 100


def test_a_token_budget_counts_only_that_tokens_runs(make_user):
    alice = make_user("alice")
    token = ApiToken.objects.create(user=alice, name="ci", digest="d" * 64, hint="x")
    Budget.objects.create(scope="token", token=token, period="day", tokens=50)
    spend(alice, 1000)  # a session's runs never count
    spend(alice, 50, token=token)
    (cap,) = caps_for(user_id=alice.pk, agent_id=None, token_id=token.pk)
    assert (cap.scope, cap.name, cap.limit) == ("token", "ci", 50)
    assert caps_for(user_id=alice.pk, agent_id=None) == []
    start(alice)  # a session's start: the token's budget does not apply
    conversation = conversation_create(owner=alice)
    with pytest.raises(QuotaExceeded) as refused:  # the token's own start
        runs_start_one(Message(conversation, alice, "hi", api_token_id=token.pk))
    assert refused.value.budget["scope"] == "token"
    Budget.objects.filter(scope="token").update(tokens=51)
    run, _ = runs_start_one(Message(conversation, alice, "hi", api_token_id=token.pk))
    assert run.api_token_id == token.pk and run.reserved_tokens == 10


def runs_start_one(message: Message):
    (result,) = runs_start(starts=[RunStart(message, "m", "w")])
    if isinstance(result, Exception):
        raise result
    return result


def test_the_tightest_budget_decides_and_zero_is_unlimited(make_user):
    alice = make_user("alice")
    Budget.objects.create(scope="user", user=alice, period="month", tokens=0, cost=0)  # unlimited
    Budget.objects.create(scope="agent", agent=None, period="day", tokens=1000)
    Budget.objects.create(scope="user", user=alice, period="day", tokens=20)
    assert sorted(c.limit for c in caps_for(user_id=alice.pk, agent_id=None)) == [20, 1000]
    spend(alice, 20)
    with pytest.raises(QuotaExceeded) as refused:
        start(alice)
    assert refused.value.budget["limit"] == 20


def test_periods_follow_the_time_zones_calendar(settings):
    settings.TIME_ZONE = "Asia/Kolkata"
    now = datetime(2026, 12, 2, 20, 0, tzinfo=UTC)  # 01:30 on the 3rd in Kolkata, a Thursday
    start_, end = period_bounds("day", now)
    assert start_.astimezone(UTC) == datetime(2026, 12, 2, 18, 30, tzinfo=UTC)
    assert end.astimezone(UTC) == datetime(2026, 12, 3, 18, 30, tzinfo=UTC)
    week_start, _ = period_bounds("week", now)
    assert week_start.astimezone(UTC) == datetime(2026, 11, 29, 18, 30, tzinfo=UTC)  # Monday the 30th
    month_start, month_end = period_bounds("month", now)
    assert month_start.astimezone(UTC) == datetime(2026, 11, 30, 18, 30, tzinfo=UTC)
    assert month_end.astimezone(UTC) == datetime(2026, 12, 31, 18, 30, tzinfo=UTC)


def test_a_groups_day_tokens_budget_and_its_daily_quota_are_one_value(make_user):
    team = Group.objects.create(name="team")
    budget = Budget.objects.create(scope="group", group=team, period="day", tokens=300)
    assert GroupLimits.objects.get(group=team).daily_token_quota == 300
    limits = GroupLimits.objects.get(group=team)
    limits.daily_token_quota = 700
    limits.save()
    budget.refresh_from_db()
    assert budget.tokens == 700
    budget.delete()
    assert GroupLimits.objects.get(group=team).daily_token_quota is None


def test_a_resumed_run_counts_its_calls_from_before_and_its_own_since(make_user):
    alice = make_user("alice")
    Budget.objects.create(scope="user", user=alice, period="day", tokens=100)
    run = start(alice)
    taken_up = timezone.now()
    earlier = taken_up - timedelta(seconds=30)  # a call of the process that died
    ModelCall.objects.create(run=run, iteration=1, attempt=1, started_at=earlier, total_tokens=70)
    ModelCall.objects.create(run=run, iteration=2, attempt=1, started_at=taken_up, total_tokens=20)  # stored since
    check = dict(run_id=run.pk, user_id=alice.pk, agent_id=None, since=taken_up)
    assert budget_stop(**check, own=("m", 0, 0, 20)) is None  # 70 + 20 (the stored one, as own)
    stop = budget_stop(**check, own=("m", 0, 0, 30))  # 70 + 30: reached
    assert stop["budget"]["used"] == 100 and stop["budget"]["exhausted"] and stop["retryAfter"] >= 1


def test_a_queued_message_keeps_its_token_for_the_run_it_starts(make_user):
    alice = make_user("alice")
    token = ApiToken.objects.create(user=alice, name="ci", digest="e" * 64, hint="y")
    conversation = conversation_create(owner=alice)
    running = start(alice, conversation)
    queued, _ = message_queue(Message(conversation, alice, "later", api_token_id=token.pk))
    assert queued is not None and QueuedMessage.objects.get().api_token_id == token.pk
    Run.objects.filter(pk=running.pk).update(status="succeeded")
    start_next([conversation.pk], "w")
    started = Run.objects.filter(conversation=conversation, status="running").get()
    assert started.api_token_id == token.pk


def test_of_several_budgets_used_up_the_refusal_tells_the_one_that_resets_last(make_user):
    """retryAfter / resetsAt: until every refusing budget has room again, at admission and before
    a model call alike (the day's budget listed first, so the first one found is not the answer)."""
    alice = make_user("alice")
    Budget.objects.create(scope="user", user=alice, period="day", tokens=10)
    month = Budget.objects.create(scope="agent", agent=None, period="month", tokens=10)
    run = spend(alice, 10)
    now = timezone.now()
    _, month_end = period_bounds("month", now)
    expected = month_end.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    with pytest.raises(QuotaExceeded) as refused:
        start(alice)
    assert refused.value.resets_at == expected == refused.value.budget["resetsAt"]
    assert refused.value.budget["id"] == month.pk or period_bounds("day", now)[1] == month_end
    assert refused.value.retry_after >= (month_end - timezone.now()).total_seconds() - 1
    stop = budget_stop(run_id=run.pk, user_id=alice.pk, agent_id=None, own=("m", 0, 0, 0), since=timezone.now())
    assert stop["resetsAt"] == expected == stop["budget"]["resetsAt"]
    assert stop["retryAfter"] >= (month_end - timezone.now()).total_seconds() - 1


def test_with_no_budget_anywhere_the_check_before_a_model_call_is_two_probes(make_user, django_assert_max_num_queries):
    """No budget on the site: two existence probes, not the run's token and its caps' queries;
    the budget made next (as on another process) stops the next call, nothing cached."""
    alice = make_user("alice")
    run = spend(alice, 50)
    check = dict(run_id=run.pk, user_id=alice.pk, agent_id=None, own=("m", 0, 0, 0), since=timezone.now())
    with django_assert_max_num_queries(2):
        assert budget_stop(**check) is None
    Budget.objects.create(scope="user", user=alice, period="day", tokens=50)
    assert budget_stop(**check)["budget"]["scope"] == "user"
