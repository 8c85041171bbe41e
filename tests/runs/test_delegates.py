"""Sub-agents (docs/protocol.md, "Sub-agents"): a run of a profile with delegates is offered a tool
`agent__<slug>` per delegate its user may use; a call starts a child run of the delegate's profile,
whose events carry parentRunId and parentToolCallId and lie between the call's tool_start and
tool_end, and whose answer is the call's result."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from chat.accounts.tokens import token_create
from chat.agent.approval import APPROVED, Decision
from chat.conversations.services import conversation_create
from chat.eventlog.append import events_append
from chat.eventlog.children import child_run_start
from chat.eventlog.reads import events_for_export, sync_state
from chat.eventlog.types import RunOutcome
from chat.models import AgentProfile, Conversation, Event, Run
from chat.runs import engine
from chat.runs.client_frames import ProtocolError
from chat.runs.queue import Queued, Steered
from chat.runs.requests import ApproveRun, CancelRun, StartRun
from chat.runs.starts import run_start
from chat.sharing.snapshot import branch_frames
from tests.asgi_http import RawStream
from tests.doors.sse.test_streams import answer_of
from tests.fakellm import text_reply, tool_call_reply
from tests.http_body import response_body
from tests.ops.test_metrics import staff_client
from tests.runs.test_queue import events_of, settle

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def with_usage(reply: dict, prompt: int, completion: int) -> dict:
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    return {**reply, "chunks": [*reply["chunks"], {"usage": usage}]}


@sync_to_async
def setup(make_user, **delegates_of: list[str]) -> Any:
    """Profiles open to everyone, `name: [its delegates]`, model `<name>-model`; a conversation of
    alice's with the first."""
    profiles = {}
    for name in delegates_of:
        profiles[name] = AgentProfile.objects.create(
            slug=name, name=name.title(), model=f"{name}-model", everyone=True, description=f"the {name}", tools=[]
        )
    for name, delegates in delegates_of.items():
        profiles[name].delegates.set([profiles[d] for d in delegates])
    conversation = conversation_create(owner=make_user("alice"), title="t")
    conversation.agent = profiles[next(iter(delegates_of))]
    conversation.save()
    return conversation


def last(body: dict) -> dict:
    return body["messages"][-1]


def tools_of(body: dict) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


async def test_a_child_run_answers_its_parent_s_call(make_user, registry, llm_settings):
    conversation = await setup(make_user, boss=["helper"], helper=[])
    seen: dict[str, list] = {}

    def respond(body):
        seen.setdefault(body["model"], []).append(body)
        if body["model"] == "helper-model":
            return with_usage(text_reply("helped with " + last(body)["content"]), 3, 4)
        if last(body)["role"] == "user":
            return with_usage(tool_call_reply(("agent__helper", {"task": "count to 3"})), 10, 1)
        return with_usage(text_reply("boss done"), 20, 2)

    llm_settings.responder = respond
    run, _ = await engine.send(StartRun(conversation, conversation.owner, "delegate it"))
    await settle(registry, conversation, 2)

    # The offer: the delegate's tool, its description, its one parameter.
    (offer,) = [t for t in seen["boss-model"][0]["tools"] if t["function"]["name"] == "agent__helper"]
    assert offer["function"]["description"] == "the helper"
    assert offer["function"]["parameters"]["required"] == ["task"]
    # The child's memory: its system prompt and the task, nothing else.
    child_request = seen["helper-model"][0]["messages"]
    assert [m["role"] for m in child_request if m["role"] != "system"] == ["user"]
    assert child_request[-1]["content"] == "count to 3"
    assert "delegate it" not in json.dumps(child_request)

    events = await events_of(conversation)
    child = await Run.objects.aget(parent_id=run.pk)
    assert (child.depth, child.parent_tool_call_id, child.status) == (1, "call_0", "succeeded")
    parent_events = [e for e in events if e["runId"] == run.pk]
    child_events = [e for e in events if e["runId"] == child.pk]
    assert all(e["parentRunId"] == str(run.pk) and e["parentToolCallId"] == "call_0" for e in child_events)
    assert not any("parentRunId" in e for e in parent_events)
    first = child_events[0]
    assert first["type"] == "user_message" and first["content"] == "count to 3"
    assert (first["agent"], first["agentName"], first["model"]) == ("helper", "Helper", "helper-model")
    assert "parentSeq" not in first
    assert child_events[-1]["type"] == "complete"
    start = next(e for e in parent_events if e["type"] == "tool_start")
    end = next(e for e in parent_events if e["type"] == "tool_end")
    assert start["seq"] < first["seq"] and child_events[-1]["seq"] < end["seq"]
    assert end["result"] == "helped with count to 3" and end["isError"] is False
    # Usage: the child's own; the parent's, its own and its child's.
    assert child_events[-1]["usage"]["totalTokens"] == 7
    assert parent_events[-1]["usage"] == {"promptTokens": 33, "completionTokens": 7, "totalTokens": 40}
    # The parent's model saw the child only as the tool result.
    second = seen["boss-model"][1]["messages"]
    assert second[-1] == {"role": "tool", "tool_call_id": "call_0", "content": "helped with count to 3"}

    # A later turn: no event of the child run in the memory; parentSeq follows the top-level turn.
    seen.clear()
    await engine.send(StartRun(conversation, conversation.owner, "again"))
    await settle(registry, conversation, 4)
    memory = json.dumps(seen["boss-model"][0]["messages"])
    assert "count to 3" in memory  # the parent's call arguments
    assert "helper-model" not in memory and memory.count("helped with count to 3") == 1
    starts = [e for e in await events_of(conversation) if e["type"] == "user_message" and "parentRunId" not in e]
    assert starts[1]["parentSeq"] == starts[0]["seq"]
    # A shared snapshot of the branch keeps the child run with its parent; only turns are renumbered.
    frames = await sync_to_async(events_for_export)(conversation_id=conversation.pk)
    shared = branch_frames(frames, leaf_seq=starts[1]["seq"])
    assert len(shared) == len(frames)
    heads = [f for f in shared if f["type"] == "user_message"]
    assert [("parentSeq" in f, "parentRunId" in f) for f in heads] == [(True, False), (False, True)] * 2
    assert heads[2]["parentSeq"] == heads[0]["seq"]

    # The inspector: the parent's trace names its child, the child's its parent.
    parent_trace = (await sync_to_async(lambda: staff_client().get(f"/api/runs/{run.pk}/trace/"))()).json()
    assert (parent_trace["run"]["parentRunId"], parent_trace["run"]["depth"]) == (None, 0)
    (listed_child,) = parent_trace["children"]
    assert listed_child["id"] == str(child.pk) and listed_child["agent"] == "helper"
    assert (listed_child["status"], listed_child["parentToolCallId"]) == ("succeeded", "call_0")
    assert listed_child["usage"]["totalTokens"] == 7 and listed_child["durationMs"] is not None
    child_trace = (await sync_to_async(lambda: staff_client().get(f"/api/runs/{child.pk}/trace/"))()).json()
    assert child_trace["run"]["parentRunId"] == str(run.pk)
    assert (child_trace["run"]["parentToolCallId"], child_trace["run"]["depth"]) == ("call_0", 1)
    # The run pages: the parent's delegate call links its child, the child names its parent.
    parent_page = (await sync_to_async(lambda: staff_client().get(f"/inspect/runs/{run.pk}/"))()).content.decode()
    assert f"/inspect/runs/{child.pk}/" in parent_page and "Child run" in parent_page
    # The run tree: the child's model call a bar of the parent's waterfall (leading to its call),
    # its own waterfall and model calls under the call, its events in the replay.
    assert "helper › model 1.1" in parent_page
    assert "model and tool calls of the child run" in parent_page
    assert parent_page.count('class="child-run-tree"') == 1
    replay = json.loads(
        parent_page.split('<script id="replay-events" type="application/json">')[1].split("</script>")[0]
    )
    assert {e["runId"] for e in replay} == {str(run.pk), str(child.pk)}
    assert [e["seq"] for e in replay] == sorted(e["seq"] for e in replay)
    child_page = (await sync_to_async(lambda: staff_client().get(f"/inspect/runs/{child.pk}/"))()).content.decode()
    assert f"/inspect/runs/{run.pk}/" in child_page and "A child run (depth 1)" in child_page
    # Its run list: top-level runs only.
    page = (await sync_to_async(lambda: staff_client().get("/inspect/"))()).content.decode()
    assert str(run.pk) in page and str(child.pk) not in page


async def test_children_run_in_parallel_and_failures_are_tool_errors(make_user, registry, llm_settings):
    conversation = await setup(make_user, boss=["fast", "broken"], fast=[], broken=[])
    llm_settings.reset()

    def respond(body):
        if body["model"] == "fast-model":
            return text_reply("fast answer", delay=0.05)
        if body["model"] == "broken-model":
            return {"status": 400, "body": {"error": {"message": "bad model", "type": "invalid_request_error"}}}
        if last(body)["role"] == "user":
            return tool_call_reply(("agent__fast", {"task": "a"}), ("agent__broken", {"task": "b"}))
        return text_reply("done")

    llm_settings.responder = respond
    run, _ = await engine.send(StartRun(conversation, conversation.owner, "both"))
    await settle(registry, conversation, 3)
    events = await events_of(conversation)
    ends = {e["toolCallId"]: e for e in events if e["type"] == "tool_end" and e["runId"] == run.pk}
    assert ends["call_0"]["result"] == "fast answer" and not ends["call_0"]["isError"]
    assert ends["call_1"]["isError"]
    error = json.loads(ends["call_1"]["result"])["error"]
    assert error.startswith("agent broken failed: ") and list(json.loads(ends["call_1"]["result"])) == ["error"]
    # Both children started before either ended.
    firsts = [e["seq"] for e in events if e["type"] == "user_message" and "parentRunId" in e]
    completes = [e["seq"] for e in events if e["type"] == "complete" and "parentRunId" in e]
    assert len(firsts) == 2 and max(firsts) < min(completes)
    assert events[-1]["type"] == "complete" and events[-1]["status"] == "succeeded"
    await sync_to_async(export_and_import)(conversation)


def export_and_import(conversation) -> None:
    """An import keeps child runs' events, parentRunId mapped to the new run ids."""
    client = Client()
    client.force_login(conversation.owner)
    exported = json.loads(response_body(client.get(f"/api/conversations/{conversation.pk}/export/")))
    response = client.generic(
        "POST", "/api/conversations/import/", json.dumps(exported).encode(), content_type="application/json"
    )
    assert response.status_code == 201, response.content
    copy = Conversation.objects.get(pk=response.json()["id"])
    # The Markdown transcript: one turn; a child run shows as its parent's call and result.
    markdown = response_body(client.get(f"/api/conversations/{conversation.pk}/export/?format=markdown")).decode()
    assert markdown.count("## You") == 1 and "fast answer" in markdown
    copies = json.loads(response_body(client.get(f"/api/conversations/{copy.pk}/export/")))["events"]
    new_id = {old["runId"]: new["runId"] for old, new in zip(exported["events"], copies, strict=True)}
    for old, new in zip(exported["events"], copies, strict=True):
        assert {**old, "runId": None, "ts": None} | (
            {"parentRunId": new_id[old["parentRunId"]]} if "parentRunId" in old else {}
        ) == {**new, "runId": None, "ts": None}
    runs = {str(r.pk): r for r in Run.objects.filter(conversation=copy)}
    children = [r for r in runs.values() if r.parent_id is not None]
    assert len(children) == 2 and all(r.depth == 1 and r.imported for r in children)
    assert {r.parent_tool_call_id for r in children} == {"call_0", "call_1"}


async def test_bad_calls_start_no_run(make_user, registry, llm_settings, settings):
    settings.AGENT_MAX_MESSAGE_CHARS = 50
    conversation = await setup(make_user, boss=["helper"], helper=[], other=[])
    llm_settings.reset()
    llm_settings.script(
        tool_call_reply(
            ("agent__helper", {}),
            ("agent__helper", {"task": 3}),
            ("agent__helper", {"task": "  "}),
            ("agent__helper", {"task": "x" * 51}),
            ("agent__other", {"task": "not offered"}),
        ),
        text_reply("ok"),
    )
    run, _ = await engine.send(StartRun(conversation, conversation.owner, "bad"))
    await settle(registry, conversation, 1)
    events = await events_of(conversation)
    ends = [e for e in events if e["type"] == "tool_end"]
    assert len(ends) == 5 and all(e["isError"] for e in ends)
    assert await Run.objects.acount() == 1


async def test_the_depth_limit_offers_no_delegate(make_user, registry, llm_settings, settings):
    settings.AGENT_MAX_DELEGATION_DEPTH = 1
    conversation = await setup(make_user, boss=["helper"], helper=["boss"])
    llm_settings.reset()
    seen = []

    def respond(body):
        seen.append(body)
        if body["model"] == "helper-model":
            return text_reply("leaf")
        if last(body)["role"] == "user":
            return tool_call_reply(("agent__helper", {"task": "go"}))
        return text_reply("done")

    llm_settings.responder = respond
    await engine.send(StartRun(conversation, conversation.owner, "deep"))
    await settle(registry, conversation, 2)
    assert "agent__helper" in tools_of(seen[0])
    (helper,) = [b for b in seen if b["model"] == "helper-model"]
    assert not any(name.startswith("agent__") for name in tools_of(helper))

    settings.AGENT_MAX_DELEGATION_DEPTH = 0
    seen.clear()
    await engine.send(StartRun(conversation, conversation.owner, "off"))
    await settle(registry, conversation, 3)
    assert not any(name.startswith("agent__") for name in tools_of(seen[0]))


async def test_cancel_stops_the_children_first(make_user, registry, llm_settings):
    conversation = await setup(make_user, boss=["middle"], middle=["leaf"], leaf=[])
    llm_settings.reset()

    def respond(body):
        if body["model"] == "leaf-model":
            return text_reply("slow " * 200, piece=1, delay=0.02)
        name = "agent__middle" if body["model"] == "boss-model" else "agent__leaf"
        return tool_call_reply((name, {"task": "go"}))

    llm_settings.responder = respond
    run, _ = await engine.send(StartRun(conversation, conversation.owner, "deep"))
    async with asyncio.timeout(10):
        while not await Run.objects.filter(depth=2).aexists():
            await asyncio.sleep(0.02)
    await asyncio.sleep(0.2)
    assert await engine.cancel(CancelRun(conversation.pk))
    await settle(registry, conversation, 3)
    events = await events_of(conversation)
    middle = await Run.objects.aget(depth=1)
    leaf = await Run.objects.aget(depth=2)
    statuses = {r.depth: r.status async for r in Run.objects.all()}
    assert statuses == {0: "cancelled", 1: "cancelled", 2: "cancelled"}

    def seq(run_id, kind, **match):
        return next(
            e["seq"]
            for e in events
            if e["runId"] == run_id and e["type"] == kind and all(e.get(k) == v for k, v in match.items())
        )

    assert seq(leaf.pk, "complete") < seq(middle.pk, "tool_end") < seq(middle.pk, "complete")
    assert seq(middle.pk, "complete") < seq(run.pk, "tool_end") < seq(run.pk, "complete")
    assert [e["runId"] for e in events if e["type"] == "complete"] == [leaf.pk, middle.pk, run.pk]


async def test_while_a_child_waits_the_conversation_s_run_is_the_top_level_one(make_user, registry, llm_settings):
    """A child's approval request is answered as any (its runId); sync names the top-level run;
    a message meanwhile is RUN_IN_PROGRESS; a child's task is no turn to edit, regenerate or follow."""
    conversation = await setup(make_user, boss=["careful"], careful=[])
    await AgentProfile.objects.filter(slug="careful").aupdate(tools=["calculator"], approval_tools="calculator")
    llm_settings.reset()

    def respond(body):
        if body["model"] == "careful-model":
            if last(body)["role"] == "user":
                return tool_call_reply(("calculator", {"expression": "6*7"}))
            return text_reply("it is " + last(body)["content"])
        if last(body)["role"] == "user":
            return tool_call_reply(("agent__careful", {"task": "compute 6*7"}))
        return text_reply("boss: " + last(body)["content"])

    llm_settings.responder = respond
    run, _ = await engine.send(StartRun(conversation, conversation.owner, "go"))
    async with asyncio.timeout(10):
        while not await Event.objects.filter(type="approval_request").aexists():
            await asyncio.sleep(0.02)
    request = await Event.objects.aget(type="approval_request")
    child = await Run.objects.aget(parent_id=run.pk)
    assert request.run_id == child.pk and request.payload["parentRunId"] == str(run.pk)

    running, pending, _, _ = await sync_to_async(sync_state)(conversation_id=conversation.pk)
    assert running.pk == run.pk and pending == ["call_0"]
    with pytest.raises(ProtocolError) as refused:
        await engine.send(StartRun(conversation, conversation.owner, "meanwhile"))
    assert refused.value.code == "RUN_IN_PROGRESS"

    await engine.approve(ApproveRun(conversation.pk, "call_0", Decision(APPROVED)))
    await settle(registry, conversation, 2)
    events = await events_of(conversation)
    assert events[-1]["type"] == "complete" and events[-1]["runId"] == run.pk
    assert events[-1]["status"] == "succeeded"
    end = next(e for e in events if e["type"] == "tool_end" and e["runId"] == run.pk)
    assert end["result"] == "it is 42"

    task = next(e for e in events if e["type"] == "user_message" and "parentRunId" in e)
    for wrong in (
        StartRun(conversation, conversation.owner, "x", edits=task["seq"]),
        StartRun(conversation, conversation.owner, "", regenerates=task["seq"]),
        StartRun(conversation, conversation.owner, "x", parent_seq=task["seq"]),
    ):
        with pytest.raises(ProtocolError) as refused:
            await engine.send(wrong)
        assert refused.value.code == "BAD_REQUEST"


async def test_an_openai_compatible_call_answers_with_the_top_level_run(make_user, registry, llm_settings):
    """/v1/chat/completions: the answer and usage are the top-level run's (its usage the whole
    tree's); a child's text and complete neither enter the answer nor end the stream."""
    await setup(make_user, boss=["helper"], helper=[])
    # Nobody watches an API call's run, nor its children: an approval is denied at once.
    await AgentProfile.objects.filter(slug="helper").aupdate(tools=["calculator"], approval_tools="calculator")
    user = await sync_to_async(lambda: User.objects.get(username="alice"))()
    _, value = await sync_to_async(token_create)(user=user, name="script")
    llm_settings.reset()

    def respond(body):
        if body["model"] == "helper-model":
            if last(body)["role"] == "user":
                return with_usage(tool_call_reply(("calculator", {"expression": "1+1"})), 0, 0)
            return with_usage(text_reply("CHILD TEXT"), 1, 2)
        if last(body)["role"] == "user":
            return with_usage(tool_call_reply(("agent__helper", {"task": "t"})), 3, 4)
        return with_usage(text_reply("final answer"), 5, 6)

    llm_settings.responder = respond
    body = {
        "model": "boss",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "go"}],
    }
    stream = RawStream("/v1/chat/completions", [(b"authorization", f"Bearer {value}".encode())], body=body)
    assert (await stream.open())["status"] == 200
    raw = await stream.rest()
    await stream.close()
    assert answer_of(raw) == "final answer"
    denied = await Event.objects.filter(type="approval_result").values_list("payload", flat=True).afirst()
    assert denied["decision"] == "denied" and "parentRunId" in denied
    usage = [orjson.loads(line[6:])["usage"] for line in raw.split(b"\n\n") if b'"usage":{' in line]
    assert usage[-1]["total_tokens"] == 21


def _dead_family(conversation) -> tuple[Run, Run]:
    """A top-level run and its child run, both of a process that died mid-call."""
    parent, _ = run_start(
        conversation=conversation, user=conversation.owner, content="go", model="m", worker="runs.dead!x"
    )
    events_append(
        conversation_id=conversation.pk,
        run_id=parent.pk,
        payloads=[
            {"type": "tool_start", "toolName": "agent__helper", "toolCallId": "c1", "arguments": '{"task": "t"}'}
        ],
    )
    helper = AgentProfile.objects.get(slug="helper")
    child, _ = child_run_start(parent_id=parent.pk, tool_call_id="c1", profile=helper, task="t", worker="runs.dead!x")
    events_append(
        conversation_id=conversation.pk,
        run_id=child.pk,
        payloads=[{"type": "text", "content": "half", "parentRunId": str(parent.pk), "parentToolCallId": "c1"}],
    )
    old = timezone.now() - timedelta(seconds=60)
    Run.objects.filter(pk__in=[parent.pk, child.pk]).update(heartbeat_at=old)
    return parent, child


async def test_a_dead_process_s_run_and_its_child_are_taken_over_together(make_user, registry, llm_settings, settings):
    settings.AGENT_HEARTBEAT_TIMEOUT = 20
    conversation = await setup(make_user, boss=["helper"], helper=[])
    parent, child = await sync_to_async(_dead_family)(conversation)
    llm_settings.reset()
    seen = []

    def respond(body):
        seen.append(body)
        if body["model"] == "helper-model":
            return text_reply("child answer", delay=0.05)
        return text_reply("boss: " + last(body)["content"])

    llm_settings.responder = respond
    assert await registry.reap_once() == 2
    await settle(registry, conversation, 2)
    events = await events_of(conversation)
    of_parent = [e for e in events if e["runId"] == parent.pk]
    of_child = [e for e in events if e["runId"] == child.pk]
    assert [e["type"] for e in of_child if e["type"] != "text"] == ["user_message", "error", "complete"]
    assert of_child[-1]["status"] == "succeeded" and all(e["parentRunId"] == str(parent.pk) for e in of_child)
    ends = [e for e in of_parent if e["type"] == "tool_end"]
    assert len(ends) == 1 and ends[0]["result"] == "child answer" and not ends[0]["isError"]
    assert of_child[-1]["seq"] < ends[0]["seq"]
    assert of_parent[-1]["status"] == "succeeded"
    assert "".join(e["content"] for e in of_parent if e["type"] == "text") == "boss: child answer"
    (boss_request,) = [b for b in seen if b["model"] == "boss-model"]
    assert boss_request["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "child answer"}
    stored = {r.pk: (r.status, r.resumes) async for r in Run.objects.all()}
    assert stored == {parent.pk: ("succeeded", 1), child.pk: ("succeeded", 1)}


async def test_past_its_resumes_a_family_is_closed(make_user, registry, llm_settings, settings):
    settings.AGENT_HEARTBEAT_TIMEOUT = 20
    settings.AGENT_MAX_RESUMES = 0
    conversation = await setup(make_user, boss=["helper"], helper=[])
    parent, child = await sync_to_async(_dead_family)(conversation)
    await registry.reap_once()
    await settle(registry, conversation, 2)
    events = await events_of(conversation)
    completes = [(e["runId"], e["status"]) for e in events if e["type"] == "complete"]
    assert completes == [(child.pk, "interrupted"), (parent.pk, "interrupted")]
    (end,) = [e for e in events if e["type"] == "tool_end"]
    assert end["runId"] == parent.pk and end["isError"]


async def test_a_call_whose_child_had_ended_closes_with_its_stored_outcome(make_user, registry, llm_settings, settings):
    """The parent's process died after its child's `complete` and before the call's tool_end:
    the take-over ends the call with the child's answer, not an interruption."""
    settings.AGENT_HEARTBEAT_TIMEOUT = 20
    conversation = await setup(make_user, boss=["helper"], helper=[])
    parent, child = await sync_to_async(_dead_family)(conversation)
    lineage = {"parentRunId": str(parent.pk), "parentToolCallId": "c1"}
    await sync_to_async(events_append)(
        conversation_id=conversation.pk,
        run_id=child.pk,
        payloads=[
            {"type": "text", "content": " done", **lineage},
            {"type": "complete", "status": "succeeded", **lineage},
        ],
        outcome=RunOutcome(status="succeeded"),
    )
    llm_settings.reset()
    seen = []

    def respond(body):
        seen.append(body)
        return text_reply("boss: " + last(body)["content"])

    llm_settings.responder = respond
    assert await registry.reap_once() == 1
    await settle(registry, conversation, 1)
    events = await events_of(conversation)
    (end,) = [e for e in events if e["type"] == "tool_end"]
    assert (end["runId"], end["result"], end["isError"]) == (parent.pk, "half done", False)
    assert [b["messages"][-1] for b in seen] == [{"role": "tool", "tool_call_id": "c1", "content": "half done"}]
    assert events[-1]["type"] == "complete" and events[-1]["status"] == "succeeded"


async def test_queue_and_steer_while_a_child_works_concern_the_top_level_run(make_user, registry, llm_settings):
    conversation = await setup(make_user, boss=["helper"], helper=[])
    llm_settings.reset()
    seen = []

    def respond(body):
        seen.append(body)
        if body["model"] == "helper-model":
            return text_reply("slow " * 20, piece=1, delay=0.02)
        if last(body)["role"] == "user" and last(body)["content"] == "go":
            return tool_call_reply(("agent__helper", {"task": "t"}))
        return text_reply("done")

    llm_settings.responder = respond
    run, _ = await engine.send(StartRun(conversation, conversation.owner, "go"))
    async with asyncio.timeout(10):
        while not await Run.objects.filter(parent_id=run.pk).aexists():
            await asyncio.sleep(0.02)
    steered = await engine.send(StartRun(conversation, conversation.owner, "steer it", while_running="steer"))
    queued = await engine.send(StartRun(conversation, conversation.owner, "later", while_running="queue"))
    assert isinstance(steered, Steered) and steered.run_id == str(run.pk)
    assert isinstance(queued, Queued)
    await settle(registry, conversation, 3)
    events = await events_of(conversation)
    applied = next(e for e in events if e["type"] == "steer_applied")
    end = next(e for e in events if e["type"] == "tool_end" and e["runId"] == run.pk)
    assert applied["runId"] == run.pk and end["seq"] < applied["seq"]
    completes = [e for e in events if e["type"] == "complete" and "parentRunId" not in e]
    later = next(e for e in events if e["type"] == "user_message" and e.get("queueId") == queued.queue_id)
    assert later["seq"] == completes[0]["seq"] + 1  # after the top-level run's complete, not the child's
    # The helper's request never held the steer.
    assert all("steer it" not in json.dumps(b["messages"]) for b in seen if b["model"] == "helper-model")


async def test_no_tool_timeout_and_only_delegates_the_user_may_use(make_user, registry, llm_settings, settings):
    """AGENT_TOOL_TIMEOUT bounds no child run; a delegate whose audience narrowed since it was
    saved is offered no more."""
    settings.AGENT_TOOL_TIMEOUT = 0.2
    conversation = await setup(make_user, boss=["slow", "gone"], slow=[], gone=[])
    await AgentProfile.objects.filter(slug="gone").aupdate(everyone=False)
    llm_settings.reset()
    seen = []

    def respond(body):
        seen.append(body)
        if body["model"] == "slow-model":
            return text_reply("slow but sure", delay=0.1)  # about 0.5 s in all
        if last(body)["role"] == "user":
            return tool_call_reply(("agent__slow", {"task": "take your time"}))
        return text_reply("done")

    llm_settings.responder = respond
    await engine.send(StartRun(conversation, conversation.owner, "go"))
    await settle(registry, conversation, 2)
    assert [n for n in tools_of(seen[0]) if n.startswith("agent__")] == ["agent__slow"]
    end = next(e for e in await events_of(conversation) if e["type"] == "tool_end")
    assert end["result"] == "slow but sure" and not end["isError"] and end["durationMs"] >= 200
