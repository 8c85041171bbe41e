"""chat.runtime.execution: a run's task, bounded as a whole (a model that stalls is stopped)."""

from __future__ import annotations

from unittest.mock import ANY

import pytest
from asgiref.sync import sync_to_async

from chat.models import Event
from chat.runs.requests import StartRun
from chat.runs.starter import start_run
from tests.fakellm import text_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]

# The fake model reports no usage unless a reply holds a usage chunk.
NO_USAGE = {"promptTokens": 0, "completionTokens": 0, "totalTokens": 0}


def _payloads(run_id) -> list[dict]:
    return list(Event.objects.filter(run_id=run_id).order_by("seq").values_list("payload", flat=True))


async def test_a_model_that_stalls_is_stopped_by_the_llm_timeout(conversation, registry, llm_settings, settings):
    # The model client has no per-read timeout of its own: the whole call is bounded instead.
    settings.AGENT_LLM_TIMEOUT = 0.5
    settings.AGENT_MAX_RETRIES = 0
    llm_settings.script(text_reply("words that come too slowly", delay=3))
    run, _ = await start_run(StartRun(conversation=conversation, user=conversation.owner, content="hi"))
    await registry.wait_idle()
    events = await sync_to_async(_payloads)(run.pk)
    errors = [e for e in events if e["type"] == "error"]
    assert errors and "did not finish within 0.5 s" in errors[0]["detail"]
    assert events[-1] == {"type": "complete", "status": "failed", "durationMs": ANY, "usage": NO_USAGE, "context": ANY}
