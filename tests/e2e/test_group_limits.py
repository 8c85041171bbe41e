"""Limits per group through a real daphne (docs/configuration.md, "Limits per group"): staff set
a group's limits in the admin while the server runs, and the group's members' next starts over
HTTP (`POST .../messages/`) and /v1 are refused with 429 at the group's limit, not the setting's;
each change applies to the next message without a restart."""

from __future__ import annotations

import re

import pytest

from .harness import Client, shell
from .test_runs_http import bearer, read_sse

pytestmark = pytest.mark.services

USAGE = {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}


@pytest.fixture(scope="module")
def group_server(databases, make_server):
    # Settings generous enough never to be the limit here: whatever refuses is the group's.
    return make_server(
        databases.new(), name="group-limits", AGENT_MESSAGES_PER_MINUTE="1000", AGENT_DAILY_TOKEN_QUOTA="1000000"
    )


async def post_limits(staff: Client, group_id: str, *, quota: str, rate: str, initial: int) -> None:
    """The admin's group change form, as a browser posts it."""
    path = f"/admin/auth/group/{group_id}/change/"
    page = await staff.http.get(staff.url(path))
    assert page.status_code == 200
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    r = await staff.http.post(
        staff.url(path),
        data={
            "csrfmiddlewaretoken": token,
            "name": "e2e team",
            "limits-TOTAL_FORMS": "1",
            "limits-INITIAL_FORMS": str(initial),
            "limits-MIN_NUM_FORMS": "0",
            "limits-MAX_NUM_FORMS": "1",
            "limits-0-group": group_id,
            "limits-0-daily_token_quota": quota,
            "limits-0-messages_per_minute": rate,
        },
        headers={"Referer": staff.server.base},
    )
    assert r.status_code == 302, r.text[:3000]


async def test_the_groups_limits_set_in_the_admin_refuse_the_next_start(group_server, replies):
    owner = await Client(group_server).signup()
    staff = await Client(group_server).signup()
    group_id = shell(
        group_server,
        "from django.contrib.auth.models import Group, User; "
        f"User.objects.filter(username={staff.username!r}).update(is_staff=True, is_superuser=True); "
        "g = Group.objects.create(name='e2e team'); "
        f"g.user_set.add(User.objects.get(username={owner.username!r})); print(g.pk)",
    )
    http = await bearer(owner)
    conversation = await owner.create_conversation()
    messages = f"/api/conversations/{conversation}/messages/"
    # Each run read to its own end: a stream without `after` ends at the first run's `complete`.
    stream = f"/api/conversations/{conversation}/stream/?until=complete&after="
    for message in ("one", "three"):
        replies.set(
            message,
            {"chunks": [{"delta": {"content": "hi"}}, {"delta": {}, "finish_reason": "stop"}, {"usage": USAGE}]},
        )

    await post_limits(staff, group_id, quota="", rate="1", initial=0)
    started = await http.post(messages, json={"content": "one"})
    assert started.status_code == 202
    await read_sse(http, stream + str(started.json()["seq"]))
    r = await http.post(messages, json={"content": "two"})
    assert (r.status_code, r.json()["error"]["code"]) == (429, "RATE_LIMITED")
    assert "at most 1 messages" in r.json()["error"]["detail"]

    # Lifted in the admin (0: unlimited), with a quota above the 10 tokens spent: the next start goes.
    await post_limits(staff, group_id, quota="100", rate="0", initial=1)
    started = await http.post(messages, json={"content": "three"})
    assert started.status_code == 202
    await read_sse(http, stream + str(started.json()["seq"]))
    usage = (await owner.api("GET", "/api/usage/")).json()
    assert (usage["today"]["totalTokens"], usage["dailyTokenQuota"]) == (20, 100)

    # A quota under what was spent: refused over HTTP and /v1 alike.
    await post_limits(staff, group_id, quota="15", rate="0", initial=1)
    r = await http.post(messages, json={"content": "four"})
    assert (r.status_code, r.json()["error"]["code"]) == (429, "QUOTA_EXCEEDED")
    assert "20 of 15 tokens" in r.json()["error"]["detail"]
    v1 = await http.post(
        "/v1/chat/completions", json={"model": "default", "messages": [{"role": "user", "content": "x"}]}
    )
    assert (v1.status_code, v1.json()["error"]["code"]) == (429, "insufficient_quota")
    # Another user, outside the group, has the settings' limits.
    other = await Client(group_server).signup()
    other_http = await bearer(other)
    other_conversation = await other.create_conversation()
    replies.set("five", {"chunks": [{"delta": {"content": "ok"}}, {"delta": {}, "finish_reason": "stop"}]})
    r = await other_http.post(f"/api/conversations/{other_conversation}/messages/", json={"content": "five"})
    assert r.status_code == 202
    await read_sse(other_http, f"/api/conversations/{other_conversation}/stream/?until=complete")
    for client in (http, other_http, owner, staff, other):
        await client.aclose()
