"""The run inspector's HTML pages (/inspect/): staff only, the run list's filters and sorting,
a real run's page (a retry and a failed tool call, from the real SDK against the fake model),
hostile content escaped, and the dashboard's figures."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from django.utils import timezone
from django.utils.html import escape

from chat.eventlog.append import events_append
from chat.eventlog.types import RunOutcome
from chat.models import Conversation, Event, Feedback, ModelCall, Run, ToolRecord
from chat.runs.starts import run_start
from tests.fakellm import text_reply, tool_call_reply
from tests.inspector.test_trace import failing, run_message, staff_user, with_usage

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]

RUN_LINK = re.compile(r'data-run="([0-9a-f-]{36})"')


def client_for(user=None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def listed(user, query: str = "") -> list[str]:
    response = client_for(user).get("/inspect/" + query)
    assert response.status_code == 200, response.content[:500]
    return RUN_LINK.findall(response.content.decode())


def make_run(user, *, status="succeeded", model="m1", seconds=1.0, tokens=10, ago_hours=1.0, error=""):
    conversation = Conversation.objects.create(owner=user)
    started = timezone.now() - timedelta(hours=ago_hours)
    run = Run.objects.create(
        conversation=conversation,
        user=user,
        status=status,
        model=model,
        started_at=started,
        finished_at=None if status == "running" else started + timedelta(seconds=seconds),
        total_tokens=tokens,
        error=error,
    )
    return str(run.pk)


@pytest.fixture
def staff(make_user):
    return staff_user(make_user, "root")


# --- who may look --------------------------------------------------------------------


def test_every_page_is_a_404_for_anyone_but_active_staff(make_user, staff):
    alice = make_user("alice")
    run_id = make_run(alice)
    pages = ["/inspect/", f"/inspect/runs/{run_id}/", "/inspect/dashboard/"]
    retired = staff_user(make_user, "retired")
    retired.is_active = False
    retired.save(update_fields=["is_active"])
    for user in (None, alice, retired):
        for page in pages:
            assert client_for(user).get(page).status_code == 404, (user, page)
    for page in pages:
        assert client_for(staff).get(page).status_code == 200, page
    assert client_for(staff).get(f"/inspect/runs/{uuid.uuid4()}/").status_code == 404


def test_links_in_the_admin_and_on_the_chat_page_for_staff_only(make_user, staff):
    run_id = make_run(staff)
    staff.is_superuser = True
    staff.save(update_fields=["is_superuser"])
    admin = client_for(staff)
    assert 'href="/inspect/"' in admin.get("/admin/").content.decode()
    assert f'href="/inspect/runs/{run_id}/"' in admin.get(f"/admin/chat/run/{run_id}/change/").content.decode()
    assert 'href="/inspect/"' in admin.get("/").content.decode()
    assert 'href="/inspect/"' not in client_for(make_user("bob")).get("/").content.decode()


# --- the list ------------------------------------------------------------------------------


def test_filters_select_the_right_runs(make_user, staff):
    alice, bob = make_user("alice"), make_user("bob")
    fast = make_run(alice, seconds=0.5, ago_hours=1)
    slow = make_run(alice, seconds=30, model="m2", ago_hours=2)
    failed = make_run(bob, status="failed", error="boom", seconds=2, ago_hours=3)
    old = make_run(bob, seconds=1, ago_hours=24 * 10)
    tool_error = make_run(bob, seconds=1, ago_hours=4)
    ToolRecord.objects.create(run_id=tool_error, tool_call_id="c1", tool_name="bash", is_error=True, outcome="error")
    retried = make_run(alice, seconds=1, ago_hours=5)
    ModelCall.objects.create(run_id=retried, iteration=1, attempt=1, started_at=timezone.now(), error="HTTP 500")
    running = make_run(alice, status="running", ago_hours=0.1)

    assert set(listed(staff, "?user=alice")) == {fast, slow, retried, running}
    assert set(listed(staff, "?status=failed")) == {failed}
    assert set(listed(staff, "?model=m2")) == {slow}
    assert set(listed(staff, "?errors=on")) == {failed, tool_error, retried}
    # A running run counts its time so far: 6 minutes.
    assert set(listed(staff, "?slower_than=10")) == {slow, running}
    since = (timezone.now() - timedelta(days=2)).date().isoformat()
    assert old not in listed(staff, f"?since={since}") and fast in listed(staff, f"?since={since}")
    until = (timezone.now() - timedelta(days=5)).date().isoformat()
    assert listed(staff, f"?until={until}") == [old]
    assert set(listed(staff, "?user=bob&errors=on&status=succeeded")) == {tool_error}
    # One conversation's runs (the chat page's link for staff); a bad id is a form error.
    conversation = Run.objects.get(pk=slow).conversation_id
    assert listed(staff, f"?conversation={conversation}") == [slow]
    assert "Enter a valid UUID." in client_for(staff).get("/inspect/?conversation=nope").content.decode()


async def test_the_run_page_shows_what_the_model_was_sent_when_recorded(
    conversation, registry, llm_settings, make_user, settings
):
    settings.AGENT_TRACE_REQUESTS = True
    llm_settings.script(text_reply("Hi <b>there</b>."))
    live = await run_message(conversation, "Hello <script>x</script>")
    staff = await sync_to_async(staff_user)(make_user)
    page = (await sync_to_async(lambda: client_for(staff).get(f"/inspect/runs/{live[0]['runId']}/"))()).content
    page = page.decode()
    assert "What the model was sent in call 1.1" in page
    assert "Hello &lt;script&gt;x&lt;/script&gt;" in page and "<script>x" not in page


async def test_the_run_page_says_an_answer_was_cut_off_by_the_token_limit(
    conversation, registry, llm_settings, make_user
):
    llm_settings.script({"chunks": [{"delta": {"content": "The sky is blue. It has to"}}, {"finish_reason": "length"}]})
    live = await run_message(conversation, "Why is the sky blue?")
    assert live[-1]["finishReason"] == "length"
    staff = await sync_to_async(staff_user)(make_user)
    page = (await sync_to_async(lambda: client_for(staff).get(f"/inspect/runs/{live[0]['runId']}/"))()).content
    page = page.decode()
    assert "model call 1.1:" in page and ", cut off by the token limit" in page
    assert '<span class="tag">cut off by the token limit</span>' in page


def test_sorting_by_start_duration_and_tokens(make_user, staff):
    alice = make_user("alice")
    a = make_run(alice, seconds=5, tokens=100, ago_hours=3)
    b = make_run(alice, seconds=50, tokens=10, ago_hours=2)
    c = make_run(alice, seconds=0.5, tokens=1000, ago_hours=1)
    assert listed(staff) == [c, b, a]  # newest first by default
    assert listed(staff, "?sort=start") == [a, b, c]
    assert listed(staff, "?sort=-duration") == [b, a, c]
    assert listed(staff, "?sort=duration") == [c, a, b]
    assert listed(staff, "?sort=-tokens") == [c, a, b]
    assert listed(staff, "?sort=tokens") == [b, a, c]


def test_the_list_is_paged_and_keeps_its_filters(make_user, staff):
    alice = make_user("alice")
    ids = [make_run(alice, ago_hours=i / 100) for i in range(55)]
    make_run(make_user("bob"))
    first = listed(staff, "?user=alice")
    second_page = client_for(staff).get("/inspect/?user=alice&page=2").content.decode()
    second = RUN_LINK.findall(second_page)
    assert len(first) == 50 and len(second) == 5 and first + second == ids
    assert "user=alice&amp;page=1" in second_page


def test_bad_filters_are_reported_not_ignored(make_user, staff):
    make_run(make_user("alice"))
    response = client_for(staff).get("/inspect/?slower_than=fast&since=yesterday&sort=nonsense")
    assert response.status_code == 200
    page = response.content.decode()
    assert page.count('class="field-error"') == 3
    assert RUN_LINK.findall(page) == []
    # Values at the edges of what a date or a timedelta can hold: a clear error, not a 500.
    for query in ("?slower_than=1e308", "?until=9999-12-31", "?slower_than=-1", "?page=999&since=0001-01-01"):
        response = client_for(staff).get("/inspect/" + query)
        assert response.status_code == 200, query
        assert ('class="field-error"' in response.content.decode()) == ("page" not in query), query


def test_a_long_run_shows_its_first_events_and_points_to_the_trace(staff, monkeypatch):
    from chat.inspector import views as inspect_views

    monkeypatch.setattr(inspect_views, "EVENTS_SHOWN", 3)
    conversation = Conversation.objects.create(owner=staff)
    run, _ = run_start(conversation=conversation, user=staff, content="hi", model="m", worker="w")
    Event.objects.bulk_create(
        Event(conversation=conversation, run=run, seq=seq, type="text", payload={"type": "text", "content": f"d{seq}"})
        for seq in range(2, 11)
    )
    page = client_for(staff).get(f"/inspect/runs/{run.pk}/").content.decode()
    assert page.count('<pre class="payload" tabindex="0">{') == 3  # the user message, then d2 and d3 folded
    assert "&quot;d3&quot;" in page and "&quot;d4&quot;" not in page
    assert "7 more events" in page and f'href="/api/runs/{run.pk}/trace/"' in page


def test_consecutive_deltas_of_one_kind_are_one_row_with_their_text_and_count(staff):
    conversation = Conversation.objects.create(owner=staff, title="Deltas <em>folded</em>")
    run, _ = run_start(conversation=conversation, user=staff, content="hi", model="m", worker="w")
    kinds = ["thinking"] * 3 + ["text"] * 4 + ["tool_start"] + ["text"] * 2
    payloads = []
    for seq, kind in enumerate(kinds, 2):
        if kind == "tool_start":
            payloads.append({"type": kind, "toolName": "calculator", "toolCallId": "c1", "arguments": "{}"})
        else:
            payloads.append({"type": kind, "content": f"{kind[:2]}{seq} "})
    Event.objects.bulk_create(
        Event(conversation=conversation, run=run, seq=seq, type=payload["type"], payload=payload)
        for seq, payload in enumerate(payloads, 2)
    )
    page = client_for(staff).get(f"/inspect/runs/{run.pk}/").content.decode()
    table = page[page.index('<table class="inspect-table events">') :]
    rows = re.findall(r'<tr( class="folded")?><td class="num">([^<]+)</td><td>[^<]*</td><td>([^<]+)', table)
    assert [(bool(folded), seqs, kind.strip()) for folded, seqs, kind in rows] == [
        (False, "1", "user_message"),
        (True, "2–4", "thinking"),
        (True, "5–8", "text"),
        (False, "9", "tool_start"),
        (True, "10–11", "text"),
    ]
    # Each folded row: the joined text, the count, and every frame when it is opened.
    assert '<span class="joined">th2 th3 th4 </span> <span class="muted">(3 thinking events; show each)' in table
    assert '<span class="joined">te5 te6 te7 te8 </span>' in table and '<span class="tag">×4</span>' in table
    assert table.count('<pre class="payload" tabindex="0">') == 11
    # The conversation by its title (escaped), linked for staff to the admin's page of it.
    link = f'<a class="conversation-link" href="/admin/chat/conversation/{conversation.pk}/change/"'
    assert link in page and "“Deltas &lt;em&gt;folded&lt;/em&gt;”</a>" in page
    assert f'href="/inspect/?conversation={conversation.pk}">its runs</a>' in page


# --- a run ------------------------------------------------------------------------------------


async def test_run_page_shows_model_calls_tool_calls_and_events_of_a_real_run(
    conversation, registry, llm_settings, make_user
):
    llm_settings.script(
        failing(503),
        with_usage(tool_call_reply(("calculator", {"expression": "1/0"})), 20, 5),
        with_usage(text_reply("Undefined."), 30, 4),
    )
    live = await run_message(conversation)
    run_id = live[0]["runId"]
    staff = await sync_to_async(staff_user)(make_user)
    response = await sync_to_async(lambda: client_for(staff).get(f"/inspect/runs/{run_id}/"))()
    assert response.status_code == 200
    page = response.content.decode()

    # The header figures.
    assert 'class="status status-succeeded"' in page and "fake-model" in page
    assert "<dt>Tokens</dt><dd>59 " in page and "<dt>Retries</dt><dd>1</dd>" in page
    # Three model calls, the first failed, the second its retry; each a bar and a row.
    assert page.count('<tr id="model-call-') == 3
    assert '<tr id="model-call-2" class=" row-retry">' in page
    assert 'class="row-error"' in page and "503" in page
    assert page.count('<rect class="k-model') == 3 and page.count('<rect class="k-model-error"') == 1
    # The failed tool call: a red bar linking to its details, arguments pretty-printed in full.
    assert '<a href="#tool-call-1">' in page and '<rect class="k-tool-error"' in page
    assert '<details id="tool-call-1" class="tool-call tool-error"' in page
    assert "{\n  &quot;expression&quot;: &quot;1/0&quot;\n}" in page
    assert "division by zero" in page
    # The replay's data: every event, as a JSON data block (json_script), not as script.
    assert '<script id="replay-events" type="application/json">' in page
    assert '<script type="module" src="/static/inspect/replay.js">' in page
    # Every event, with its ts; a run of deltas of one kind as one row.
    folded = [
        (int(first), int(last), kind)
        for first, last, kind in re.findall(
            r'<tr class="folded"><td class="num">(\d+)–(\d+)</td><td>[^<]*</td><td>(\w+)', page
        )
    ]
    for frame in live:
        row = f'<td class="num">{frame["seq"]}</td><td>{frame["ts"]}</td><td>{frame["type"]}</td>'
        assert row in page or any(a <= frame["seq"] <= b and kind == frame["type"] for a, b, kind in folded)


def test_hostile_content_is_escaped(make_user, staff):
    mallory = make_user("<img src=x onerror=alert(1)>")
    conversation = Conversation.objects.create(owner=mallory)
    run, _ = run_start(
        conversation=conversation, user=mallory, content="<script>alert(2)</script>", model="<b>m</b>", worker="w"
    )
    ToolRecord.objects.create(
        run=run,
        tool_call_id="c1",
        tool_name="<svg onload=alert(3)>",
        arguments='{"html": "<script>alert(4)</script>"}',
        result="<script>alert(5)</script>",
        is_error=True,
        outcome="error",
    )
    client = client_for(staff)
    pages = [
        client.get(f"/inspect/runs/{run.pk}/").content.decode(),
        client.get("/inspect/").content.decode(),
        client.get("/inspect/dashboard/").content.decode(),
    ]
    for page in pages:
        assert "<script>alert" not in page and "<svg onload" not in page and "<img src=x" not in page
        assert "<b>m</b>" not in page
    run_page = pages[0]
    assert "&lt;script&gt;alert(5)&lt;/script&gt;" in run_page
    assert "&lt;svg onload=alert(3)&gt;" in run_page
    assert "&lt;script&gt;alert(4)&lt;/script&gt;" in run_page
    assert "&lt;svg onload=alert(3)&gt;" in pages[2]  # the failing tools chart
    # No inline script or style: the CSP would block them anyway.
    for page in pages:
        assert "<script>" not in page.split("</body>")[0].replace("<script type=", "") and " style=" not in page


@pytest.mark.parametrize(
    "value",
    ["[" * 50_000 + "]" * 50_000, '{"a":' * 50_000 + "1" + "}" * 50_000, "[" * 50_000, '"\\' + "[" * 600],
    ids=["list-50k", "object-50k", "unclosed-50k", "string-then-brackets"],
)
def test_the_run_page_and_the_export_survive_any_stored_value(make_user, staff, value):
    """A row an older import stored (or a fetched page returned) nested 50,000 deep: shown as its
    text, never a RecursionError. Survives the Markdown export too."""
    owner = make_user("deep")
    conversation = Conversation.objects.create(owner=owner)
    run, _ = run_start(conversation=conversation, user=owner, content="hi", model="m", worker="w")
    ToolRecord.objects.create(run=run, tool_call_id="c1", tool_name="calculator", arguments=value, result=value)
    events_append(
        conversation_id=conversation.pk,
        run_id=run.pk,
        payloads=[
            {"type": "tool_start", "toolName": "calculator", "toolCallId": "c1", "arguments": value},
            {"type": "tool_end", "toolName": "calculator", "toolCallId": "c1", "result": value, "isError": False,
             "durationMs": 1},
            {"type": "complete", "status": "succeeded"},
        ],
        outcome=RunOutcome(status="succeeded"),
    )  # fmt: skip
    page = client_for(staff).get(f"/inspect/runs/{run.pk}/")
    assert page.status_code == 200
    assert page.content.decode().count(escape(value[:1000])) >= 2  # arguments and result, as they are
    exported = client_for(owner).get(f"/api/conversations/{conversation.pk}/export/", {"format": "markdown"})
    assert exported.status_code == 200 and value[:1000].encode() in exported.content


# --- the dashboard ---------------------------------------------------------------------------


def test_dashboard_figures(make_user, staff):
    alice, bob = make_user("alice"), make_user("bob")
    ids = [make_run(alice, seconds=s, ago_hours=1) for s in (1, 2, 3, 4)]
    failed = make_run(bob, status="failed", seconds=10, ago_hours=2)
    make_run(bob, status="failed", seconds=99, ago_hours=24 * 3)  # outside the 24 hours
    now = timezone.now()
    for i, run_id in enumerate(ids):
        ModelCall.objects.create(
            run_id=run_id, iteration=1, attempt=1, started_at=now, first_token_ms=100 * (i + 1), total_tokens=10
        )
    ModelCall.objects.create(run_id=failed, iteration=1, attempt=1, started_at=now, total_tokens=500)
    ToolRecord.objects.create(run_id=failed, tool_call_id="a", tool_name="fetch", is_error=True, outcome="error")
    ToolRecord.objects.create(run_id=failed, tool_call_id="b", tool_name="fetch", is_error=False)

    page = client_for(staff).get("/inspect/dashboard/").content.decode()
    assert "<dt>Runs</dt><dd>5</dd>" in page
    assert "20.0% <small>(1 of 5 finished)</small>" in page
    # Nearest rank: p50 of (1, 2, 3, 4, 10) s is 3 s, p95 is 10 s; first tokens 0.1..0.4 s.
    assert "<dd>3.00 s / 10.00 s</dd>" in page
    assert "<dd>0.20 s / 0.40 s</dd>" in page
    assert "<title>bob: 500</title>" in page and "<title>alice: 40</title>" in page
    assert "<title>fetch: 1 of 2</title>" in page
    assert page.count("<title>") >= 5  # the columns of the runs chart too
    week = client_for(staff).get("/inspect/dashboard/?window=7d").content.decode()
    assert "<dt>Runs</dt><dd>6</dd>" in week


def test_staff_see_feedback_in_the_run_list_and_on_the_run_page(make_user, staff):
    alice = make_user("alice")
    liked, disliked, unrated = make_run(alice), make_run(alice), make_run(alice)
    Feedback.objects.create(run_id=liked, user=alice, rating=1)
    Feedback.objects.create(run_id=disliked, user=alice, rating=-1, comment="<script>alert(1)</script> wrong sum")

    assert set(listed(staff, "?feedback=rated")) == {liked, disliked}
    assert listed(staff, "?feedback=up") == [liked]
    assert listed(staff, "?feedback=down") == [disliked]
    assert set(listed(staff)) == {liked, disliked, unrated}
    assert "Select a valid choice." in client_for(staff).get("/inspect/?feedback=meh").content.decode()

    page = client_for(staff).get(f"/inspect/runs/{disliked}/").content.decode()
    assert "rating-down" in page and "&lt;script&gt;alert(1)&lt;/script&gt; wrong sum" in page
    assert "<script>alert(1)" not in page
    assert "rating-up" in client_for(staff).get(f"/inspect/runs/{liked}/").content.decode()
    unrated_page = client_for(staff).get(f"/inspect/runs/{unrated}/").content.decode()
    assert "rating-" not in unrated_page and "rating-comment" not in unrated_page

    trace = client_for(staff).get(f"/api/runs/{disliked}/trace/").json()
    assert trace["run"]["feedback"]["rating"] == -1
    assert trace["run"]["feedback"]["comment"].endswith("wrong sum")
    assert client_for(staff).get(f"/api/runs/{unrated}/trace/").json()["run"]["feedback"] is None


def test_a_run_of_another_door_shows_its_source_and_its_via(staff):
    conversation = Conversation.objects.create(owner=staff, source="mcp")
    run = Run.objects.create(conversation=conversation, user=staff, status="succeeded", model="m")
    Event.objects.create(
        conversation=conversation,
        run=run,
        seq=1,
        type="user_message",
        payload={"type": "user_message", "content": "hi", "via": "mcp"},
    )
    listing = client_for(staff).get("/inspect/").content.decode()
    assert 'class="tag tag-api tag-mcp"' in listing and ">MCP</span>" in listing
    page = client_for(staff).get(f"/inspect/runs/{run.pk}/").content.decode()
    assert "started by an MCP client (<code>/mcp</code>)" in page
    assert "<dt>Door</dt><dd>mcp</dd>" in page
