"""Limits per group (docs/configuration.md, "Limits per group"): how a user's limits are chosen
from their groups' and the settings, the start refused at the group's limit and not the
setting's (through the real consumer and run_start), one query for a batch of starts whatever
the number of groups, the admin's group form, and the usage API's applied quota."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chat.accounts.limits import Limits, limits_for_user, limits_for_users, most_generous
from chat.conversations.services import conversation_create
from chat.eventlog.types import Message, RunStart
from chat.exceptions import QuotaExceeded, RateLimited
from chat.models import GroupLimits, ModelCall, Run
from chat.runs.starts import run_start, runs_start
from tests.asgi_socket import Socket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def group(name: str, *, quota: int | None = None, rate: int | None = None, members=()) -> Group:
    g = Group.objects.create(name=name)
    GroupLimits.objects.create(group=g, daily_token_quota=quota, messages_per_minute=rate)
    g.user_set.add(*members)
    return g


def spend(user, tokens: int) -> None:
    conversation = conversation_create(owner=user)
    run, _ = run_start(conversation=conversation, user=user, content="x", model="m", worker="w")
    Run.objects.filter(pk=run.pk).update(status="succeeded")
    ModelCall.objects.create(run=run, iteration=1, attempt=1, started_at=timezone.now(), total_tokens=tokens)


def test_most_generous_prefers_unlimited_then_the_largest():
    assert most_generous([], 20) == 20
    assert most_generous([None, None], 20) == 20
    assert most_generous([5, None, 50], 20) == 50
    assert most_generous([5, 0, 50], 20) == 0
    assert most_generous([5], 0) == 5  # a group may set a limit where the setting has none


def test_resolution_over_groups(make_user, settings):
    settings.AGENT_DAILY_TOKEN_QUOTA, settings.AGENT_MESSAGES_PER_MINUTE = 1000, 20
    nobody, one, two, free, blank = (make_user(n) for n in ("nobody", "one", "two", "free", "blank"))
    Group.objects.create(name="no row").user_set.add(nobody)
    group("small", quota=500, rate=3, members=[one, two, free])
    group("large", quota=5000, members=[two])
    group("unlimited", quota=0, rate=0, members=[free])
    group("unset", members=[blank])  # a row with both blank sets nothing
    assert limits_for_users(user_ids=[u.pk for u in (nobody, one, two, free, blank)]) == {
        nobody.pk: Limits(1000, 20),
        one.pk: Limits(500, 3),
        two.pk: Limits(5000, 3),  # the quota of one group, the rate of the other
        free.pk: Limits(0, 0),
        blank.pk: Limits(1000, 20),
    }
    # The settings are read at each call, as the groups are: no restart for either.
    settings.AGENT_DAILY_TOKEN_QUOTA = 7
    GroupLimits.objects.filter(group__name="small").update(messages_per_minute=9)
    assert limits_for_user(user=nobody) == Limits(7, 20)
    assert limits_for_user(user=one) == Limits(500, 9)


async def test_the_socket_is_rate_limited_at_the_groups_limit(conversation, registry, llm_settings, settings):
    settings.AGENT_MESSAGES_PER_MINUTE = 1000
    await GroupLimits.objects.acreate(group=await Group.objects.acreate(name="slow"), messages_per_minute=1)
    await (await Group.objects.aget(name="slow")).user_set.aadd(conversation.owner)
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": "one"})
    await socket.run_to_end()
    await socket.send({"type": "message", "content": "two"})
    error = await socket.recv()
    assert error["code"] == "RATE_LIMITED" and error["detail"] == "at most 1 messages per minute"
    # The admin lifts it: the next message starts, no restart.
    await GroupLimits.objects.filter(group__name="slow").aupdate(messages_per_minute=0)
    await socket.send({"type": "message", "content": "three"})
    frames = await socket.run_to_end()
    assert frames[-1]["status"] == "succeeded"
    await socket.close()
    assert await Run.objects.filter(conversation=conversation).acount() == 2


def test_the_quota_is_the_groups_not_the_settings(make_user, settings):
    settings.AGENT_DAILY_TOKEN_QUOTA = 1_000_000
    alice, bob = make_user("alice"), make_user("bob")
    team = group("team", quota=50, members=[alice, bob])
    spend(alice, 60)
    with pytest.raises(QuotaExceeded, match="60 of 50 tokens"):
        run_start(conversation=conversation_create(owner=alice), user=alice, content="hi", model="m", worker="w")
    # bob's tokens are his own.
    assert run_start(conversation=conversation_create(owner=bob), user=bob, content="hi", model="m", worker="w")
    # A group that makes alice unlimited beats the setting's and the team's number.
    settings.AGENT_DAILY_TOKEN_QUOTA = 10
    group("unlimited", quota=0, members=[alice])
    run, _ = run_start(conversation=conversation_create(owner=alice), user=alice, content="hi", model="m", worker="w")
    assert run.status == "running"
    # Out of that group, the team's 50 (not the setting's 10) refuses her again.
    Group.objects.get(name="unlimited").user_set.remove(alice)
    with pytest.raises(QuotaExceeded, match="of 50 tokens"):
        run_start(conversation=conversation_create(owner=alice), user=alice, content="hi", model="m", worker="w")
    team.limits.delete()
    with pytest.raises(QuotaExceeded, match="of 10 tokens"):
        run_start(conversation=conversation_create(owner=alice), user=alice, content="hi", model="m", worker="w")


def test_a_group_may_lift_the_settings_rate_limit(make_user, settings):
    settings.AGENT_MESSAGES_PER_MINUTE = 1
    alice = make_user("alice")
    run_start(conversation=conversation_create(owner=alice), user=alice, content="1", model="m", worker="w")
    with pytest.raises(RateLimited, match="at most 1 messages"):
        run_start(conversation=conversation_create(owner=alice), user=alice, content="2", model="m", worker="w")
    group("fast", rate=100, members=[alice])
    run_start(conversation=conversation_create(owner=alice), user=alice, content="3", model="m", worker="w")


def _batch_queries(users) -> int:
    starts = [RunStart(Message(conversation_create(owner=u), u, "hi"), "m", "w") for u in users]
    with CaptureQueriesContext(connection) as queries:
        results = runs_start(starts=starts)
    assert all(isinstance(r, tuple) for r in results), results
    return len(queries)


def test_a_batch_of_starts_reads_the_limits_in_one_query(make_user, settings):
    settings.AGENT_DAILY_TOKEN_QUOTA, settings.AGENT_MESSAGES_PER_MINUTE = 1000, 1000
    few = [make_user(f"few{i}") for i in range(2)]
    group("g0", quota=5000, rate=50, members=few)
    baseline = _batch_queries(few)
    many = [make_user(f"many{i}") for i in range(8)]
    for n in range(6):
        group(f"h{n}", quota=5000 + n, rate=50 + n, members=many)
    assert _batch_queries(many) == baseline


def test_staff_set_a_groups_limits_in_the_admin(make_user, settings):
    settings.AGENT_DAILY_TOKEN_QUOTA = 0
    staff = make_user("staff")
    staff.is_staff = staff.is_superuser = True
    staff.save()
    alice = make_user("alice")
    client = Client()
    client.force_login(staff)
    form = {
        "name": "interns",
        "limits-TOTAL_FORMS": "1",
        "limits-INITIAL_FORMS": "0",
        "limits-MIN_NUM_FORMS": "0",
        "limits-MAX_NUM_FORMS": "1",
        "limits-0-daily_token_quota": "40",
        "limits-0-messages_per_minute": "",
    }
    r = client.post("/admin/auth/group/add/", form)
    assert r.status_code == 302, r.content.decode()[:3000]
    interns = Group.objects.get(name="interns")
    assert (interns.limits.daily_token_quota, interns.limits.messages_per_minute) == (40, None)
    interns.user_set.add(alice)
    listing = client.get("/admin/auth/group/").content.decode()
    assert "interns" in listing and "40" in listing and "not set" in listing
    page = client.get(f"/admin/auth/group/{interns.pk}/change/").content.decode()
    assert 'name="limits-0-daily_token_quota"' in page and 'value="40"' in page
    # A negative figure is refused with the form again, not stored.
    bad = {**form, "limits-INITIAL_FORMS": "1", "limits-0-group": str(interns.pk), "limits-0-daily_token_quota": "-1"}
    r = client.post(f"/admin/auth/group/{interns.pk}/change/", bad)
    assert r.status_code == 200 and b"greater than or equal to 0" in r.content
    for value, error in (("10" * 12, b"less than or equal to"), ("lots", b"Enter a whole number")):
        r = client.post(f"/admin/auth/group/{interns.pk}/change/", {**bad, "limits-0-daily_token_quota": value})
        assert r.status_code == 200 and error in r.content
    # Only staff reach the form: alice is sent to the admin's sign-in, and nothing changes.
    as_alice = Client()
    as_alice.force_login(alice)
    r = as_alice.post(f"/admin/auth/group/{interns.pk}/change/", {**bad, "limits-0-daily_token_quota": "0"})
    assert r.status_code == 302 and "/admin/login/" in r["Location"]
    assert GroupLimits.objects.get(group=interns).daily_token_quota == 40
    # The usage API (the sidebar's line) gives the quota that applies: the group's.
    assert as_alice.get("/api/usage/").json()["dailyTokenQuota"] == 40
    spend(alice, 45)
    with pytest.raises(QuotaExceeded, match="45 of 40"):
        run_start(conversation=conversation_create(owner=alice), user=alice, content="hi", model="m", worker="w")
    # Made unlimited in the admin: the next start goes, and the API says there is no quota.
    r = client.post(f"/admin/auth/group/{interns.pk}/change/", {**bad, "limits-0-daily_token_quota": "0"})
    assert r.status_code == 302
    assert as_alice.get("/api/usage/").json()["dailyTokenQuota"] is None
    run_start(conversation=conversation_create(owner=alice), user=alice, content="hi", model="m", worker="w")


def test_the_usage_api_gives_the_setting_without_groups(make_user, settings):
    settings.AGENT_DAILY_TOKEN_QUOTA = 1234
    alice = make_user("alice")
    client = Client()
    client.force_login(alice)
    assert client.get("/api/usage/").json()["dailyTokenQuota"] == 1234
    group("more", quota=99999, members=[alice])
    group("less", quota=10, members=[alice])
    assert client.get("/api/usage/").json()["dailyTokenQuota"] == 99999
    # Another user's groups are not alice's.
    group("theirs", quota=0, members=[make_user("bob")])
    assert client.get("/api/usage/").json()["dailyTokenQuota"] == 99999


def test_limits_survive_a_days_old_spend(make_user, settings):
    settings.AGENT_DAILY_TOKEN_QUOTA = 0
    alice = make_user("alice")
    group("team", quota=50, members=[alice])
    spend(alice, 60)
    ModelCall.objects.filter(run__user=alice).update(started_at=timezone.now() - timedelta(days=1))
    run, _ = run_start(conversation=conversation_create(owner=alice), user=alice, content="hi", model="m", worker="w")
    assert run.status == "running"
