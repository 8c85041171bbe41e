"""Approvals in the agent core (chat.agent.approval): a gated call waits for an answer before it
starts; a denied or expired one gets a tool_end error the model reads; cancel closes the wait."""

from __future__ import annotations

import asyncio
import json

from chat.agent.approval import APPROVED, DENIED, ApprovalPolicy, Decision, open_requests
from tests.fakellm import text_reply, tool_call_reply

from .helpers import run_events, without_durations


class Answers:
    """An `Answers` the test answers by hand."""

    def __init__(self) -> None:
        self.futures: dict[str, asyncio.Future[Decision]] = {}
        self.asked = asyncio.Event()
        self.forgotten: list[str] = []

    def expect(self, tool_call_ids):
        loop = asyncio.get_running_loop()
        self.futures = {call_id: loop.create_future() for call_id in tool_call_ids}
        self.asked.set()
        return dict(self.futures)

    def forget(self, tool_call_ids):
        self.forgotten += list(tool_call_ids)

    async def answer(self, call_id: str, decision: Decision) -> None:
        await self.asked.wait()
        self.futures[call_id].set_result(decision)


def policy(answers, *, patterns=("add",), timeout=30.0) -> ApprovalPolicy:
    return ApprovalPolicy(patterns=patterns, timeout=timeout, answers=answers)


def shape(events):
    """The events without the request's expiresAt (a time) and durations."""
    return [{k: v for k, v in e.items() if k != "expiresAt"} for e in without_durations(events)]


def request(call_id, name, arguments):
    return {"type": "approval_request", "toolCallId": call_id, "toolName": name, "arguments": arguments}


def result(call_id, decision, reason=""):
    return {"type": "approval_result", "toolCallId": call_id, "decision": decision, "reason": reason}


async def test_an_approved_call_runs_after_its_result(fake_llm, make_agent):
    answers = Answers()
    fake_llm.script(tool_call_reply(("add", {"a": 2, "b": 3})), text_reply("5"))
    run = make_agent(approval=policy(answers)).stream("2+3?")
    task = asyncio.create_task(run_events(run))
    await answers.answer("call_0", Decision(APPROVED))
    events = await task
    args = json.dumps({"a": 2, "b": 3})
    assert shape(events) == [
        request("call_0", "add", args),
        result("call_0", "approved"),
        {"type": "tool_start", "toolName": "add", "toolCallId": "call_0", "arguments": args},
        {"type": "tool_end", "toolName": "add", "toolCallId": "call_0", "result": "5", "isError": False},
        {"type": "text", "content": "5"},
        {"type": "complete", "status": "succeeded"},
    ]
    assert events[0]["expiresAt"].endswith("Z")
    assert answers.forgotten == ["call_0"]


async def test_a_denied_call_never_starts_and_the_model_reads_the_reason(fake_llm, make_agent):
    answers = Answers()
    fake_llm.script(tool_call_reply(("add", {"a": 2, "b": 3}), ("mul", {"a": 6, "b": 7})), text_reply("ok"))
    run = make_agent(approval=policy(answers)).stream("go")
    task = asyncio.create_task(run_events(run))
    await answers.answer("call_0", Decision(DENIED, "not today"))
    events = await task
    kinds = [(e["type"], e.get("toolCallId")) for e in events]
    assert kinds == [
        ("approval_request", "call_0"),
        ("approval_result", "call_0"),
        ("tool_start", "call_1"),  # mul needs no approval
        ("tool_end", "call_0"),
        ("tool_end", "call_1"),
        ("text", None),
        ("complete", None),
    ]
    denial = json.dumps({"error": "denied by the user: not today"})
    assert events[3]["result"] == denial and events[3]["isError"] is True
    second = fake_llm.requests[1]["messages"]
    assert {"role": "tool", "tool_call_id": "call_0", "content": denial} in second
    assert {"role": "tool", "tool_call_id": "call_1", "content": "42"} in second


async def test_parallel_calls_are_asked_together_and_expire_unanswered(fake_llm, make_agent):
    answers = Answers()
    fake_llm.script(tool_call_reply(("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 2})), text_reply("ok"))
    run = make_agent(approval=policy(answers, timeout=0.5)).stream("go")
    task = asyncio.create_task(run_events(run))
    await answers.answer("call_1", Decision(APPROVED))
    events = await task
    assert [(e["type"], e.get("toolCallId"), e.get("decision")) for e in events[:4]] == [
        ("approval_request", "call_0", None),
        ("approval_request", "call_1", None),
        ("approval_result", "call_1", "approved"),
        ("approval_result", "call_0", "expired"),
    ]
    ends = {e["toolCallId"]: e for e in events if e["type"] == "tool_end"}
    assert ends["call_1"]["result"] == "4"
    assert ends["call_0"]["result"] == json.dumps({"error": "denied: nobody approved the call within 0.5 s"})
    assert [e["toolCallId"] for e in events if e["type"] == "tool_start"] == ["call_1"]


async def test_cancel_while_waiting_closes_the_request(fake_llm, make_agent):
    answers = Answers()
    fake_llm.script(tool_call_reply(("add", {"a": 1, "b": 1})))
    run = make_agent(approval=policy(answers)).stream("go")
    task = asyncio.create_task(run_events(run))
    await answers.asked.wait()
    run.cancel()
    events = await task
    assert [(e["type"], e.get("decision") or e.get("code") or e.get("status")) for e in events] == [
        ("approval_request", None),
        ("approval_result", "denied"),
        ("tool_end", None),
        ("error", "CANCELLED"),
        ("complete", "cancelled"),
    ]
    assert events[1]["reason"] == "the run was stopped"
    assert answers.forgotten == ["call_0"]
    assert open_requests(events) == []


async def test_patterns_are_fnmatch(fake_llm, make_agent):
    answers = Answers()
    fake_llm.script(tool_call_reply(("mul", {"a": 2, "b": 3})), text_reply("6"))
    events = await run_events(make_agent(approval=policy(answers, patterns=("a*", "x?z"))).stream("2*3?"))
    assert not answers.asked.is_set()
    assert [e["type"] for e in events][:2] == ["tool_start", "tool_end"]
    assert policy(answers, patterns=("github__*",)).needs_approval("github__create_issue")
    assert not policy(answers, patterns=("github__*",)).needs_approval("gitlab__x")


def test_open_requests_follow_the_log_in_order():
    events = [
        request("c", "add", "{}"),
        result("c", "approved"),
        request("c", "add", "{}"),  # a later round reusing the id
        request("d", "add", "{}"),
        result("d", "denied"),
    ]
    assert [r["toolCallId"] for r in open_requests(events)] == ["c"]
