"""Numbers that tell the truth (issue 22, point 4), from real runs (the real SDK against the fake
model, the real runtime, real sockets): a call denied at approval, or expired, is its own outcome
and never a failure, in the inspector, the dashboard and /metrics, and its wait is drawn in the
waterfall; a stopped run's cut model call is `cancelled` and its (estimated) tokens count in the
run's usage, the user's usage, the daily quota and the cost."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from chat.models import ToolRecord
from tests.asgi_socket import Socket
from tests.fakellm import text_reply, tool_call_reply
from tests.inspector.test_trace import client_for
from tests.ops.test_metrics import scrape, staff_client

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


async def _ask(socket: Socket, content: str, *, answer: str | None) -> list[dict]:
    """A message whose one calculator call waits for approval: denied when `answer` is "deny",
    left to expire when None. The run's frames."""
    await socket.send({"type": "message", "content": content})
    asked = await socket.until(lambda f: f.get("type") == "approval_request")
    if answer is not None:
        await socket.send({"type": "approve", "toolCallId": asked[-1]["toolCallId"], "decision": answer})
    return [f for f in asked + await socket.run_to_end() if "seq" in f]


async def _trace(run_id) -> dict:
    response = await sync_to_async(lambda: staff_client().get(f"/api/runs/{run_id}/trace/"))()
    assert response.status_code == 200
    return response.json()


def _page(path: str):
    response = staff_client().get(path)
    assert response.status_code == 200, response.content[:300]
    return response


async def test_denied_and_expired_calls_are_their_own_outcome_never_a_failure(
    conversation, registry, llm_settings, settings
):
    settings.AGENT_APPROVAL_TOOLS = ["calculator"]
    settings.AGENT_APPROVAL_TIMEOUT = 1.0
    llm_settings.script(
        tool_call_reply(("calculator", {"expression": "1+1"})),
        text_reply("You said no."),
        tool_call_reply(("calculator", {"expression": "2+2"})),
        text_reply("Nobody answered."),
    )
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    denied = await _ask(socket, "one", answer="deny")
    expired = await _ask(socket, "two", answer=None)
    await socket.close()
    await registry.wait_idle()
    assert [f["decision"] for f in denied + expired if f["type"] == "approval_result"] == ["denied", "expired"]
    assert [f["isError"] for f in denied + expired if f["type"] == "tool_end"] == [True, True]  # as the model reads it

    samples = await sync_to_async(scrape)()
    tools = {labels: v for (name, labels), v in samples.items() if name == "agentsite_tool_calls_total"}
    assert tools == {
        (("outcome", "denied"), ("tool", "calculator")): 1,
        (("outcome", "expired"), ("tool", "calculator")): 1,
    }

    runs_page = await sync_to_async(_page)("/inspect/")
    assert [run.tool_errors for run in runs_page.context["page"]] == [0, 0]
    assert (await sync_to_async(_page)("/inspect/?errors=on")).context["page"].paginator.count == 0
    dashboard = await sync_to_async(_page)("/inspect/dashboard/")
    assert dashboard.context["data"]["failing_tools"] == []

    trace = await _trace(expired[0]["runId"])
    assert [(t["outcome"], t["isError"]) for t in trace["toolCalls"]] == [("expired", True)]
    page = (await sync_to_async(_page)(f"/inspect/runs/{expired[0]['runId']}/")).content.decode()
    assert 'class="status status-expired"' in page and 'class="status status-failed"' not in page
    assert '<rect class="k-tool-denied"' in page and '<rect class="k-tool-error"' not in page
    # The wait is a bar of about the timeout, linking to the call's details as the call's own bar does.
    assert page.count('<rect class="k-approval"') == 1 and page.count('<a href="#tool-call-1">') == 2
    assert "waiting for approval of calculator: 1." in page


async def test_a_stopped_runs_cut_call_is_cancelled_and_its_tokens_count(
    conversation, registry, llm_settings, settings
):
    llm_settings.script(text_reply("never finished " * 50, piece=2, delay=0.05), text_reply("later"))
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": "tell me a long story"})
    # The text before the cancel counts too: the first delta may be all that came before it.
    before = await socket.until(lambda f: f["type"] == "text")
    await socket.send({"type": "cancel"})
    frames = [f for f in before + await socket.run_to_end() if "seq" in f]
    await registry.wait_idle()
    assert frames[-1]["status"] == "cancelled"
    streamed = "".join(f["content"] for f in frames if f["type"] == "text")

    trace = await _trace(frames[-1]["runId"])
    (call,) = trace["modelCalls"]
    assert call["error"] == "cancelled" and call["estimated"] is True
    # A token per 4 ASCII characters of what came before the cut, and of the prompt.
    assert call["completionTokens"] >= -(-len(streamed) // 4) > 0
    assert call["promptTokens"] >= -(-len("tell me a long story") // 4)
    total = call["promptTokens"] + call["completionTokens"]
    assert trace["run"]["usage"]["totalTokens"] == total
    assert frames[-1]["usage"]["totalTokens"] == total  # complete says it too

    usage = (await sync_to_async(lambda: client_for(conversation.owner).get("/api/usage/"))()).json()
    assert usage["today"]["totalTokens"] == total
    settings.AGENT_MODEL_PRICES = {trace["run"]["model"]: {"input": 1_000_000, "output": 1_000_000}}
    assert (await _trace(frames[-1]["runId"]))["run"]["cost"] == total

    samples = await sync_to_async(scrape)()
    assert samples[("agentsite_model_calls_total", (("outcome", "cancelled"),))] == 1
    assert samples[("agentsite_model_calls_total", (("outcome", "error"),))] == 0
    page = (await sync_to_async(_page)(f"/inspect/runs/{frames[-1]['runId']}/")).content.decode()
    assert '<rect class="k-model-cancelled"' in page and 'class="row-cancelled"' in page
    assert "partly estimated" in page and "(0 in, 0 out)" not in page

    # Stop is no way around the quota: what the cut call spent is spent.
    settings.AGENT_DAILY_TOKEN_QUOTA = total
    await socket.send({"type": "message", "content": "again"})
    error = await socket.recv()
    assert (error["type"], error["code"]) == ("error", "QUOTA_EXCEEDED")
    await socket.close()


async def test_a_tool_the_model_invented_is_stored_as_not_offered(conversation, registry, llm_settings):
    """The run knows which names it offered: an invented one is kept as the model wrote it (the
    inspector shows it) but is no metric label (chat.ops.metrics.tool_label)."""
    llm_settings.script(
        tool_call_reply(("calculator", {"expression": "1+1"}), ("github__invented", {})), text_reply("done")
    )
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": "go"})
    await socket.run_to_end()
    await socket.close()
    await registry.wait_idle()
    records = await sync_to_async(
        lambda: dict(ToolRecord.objects.filter(run__conversation=conversation).values_list("tool_name", "offered"))
    )()
    assert records == {"calculator": True, "github__invented": False}
