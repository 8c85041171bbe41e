"""Imported runs are history, not activity (issue 22, point 3): through the real HTTP API, an
import never feeds /metrics, the dashboard, usage, quotas or rate limits; the inspector marks
it (list column and filter, run page banner, trace); and metric labels come only from names
the server knows, every other tool name counted as `other`."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client
from django.utils import timezone

from chat.conversations.services import conversation_create, conversation_delete
from chat.models import Conversation, MetricTally, Run, ToolRecord
from chat.ops import metrics
from chat.runs.starts import run_start
from tests.ops.test_metrics import scrape, staff_client

pytestmark = [pytest.mark.django_db, pytest.mark.services]

RUN_LINK = re.compile(r'data-run="([0-9a-f-]{36})"')
MADE_UP_TOOLS = 300


def _document(now: str) -> dict:
    """A file of two runs stamped now: a succeeded one calling 300 made-up tools (each failing),
    and a failed one; both claiming many tokens."""
    events: list[dict] = [{"runId": "r1", "type": "user_message", "content": "call them all"}]
    for n in range(MADE_UP_TOOLS):
        call = {"toolName": f"made_up_{n}", "toolCallId": f"c{n}"}
        events.append({"runId": "r1", "type": "tool_start", **call, "arguments": "{}"})
        events.append({"runId": "r1", "type": "tool_end", **call, "result": "{}", "isError": True, "durationMs": 5})
    usage = {"promptTokens": 900_000, "completionTokens": 100_000, "totalTokens": 1_000_000}
    events.append({"runId": "r1", "type": "complete", "status": "succeeded", "usage": usage})
    events.append({"runId": "r2", "type": "user_message", "content": "and fail"})
    events.append({"runId": "r2", "type": "complete", "status": "failed", "usage": usage})
    for seq, event in enumerate(events, 1):
        event.update(seq=seq, ts=now)
    return {"conversation": {"title": "history"}, "events": events}


@pytest.fixture
def alice(make_user):
    return make_user("alice")


@pytest.fixture
def imported(alice) -> Conversation:
    client = Client()
    client.force_login(alice)
    body = json.dumps(_document(timezone.now().isoformat()))
    response = client.generic("POST", "/api/conversations/import/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    return Conversation.objects.get(pk=response.json()["id"])


def _series(samples: dict, name: str) -> dict:
    return {labels: value for (sample, labels), value in samples.items() if sample == name}


def test_an_import_feeds_no_metric(alice):
    before = scrape()
    client = Client()
    client.force_login(alice)
    body = json.dumps(_document(timezone.now().isoformat()))
    assert (
        client.generic("POST", "/api/conversations/import/", body, content_type="application/json").status_code == 201
    )
    after = scrape()
    assert _series(after, "agentsite_tool_calls_total") == _series(before, "agentsite_tool_calls_total") == {}
    assert _series(after, "agentsite_runs_total") == _series(before, "agentsite_runs_total") == {}
    assert after[("agentsite_tokens_total", (("kind", "prompt"),))] == 0
    assert after[("agentsite_run_duration_seconds_count", ())] == 0
    # Deleting it folds nothing into the tallies either.
    conversation_delete(conversation=Conversation.objects.get(owner=alice))
    assert not MetricTally.objects.exclude(value=0).exists()
    assert _series(scrape(), "agentsite_runs_total") == {}


def test_an_import_is_not_on_the_dashboard(imported):
    page = staff_client().get("/inspect/dashboard/")
    assert page.status_code == 200
    data = page.context["data"]
    assert (data["total"], data["finished"], data["failed"]) == (0, 0, 0)
    assert data["failing_tools"] == [] and data["tokens_by_user"] == []
    assert "made_up_" not in page.content.decode()


def test_an_import_is_not_usage_and_spends_no_quota_nor_rate(imported, alice, settings):
    settings.AGENT_DAILY_TOKEN_QUOTA = 10
    settings.AGENT_MESSAGES_PER_MINUTE = 1  # the file holds two runs started a moment ago
    client = Client()
    client.force_login(alice)
    assert client.get("/api/usage/").json()["today"]["totalTokens"] == 0
    run, _ = run_start(conversation=imported, user=alice, content="live now", model="m", worker="w")
    assert run.status == Run.Status.RUNNING and not run.imported


def test_the_inspector_marks_imported_runs(imported, alice):
    live = conversation_create(owner=alice)
    live_run, _ = run_start(conversation=live, user=alice, content="live", model="m", worker="w")
    imported_ids = {str(pk) for pk in Run.objects.filter(conversation=imported).values_list("pk", flat=True)}
    assert len(imported_ids) == 2
    staff = staff_client()
    page = staff.get("/inspect/").content.decode()
    assert page.count('class="tag tag-imported"') == 2
    assert set(RUN_LINK.findall(staff.get("/inspect/?origin=imported").content.decode())) == imported_ids
    assert RUN_LINK.findall(staff.get("/inspect/?origin=live").content.decode()) == [str(live_run.pk)]
    assert staff.get("/inspect/?origin=elsewhere").status_code == 200  # a bad choice is shown, not a 500
    one = sorted(imported_ids)[0]
    run_page = staff.get(f"/inspect/runs/{one}/")
    assert run_page.status_code == 200 and 'class="banner-imported"' in run_page.content.decode()
    assert 'class="banner-imported"' not in staff.get(f"/inspect/runs/{live_run.pk}/").content.decode()
    assert staff.get(f"/api/runs/{one}/trace/").json()["run"]["imported"] is True
    assert staff.get(f"/api/runs/{live_run.pk}/trace/").json()["run"]["imported"] is False


def test_tool_labels_are_names_the_server_knows(alice, tmp_path, settings):
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"git hub": {"command": "true"}}}))
    settings.AGENT_MCP_CONFIG = str(config)
    conversation = conversation_create(owner=alice)
    run, _ = run_start(conversation=conversation, user=alice, content="x", model="m", worker="w")
    for n, name in enumerate(["calculator", "git_hub__search", "made_up", "also_made_up", "<script>"]):
        ToolRecord.objects.create(run=run, tool_call_id=f"c{n}", tool_name=name)
    # Names the model invented under the server's prefix: its run did not offer them.
    for n in range(3):
        ToolRecord.objects.create(run=run, tool_call_id=f"i{n}", tool_name=f"git_hub__invented{n}", offered=False)
    # A tally written before labels were folded (a deleted conversation's made-up tool).
    MetricTally.objects.create(
        series=metrics.series_key("agentsite_tool_calls_total", {"outcome": "ok", "tool": "junk"}), value=4
    )
    tools = _series(scrape(), "agentsite_tool_calls_total")
    assert tools == {
        (("outcome", "ok"), ("tool", "calculator")): 1,
        (("outcome", "ok"), ("tool", "git_hub__search")): 1,
        (("outcome", "ok"), ("tool", "other")): 10,
    }
