"""chat.runs.starter: starts that arrive together are stored in one group and all run; a refused
start sends no model request."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async

from chat.conversations.services import conversation_create
from chat.exceptions import RunInProgress
from chat.models import Run
from chat.runs.requests import StartRun
from chat.runs.starter import start_run
from tests.fakellm import text_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


async def test_messages_arriving_together_start_in_one_group_and_all_run(make_user, registry, llm_settings):
    user = await sync_to_async(make_user)("dave")
    conversations = [await sync_to_async(conversation_create)(owner=user) for _ in range(6)]
    await registry.ensure_started()  # (its first call may wait on the channel layer)
    started = await asyncio.gather(
        *(start_run(StartRun(conversation=c, user=user, content="hello")) for c in conversations)
    )
    await registry.wait_idle()
    runs = await sync_to_async(lambda: list(Run.objects.all()))()
    # All six were waiting when the starter first ran: one trip, one transaction, one `now`.
    assert len({run.started_at for run in runs}) == 1
    assert {run.pk for run in runs} == {run.pk for run, _ in started}
    assert [seq for _, seq in started] == [1] * 6  # each new conversation's user_message, from the start itself
    assert all(run.status == "succeeded" for run in runs)


async def test_a_refused_start_sends_no_model_request(conversation, registry, llm_settings):
    llm_settings.script(text_reply("slow words " * 20, piece=2, delay=0.05))
    await start_run(StartRun(conversation=conversation, user=conversation.owner, content="first"))
    with pytest.raises(RunInProgress):
        await start_run(StartRun(conversation=conversation, user=conversation.owner, content="second"))
    await registry.wait_idle()
    assert [body["messages"][-1]["content"] for body in llm_settings.requests] == ["first"]
