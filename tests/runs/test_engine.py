"""chat.runs.engine, the front door: every refusal of a start, a cancel or an answer comes back as
the protocol's code (docs/protocol.md, "Client frames"), whichever door asked."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from chat.agent.approval import APPROVED, Decision
from chat.models import Conversation, GroupLimits, ModelCall, Run
from chat.runs import engine
from chat.runs.client_frames import ProtocolError
from chat.runs.requests import ApproveRun, CancelRun, StartRun
from tests.fakellm import text_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


async def _refused(request: StartRun) -> ProtocolError:
    with pytest.raises(ProtocolError) as refused:
        await engine.start(request)
    return refused.value


async def test_a_start_is_stored_and_run_and_a_second_one_meanwhile_is_refused(conversation, registry, llm_settings):
    llm_settings.script(text_reply("slow words " * 20, piece=2, delay=0.05))
    run, seq = await engine.start(StartRun(conversation, conversation.owner, "hello"))
    assert seq == 1 and run.conversation_id == conversation.pk
    refused = await _refused(StartRun(conversation, conversation.owner, "again"))
    assert refused.code == "RUN_IN_PROGRESS"
    assert await engine.cancel(CancelRun(conversation.pk)) is True
    await registry.wait_idle()
    assert await engine.cancel(CancelRun(conversation.pk)) is False  # nothing left to cancel
    assert (await Run.objects.aget(pk=run.pk)).status == "cancelled"


async def test_each_rule_of_a_start_has_its_code(conversation, registry, llm_settings, settings):
    settings.AGENT_MESSAGES_PER_MINUTE = 1
    llm_settings.script(text_reply("one"))
    await engine.start(StartRun(conversation, conversation.owner, "one"))
    await registry.wait_idle()
    assert (await _refused(StartRun(conversation, conversation.owner, "two"))).code == "RATE_LIMITED"
    settings.AGENT_MESSAGES_PER_MINUTE = 0
    assert (await _refused(StartRun(conversation, conversation.owner, "x", edits=99))).code == "BAD_REQUEST"
    await sync_to_async(Conversation.objects.filter(pk=conversation.pk).delete)()
    assert (await _refused(StartRun(conversation, conversation.owner, "gone"))).code == "NOT_FOUND"


async def test_a_used_up_quota_is_refused_with_its_code(conversation, registry, settings):
    settings.AGENT_DAILY_TOKEN_QUOTA = 1
    run = await sync_to_async(Run.objects.create)(
        conversation=conversation, user=conversation.owner, status="succeeded"
    )
    await sync_to_async(ModelCall.objects.create)(
        run=run, iteration=1, attempt=1, total_tokens=5, started_at=run.started_at
    )
    refused = await _refused(StartRun(conversation, conversation.owner, "more"))
    assert refused.code == "QUOTA_EXCEEDED" and "5 of 1 tokens" in refused.detail
    assert not await sync_to_async(GroupLimits.objects.exists)()  # the setting's quota, no group's


async def test_an_answer_to_no_request_is_a_bad_request(conversation, registry):
    with pytest.raises(ProtocolError) as refused:
        await engine.approve(ApproveRun(conversation.pk, "call_nope", Decision(APPROVED, ""), None))
    assert (refused.value.code, refused.value.detail) == ("BAD_REQUEST", "unknown toolCallId")
