"""A trigger's hook, `POST /hooks/<id>/` (docs/protocol.md, "Triggers"): the secret as a bearer
value or an HMAC signature, wrong secrets and the lock-out, the payload filled into the prompt
and reaching the model, the run started as the owner and marked, the rate limit, the size cap,
a disabled or deleted trigger and a deactivated owner."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from chat.accounts.process_cache import cache
from chat.models import Conversation, Event, Run, Trigger
from chat.scheduling.triggers import trigger_create, trigger_json
from tests.fakellm import text_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


@pytest.fixture(autouse=True)
def _no_failures_counted():
    cache.clear()  # the failed-attempt counters live in the cache
    yield
    cache.clear()


@sync_to_async
def make_trigger(user, **body) -> tuple[Trigger, str]:
    return trigger_create(user=user, body={"prompt": "Look at this: {{payload}}", "name": "CI", **body})


async def settle(registry, timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while await Run.objects.filter(status="running").aexists():
            await registry.wait_idle()
            await asyncio.sleep(0.05)


def url(trigger: Trigger) -> str:
    return f"/hooks/{trigger.pk}/"


async def call(trigger, body: bytes | str = b"{}", *, secret=None, signature=None, content_type="application/json"):
    headers = {}
    if secret is not None:
        headers["Authorization"] = f"Bearer {secret}"
    if signature is not None:
        headers["X-Agentsite-Signature"] = signature
    return await AsyncClient().post(url(trigger), body, content_type=content_type, headers=headers)


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


async def test_a_bearer_call_starts_the_owners_run_with_the_payload(make_user, registry, llm_settings):
    llm_settings.script(text_reply("Seen."))
    owner = await sync_to_async(make_user)("alice")
    trigger, secret = await make_trigger(owner)
    response = await call(trigger, json.dumps({"b": 1, "a": "é"}), secret=secret)
    assert response.status_code == 202, response.content
    body = response.json()
    assert set(body) == {"runId", "conversationId", "seq"}
    await settle(registry)
    run = await Run.objects.select_related("conversation").aget(pk=body["runId"])
    assert run.status == "succeeded" and run.user_id == owner.pk and run.trigger_id == trigger.pk
    conversation = run.conversation
    assert str(conversation.pk) == body["conversationId"]
    assert (conversation.title, conversation.title_source) == ("CI", "user")
    assert (conversation.source, conversation.trigger_id) == ("trigger", trigger.pk)
    payload = json.dumps({"b": 1, "a": "é"}, indent=2, ensure_ascii=False)
    message = await Event.objects.filter(run=run, type="user_message").aget()
    assert message.payload["content"] == f"Look at this: {payload}"
    assert (message.payload["triggerId"], message.payload["via"]) == (str(trigger.pk), "trigger")
    assert llm_settings.requests[-1]["messages"][-1]["content"] == f"Look at this: {payload}"
    after = await Trigger.objects.select_related("agent", "last_run").aget(pk=trigger.pk)
    shown = await sync_to_async(trigger_json)(after)
    assert (shown["lastRunId"], shown["lastStatus"]) == (str(run.pk), "succeeded")


async def test_a_signed_call_and_a_text_body(make_user, registry, llm_settings):
    llm_settings.script(text_reply("Seen."))
    owner = await sync_to_async(make_user)("alice")
    trigger, secret = await make_trigger(owner)
    body = b"plain text, not JSON"
    response = await call(trigger, body, signature=sign(secret, body), content_type="text/plain")
    assert response.status_code == 202, response.content
    await settle(registry)
    assert llm_settings.requests[-1]["messages"][-1]["content"] == "Look at this: plain text, not JSON"


async def test_wrong_secrets_are_401_and_lock_the_address_out(make_user, settings):
    settings.LOGIN_FAILURE_LIMIT = 3
    owner = await sync_to_async(make_user)("alice")
    trigger, secret = await make_trigger(owner)
    body = b'{"x": 1}'
    for refused in (
        await call(trigger, body),
        await call(trigger, body, secret="hk_wrong"),
        await call(trigger, body, signature=sign("hk_wrong", body)),
    ):
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "NOT_AUTHENTICATED"
        assert refused["WWW-Authenticate"] == "Bearer"
    locked = await call(trigger, body, secret=secret)  # the right one too, from this address
    assert locked.status_code == 429 and locked.json()["error"]["code"] == "RATE_LIMITED"
    assert not await Run.objects.aexists() and not await Conversation.objects.aexists()


async def test_a_signature_of_another_body_is_refused(make_user):
    owner = await sync_to_async(make_user)("alice")
    trigger, secret = await make_trigger(owner)
    response = await call(trigger, b'{"x": 2}', signature=sign(secret, b'{"x": 1}'))
    assert response.status_code == 401


async def test_the_trigger_rate_limit(make_user, registry, llm_settings, settings):
    settings.AGENT_TRIGGER_RATE_LIMIT = 1
    llm_settings.script(text_reply("Seen."))
    owner = await sync_to_async(make_user)("alice")
    trigger, secret = await make_trigger(owner)
    assert (await call(trigger, secret=secret)).status_code == 202
    await settle(registry)
    refused = await call(trigger, secret=secret)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "RATE_LIMITED"
    assert await Run.objects.acount() == 1 and await Conversation.objects.acount() == 1


async def test_the_size_cap_and_a_body_that_is_not_utf8(make_user, settings):
    settings.AGENT_MAX_MESSAGE_CHARS = 100
    owner = await sync_to_async(make_user)("alice")
    trigger, secret = await make_trigger(owner)
    too_big = await call(trigger, b"x" * 401, secret=secret, content_type="text/plain")
    assert too_big.status_code == 413 and too_big.json()["error"]["code"] == "TOO_LARGE"
    too_long = await call(trigger, b"x" * 95, secret=secret, content_type="text/plain")  # the filled prompt
    assert too_long.status_code == 413
    not_utf8 = await call(trigger, b"\xff\xfe", secret=secret, content_type="text/plain")
    assert not_utf8.status_code == 400 and not_utf8.json()["error"]["code"] == "BAD_REQUEST"
    assert not await Run.objects.aexists()


async def test_disabled_deleted_and_an_inactive_owner_answer_404(make_user):
    owner = await sync_to_async(make_user)("alice")
    trigger, secret = await make_trigger(owner, enabled=False)
    assert (await call(trigger, secret=secret)).status_code == 404
    await Trigger.objects.filter(pk=trigger.pk).aupdate(enabled=True)
    owner.is_active = False
    await owner.asave()
    assert (await call(trigger, secret=secret)).status_code == 404
    owner.is_active = True
    await owner.asave()
    assert (await AsyncClient().get(url(trigger))).status_code == 405
    await Trigger.objects.filter(pk=trigger.pk).adelete()
    gone = await call(trigger, secret=secret)
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "NOT_FOUND"
    assert not await Run.objects.aexists()


async def test_a_busy_conversation_is_409_and_stores_nothing(make_user, registry, llm_settings):
    llm_settings.script(text_reply("slow " * 40, piece=1, delay=0.05))
    owner = await sync_to_async(make_user)("alice")
    conversation = await Conversation.objects.acreate(owner=owner, title="mine")
    trigger, secret = await make_trigger(owner, conversation=str(conversation.pk))
    first = await call(trigger, secret=secret)
    assert first.status_code == 202 and first.json()["conversationId"] == str(conversation.pk)
    busy = await call(trigger, secret=secret)
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "RUN_IN_PROGRESS"
    await settle(registry)
    assert await Run.objects.acount() == 1 and await Conversation.objects.acount() == 1
    assert (await Conversation.objects.aget()).source == ""  # the conversation keeps its own source
