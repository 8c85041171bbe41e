"""/metrics: who may scrape it, and the numbers after a known sequence of real runs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from chat.models import ModelCall, ProcessGauge
from chat.ops import metrics
from tests.fakellm import text_reply, tool_call_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def scrape(client: Client | None = None, **headers) -> dict[tuple[str, tuple], float]:
    """The samples of one scrape, by (name, sorted labels)."""
    response = (client or staff_client()).get("/metrics", **headers)
    assert response.status_code == 200, response.status_code
    assert response["Content-Type"].startswith("text/plain; version=")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def staff_client() -> Client:
    user, _ = get_user_model().objects.get_or_create(username="ops", defaults={"is_staff": True})
    client = Client()
    client.force_login(user)
    return client


def usage(prompt: int, completion: int) -> dict:
    return {"usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}


def with_usage(reply: dict, prompt: int, completion: int) -> dict:
    return {**reply, "chunks": [*reply["chunks"], usage(prompt, completion)]}


async def test_the_series_after_succeeded_failed_tool_error_and_cancelled_runs(
    conversation, registry, llm_settings, settings
):
    from tests.asgi_socket import Socket

    settings.AGENT_MAX_RETRIES = 2
    error = {"status": 500, "body": {"error": {"message": "upstream down"}}}
    llm_settings.script(
        # 1: a tool call that works, then the answer: succeeded.
        with_usage(tool_call_reply(("calculator", {"expression": "2+2"})), 10, 3),
        with_usage(text_reply("Four."), 20, 2),
        # 2: every attempt fails: failed after 1 + 2 retries.
        error,
        error,
        error,
        # 3: a tool call that errors, then the answer: succeeded.
        tool_call_reply(("calculator", {"expression": "2+"})),
        text_reply("That did not parse."),
        # 4: cancelled while the answer streams.
        text_reply("x" * 400, piece=1, delay=0.02),
    )
    # Sockets other tests of this process left open are counted too: compare with the count before.
    sockets = ("agentsite_websocket_connections", ())
    open_before = (await sync_to_async(scrape)())[sockets]
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    statuses = []
    for content in ("one", "two", "three"):
        await socket.send({"type": "message", "content": content})
        statuses.append((await socket.run_to_end())[-1]["status"])
    await socket.send({"type": "message", "content": "four"})
    await socket.until(lambda f: f["type"] == "text")
    during = await sync_to_async(scrape)()
    await socket.send({"type": "cancel"})
    statuses.append((await socket.run_to_end())[-1]["status"])
    assert statuses == ["succeeded", "failed", "succeeded", "cancelled"]
    after = await sync_to_async(scrape)()

    assert during[("agentsite_active_runs", ())] == 1
    assert during[sockets] == open_before + 1
    assert ("agentsite_runs_total", (("status", "running"),)) not in during
    assert after[("agentsite_active_runs", ())] == 0
    assert {labels[0][1]: value for (name, labels), value in after.items() if name == "agentsite_runs_total"} == {
        "succeeded": 2,
        "failed": 1,
        "cancelled": 1,
    }
    assert after[("agentsite_tool_calls_total", (("outcome", "ok"), ("tool", "calculator")))] == 1
    assert after[("agentsite_tool_calls_total", (("outcome", "error"), ("tool", "calculator")))] == 1
    # The reported usage, and the estimate of the call the cancel cut (its tokens were spent).
    cut = await ModelCall.objects.aget(usage_estimated=True)
    assert cut.error == "cancelled" and cut.prompt_tokens > 0 and cut.completion_tokens > 0
    assert after[("agentsite_tokens_total", (("kind", "prompt"),))] == 30 + cut.prompt_tokens
    assert after[("agentsite_tokens_total", (("kind", "completion"),))] == 5 + cut.completion_tokens
    assert after[("agentsite_run_duration_seconds_count", ())] == 4
    # Model call attempts: two each for runs 1 and 3, three failed for run 2, one cut by the cancel
    # (the user's doing, not a failure).
    assert after[("agentsite_model_calls_total", (("outcome", "ok"),))] == 4
    assert after[("agentsite_model_calls_total", (("outcome", "error"),))] == 3
    assert after[("agentsite_model_calls_total", (("outcome", "cancelled"),))] == 1
    # A first token is a text or thinking delta: the two answers and the cancelled stream (the
    # tool-call turns stream none, the failed attempts never got that far).
    assert after[("agentsite_model_first_token_seconds_count", ())] == 3
    assert after[("agentsite_run_duration_seconds_bucket", (("le", "+Inf"),))] == 4
    assert after[("agentsite_run_duration_seconds_sum", ())] > 0
    buckets = [value for (name, _), value in sorted(after.items()) if name == "agentsite_run_duration_seconds_bucket"]
    assert buckets and all(0 <= value <= 4 for value in buckets)
    await socket.close()
    assert (await sync_to_async(scrape)())[sockets] == open_before


def test_the_run_duration_histogram_counts_each_run_in_its_buckets(conversation):
    from chat.models import Run

    now = timezone.now()
    for seconds in (0.2, 3, 3, 45, 900):
        Run.objects.create(
            conversation=conversation,
            user=conversation.owner,
            status="succeeded",
            started_at=now - timedelta(seconds=seconds),
            finished_at=now,
        )
    samples = scrape()
    bucket = {
        labels[0][1]: value
        for (name, labels), value in samples.items()
        if name == "agentsite_run_duration_seconds_bucket"
    }
    assert bucket["0.5"] == 1 and bucket["2.5"] == 1 and bucket["5.0"] == 3 and bucket["60.0"] == 4
    assert bucket["600.0"] == 4 and bucket["+Inf"] == 5
    assert samples[("agentsite_run_duration_seconds_sum", ())] == pytest.approx(951.2)


def _finished_run(conversation, *, status: str, seconds: float, tokens: tuple[int, int], tools=()):
    from chat.models import Run, ToolRecord

    now = timezone.now()
    run = Run.objects.create(
        conversation=conversation,
        user=conversation.owner,
        status=status,
        started_at=now - timedelta(seconds=seconds),
        finished_at=now,
        prompt_tokens=tokens[0],
        completion_tokens=tokens[1],
    )
    for n, (tool, is_error) in enumerate(tools):
        ToolRecord.objects.create(
            run=run, tool_call_id=f"c{n}", tool_name=tool, is_error=is_error, outcome="error" if is_error else "ok"
        )
    return run


def _growing(samples: dict) -> dict:
    """The counter and histogram samples: what must never go down."""
    return {key: value for key, value in samples.items() if key[0].endswith(("_total", "_bucket", "_count", "_sum"))}


def test_deleting_conversations_and_users_never_lowers_a_counter(make_user):
    from chat.conversations.services import conversation_create, conversation_delete

    alice, bob = make_user("alice"), make_user("bob")
    kept = conversation_create(owner=alice)
    gone = conversation_create(owner=alice)
    bobs = conversation_create(owner=bob)
    _finished_run(kept, status="succeeded", seconds=1, tokens=(5, 1), tools=[("calculator", False)])
    _finished_run(gone, status="failed", seconds=30, tokens=(7, 2), tools=[("read_file", True)])
    _finished_run(bobs, status="succeeded", seconds=3, tokens=(11, 3), tools=[("calculator", True)])
    before = _growing(scrape())
    assert before[("agentsite_tool_calls_total", (("outcome", "error"), ("tool", "read_file")))] == 1

    conversation_delete(conversation=gone)
    assert _growing(scrape()) == before
    bob.delete()  # cascades to his conversations without the delete service
    assert _growing(scrape()) == before

    # New runs still count on top of what the deleted ones had counted.
    _finished_run(kept, status="failed", seconds=2, tokens=(1, 1), tools=[("read_file", True)])
    after = _growing(scrape())
    assert after[("agentsite_runs_total", (("status", "failed"),))] == 2
    assert after[("agentsite_tool_calls_total", (("outcome", "error"), ("tool", "read_file")))] == 2
    assert after[("agentsite_tokens_total", (("kind", "prompt"),))] == 24
    assert after[("agentsite_run_duration_seconds_count", ())] == 4


def test_websocket_connections_sum_the_fresh_rows_of_the_other_processes(settings):
    settings.AGENT_HEARTBEAT_TIMEOUT = 20
    now = timezone.now()
    ProcessGauge.objects.create(process="host-a:1:aa", websocket_connections=3, updated_at=now)
    ProcessGauge.objects.create(process="host-b:2:bb", websocket_connections=4, updated_at=now)
    # A process that stopped heartbeating (it died): its sockets are gone with it.
    ProcessGauge.objects.create(process="host-c:3:cc", websocket_connections=50, updated_at=now - timedelta(seconds=60))
    # This process's own row is stale by nature; its live count is used instead.
    ProcessGauge.objects.create(process=metrics.PROCESS_ID, websocket_connections=9, updated_at=now)
    assert scrape()[("agentsite_websocket_connections", ())] == 7 + metrics.local_websockets()


def test_a_process_publishes_its_own_row_and_drops_long_dead_ones(settings):
    settings.AGENT_HEARTBEAT_TIMEOUT = 20
    ProcessGauge.objects.create(
        process="gone:1:aa", websocket_connections=2, updated_at=timezone.now() - timedelta(seconds=300)
    )
    ProcessGauge.objects.create(
        process="slow:1:bb", websocket_connections=2, updated_at=timezone.now() - timedelta(seconds=30)
    )
    metrics.publish_process_gauges()
    rows = dict(ProcessGauge.objects.values_list("process", "websocket_connections"))
    assert rows == {metrics.PROCESS_ID: metrics.local_websockets(), "slow:1:bb": 2}


# --- access -------------------------------------------------------------------------------


def test_staff_sessions_may_scrape_and_other_users_get_404(make_user):
    assert Client().get("/metrics").status_code == 404
    user = make_user("bob")
    client = Client()
    client.force_login(user)
    assert client.get("/metrics").status_code == 404
    user.is_staff = True
    user.save()
    assert client.get("/metrics").status_code == 200
    assert Client().post("/metrics").status_code in (403, 405)


def test_a_bearer_token_may_scrape_only_when_it_is_the_configured_one(settings):
    anonymous = Client()
    settings.METRICS_TOKEN = None
    assert anonymous.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 404
    assert anonymous.get("/metrics", HTTP_AUTHORIZATION="Bearer None").status_code == 404
    settings.METRICS_TOKEN = "s3cret-scrape-token"
    assert anonymous.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 404
    assert anonymous.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-scrape-tokenX").status_code == 404
    assert anonymous.get("/metrics", HTTP_AUTHORIZATION="Basic s3cret-scrape-token").status_code == 404
    assert anonymous.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 404
    assert ("agentsite_active_runs", ()) in scrape(anonymous, HTTP_AUTHORIZATION="Bearer s3cret-scrape-token")
