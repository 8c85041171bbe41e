"""A failed model call as a user and an operator see it: the stored events, the run row, the server log."""

from __future__ import annotations

import logging

import pytest
from asgiref.sync import sync_to_async

from chat.models import Event, Run
from chat.runs.requests import StartRun
from chat.runs.starter import start_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]

KEY = "sk-live-Oper4t0rSecretKey123456"


async def test_a_wrong_key_fails_the_run_at_once_and_is_logged_with_the_run_id(
    conversation, registry, llm_settings, settings, caplog
):
    settings.OPENAI_API_KEY = KEY
    settings.AGENT_MAX_RETRIES = 3
    message = f"Incorrect API key provided: {KEY[:12]}****3456"
    llm_settings.script({"status": 401, "body": {"error": {"message": message}}})
    with caplog.at_level(logging.WARNING, logger="chat.agent.loop"):
        run, _ = await start_run(StartRun(conversation=conversation, user=conversation.owner, content="hi"))
        await registry.wait_idle()
    events = await sync_to_async(lambda: [e.payload for e in Event.objects.filter(run=run).order_by("seq")])()
    assert [e["type"] for e in events] == ["user_message", "error", "complete"]
    assert events[1] == {
        "type": "error",
        "code": "LLM_CALL_FAILED",
        "message": "The model endpoint rejected the API key (HTTP 401).",
        "detail": "The server's API key for the model endpoint is wrong or expired (OPENAI_API_KEY).",
    }
    assert events[2]["status"] == "failed"
    assert len(llm_settings.requests) == 1, "a wrong key is not retried"
    row = await Run.objects.aget(pk=run.pk)
    assert (
        row.status == "failed" and row.error == "LLM_CALL_FAILED: The model endpoint rejected the API key (HTTP 401)."
    )
    lines = [r.getMessage() for r in caplog.records if r.name == "chat.agent.loop"]
    assert lines == [
        (
            f"model call failed: run {run.pk}, model fake-model, status 401, not retried: "
            "HTTP 401: Incorrect API key provided: [redacted]"
        )
    ]
    assert not any(piece in str(events) + lines[0] for piece in (KEY[:12], "Oper4t0r", "3456"))
