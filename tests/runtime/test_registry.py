"""chat.runtime.registry: the hand-over of a stopping process: a run that may resume is released
to another process, which finishes it; one without resumes left is closed interrupted."""

from __future__ import annotations

import asyncio
from unittest.mock import ANY

import pytest
from asgiref.sync import sync_to_async

from chat.models import Event, Run
from chat.runs.requests import StartRun
from chat.runs.starter import start_run
from chat.runtime.registry import RunRegistry
from tests.fakellm import text_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def _payloads(run_id) -> list[dict]:
    return list(Event.objects.filter(run_id=run_id).order_by("seq").values_list("payload", flat=True))


def _run(run_id) -> Run:
    return Run.objects.get(pk=run_id)


async def test_shutdown_hands_a_resumable_run_to_another_process_which_finishes_it(
    conversation, registry, llm_settings, settings
):
    settings.AGENT_HEARTBEAT_TIMEOUT = 3600  # only the release can make the run stale
    answer = "".join(f"w{i} " for i in range(60))
    llm_settings.script(text_reply(answer, piece=3, delay=0.03), text_reply("Resumed answer."))
    run, _ = await start_run(StartRun(conversation=conversation, user=conversation.owner, content="go"))
    while not [e for e in await sync_to_async(_payloads)(run.pk) if e["type"] == "text"]:
        await asyncio.sleep(0.02)

    await registry.shutdown()

    released = await sync_to_async(_run)(run.pk)
    assert (released.status, released.worker) == ("running", "")
    before = await sync_to_async(_payloads)(run.pk)
    assert "complete" not in [e["type"] for e in before] and "error" not in [e["type"] for e in before]

    other = RunRegistry()  # another process
    try:
        await other.reap_once()
        await other.wait_idle()
    finally:
        await other.close()
    after = await sync_to_async(_payloads)(run.pk)
    assert after[: len(before)] == before
    resumed = after[len(before) :]
    # The answer's first delta is stored at once, the rest (if it came later) coalesced.
    types = [e["type"] for e in resumed]
    assert types[0] == "error" and types[-1] == "complete" and set(types[1:-1]) == {"text"} and len(types) <= 4
    assert resumed[0]["resumed"] is True and "".join(e["content"] for e in resumed[1:-1]) == "Resumed answer."
    assert [e["type"] for e in after].count("complete") == 1
    assert (await sync_to_async(_run)(run.pk)).status == "succeeded"


async def test_shutdown_closes_a_run_without_resumes_as_interrupted(conversation, registry, llm_settings, settings):
    settings.AGENT_MAX_RESUMES = 0
    llm_settings.script(text_reply("slow words " * 60, piece=2, delay=0.05))
    run, _ = await start_run(StartRun(conversation=conversation, user=conversation.owner, content="go"))
    await asyncio.sleep(0.2)
    await registry.shutdown()
    events = await sync_to_async(_payloads)(run.pk)
    assert events[-2]["code"] == "INTERRUPTED" and events[-1] == {
        "type": "complete",
        "status": "interrupted",
        "durationMs": ANY,
        "usage": ANY,
        "context": ANY,
    }
    # The cut model call's tokens were spent: counted by their estimate (chat/agent/estimate.py).
    assert events[-1]["usage"]["promptTokens"] > 0
    assert (await sync_to_async(_run)(run.pk)).status == "interrupted"
