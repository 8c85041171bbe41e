"""The MCP server's pieces without HTTP (chat.doors.mcp_server): the tools a user gets, the
arguments a call takes, the progress messages, the sessions and calls in the database, and the
unattended configuration of an MCP run."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from chat.accounts.tokens import token_create
from chat.agents.profiles import MCP_UNATTENDED, MCP_VIA, start_config
from chat.conversations.services import conversation_create
from chat.doors.mcp_server import sessions
from chat.doors.mcp_server.calls import _arguments, progress_message
from chat.doors.mcp_server.tools import INPUT_SCHEMA, agent_of, input_schema_of, tools_for
from chat.models import AgentProfile, McpCall, McpSession, Run
from chat.runs.client_frames import ProtocolError

pytestmark = pytest.mark.django_db


def profile(slug: str, *, everyone: bool = True, **fields) -> AgentProfile:
    return AgentProfile.objects.create(slug=slug, name=slug.title(), model="m", everyone=everyone, **fields)


def test_the_tools_are_the_agents_the_user_may_use_default_first(make_user):
    alice, bob = make_user("alice"), make_user("bob")
    profile("zeta", description="Last by name.")
    profile("alpha")
    mine = profile("mine", everyone=False)
    mine.users.add(alice)
    profile("off", enabled=False)
    tools = tools_for(user=alice)
    assert [t.name for t in tools] == ["ask_default", "ask_alpha", "ask_mine", "ask_zeta"]
    assert tools[-1].description == "Last by name." and tools[1].description == "Ask the agent Alpha."
    assert [t.name for t in tools_for(user=bob)] == ["ask_default", "ask_alpha", "ask_zeta"]
    assert all(t.input_schema == INPUT_SCHEMA for t in tools)
    assert agent_of(user=bob, name="ask_mine") is None and agent_of(user=alice, name="ask_mine") == ("mine", mine)
    assert agent_of(user=bob, name="ask_default") == ("default", None)
    assert agent_of(user=bob, name="ask_off") is None and agent_of(user=bob, name="mine") is None
    assert input_schema_of("ask_x") == INPUT_SCHEMA and input_schema_of("other") is None


@pytest.mark.parametrize(
    "arguments, code",
    [
        (None, "BAD_REQUEST"),
        ({}, "BAD_REQUEST"),
        ({"message": 3}, "BAD_REQUEST"),
        ({"message": " "}, "BAD_REQUEST"),
        ({"message": "hi", "conversationId": 1}, "BAD_REQUEST"),
        ({"message": "hi", "extra": True}, "BAD_REQUEST"),
        ({"message": "x" * 40_000}, "TOO_LARGE"),
    ],
)
def test_arguments_that_do_not_fit_are_refused_with_the_frame_codes(arguments, code):
    with pytest.raises(ProtocolError) as refused:
        _arguments(arguments)
    assert refused.value.code == code


def test_arguments_that_fit():
    assert _arguments({"message": "hi"}) == ("hi", None)
    assert _arguments({"message": "hi", "conversationId": "c"}) == ("hi", "c")


def test_progress_messages():
    assert progress_message({"type": "text", "content": "Hel"}) == "Hel"
    assert progress_message({"type": "tool_start", "toolName": "calculator"}) == "calling calculator"
    assert progress_message({"type": "tool_end", "toolName": "calculator", "isError": False}) == "calculator done"
    assert progress_message({"type": "tool_end", "toolName": "bash", "isError": True}) == "bash failed"
    assert progress_message({"type": "complete", "status": "cancelled"}) == "cancelled"
    assert progress_message({"type": "thinking", "content": "x"}) == "thinking"


def test_sessions_belong_to_their_token_and_end(make_user, settings):
    alice = make_user("alice")
    token, _ = token_create(user=alice, name="a")
    other, _ = token_create(user=alice, name="b")
    value = sessions.session_open(token=token, protocol_version="2025-06-18")
    assert len(value) >= 43 and not McpSession.objects.filter(digest=value).exists()  # only its digest is kept
    found = sessions.session_found(value=value, token=token)
    assert found == sessions.digest_of(value)
    assert sessions.session_found(value=value, token=other) is None  # another token's: unknown
    assert sessions.session_found(value="nope", token=token) is None
    assert sessions.session_end(value=value, token=other) is False
    assert sessions.session_end(value=value, token=token) is True
    assert sessions.session_found(value=value, token=token) is None
    # Idle past AGENT_MCP_SESSION_IDLE: gone; revoking the token ends the others.
    settings.AGENT_MCP_SESSION_IDLE = 60
    idle = sessions.session_open(token=token, protocol_version="2025-11-25")
    McpSession.objects.filter(digest=sessions.digest_of(idle)).update(
        last_used_at=timezone.now() - timedelta(minutes=2)
    )
    assert sessions.session_found(value=idle, token=token) is None
    kept = sessions.session_open(token=token, protocol_version="2025-11-25")
    token.delete()
    assert not McpSession.objects.filter(digest=sessions.digest_of(kept)).exists()


def test_a_call_is_found_by_its_session_and_request_id(make_user):
    alice = make_user("alice")
    token, _ = token_create(user=alice, name="a")
    session = sessions.digest_of(sessions.session_open(token=token, protocol_version="2025-11-25"))
    conversation = conversation_create(owner=alice, title="t")
    run = Run.objects.create(conversation=conversation, user=alice, status=Run.Status.RUNNING, model="m")
    sessions.call_record(session=session, request_id=7, run_id=run.pk)
    assert sessions.call_cancel(session=session, request_id="7") is None  # "7" is not 7
    assert sessions.call_cancel(session=session, request_id=7) == run
    assert sessions.call_was_cancelled(session=session, request_id=7, run_id=run.pk)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.SUCCEEDED)
    assert sessions.call_cancel(session=session, request_id=7) is None  # nothing left to cancel
    assert McpCall.objects.count() == 2  # "7" kept as cancelled, for a call of that id still to be recorded
    # The id again, for a new call: the row is the new run's, not cancelled.
    assert sessions.call_record(session=session, request_id=7, run_id=run.pk) is False
    assert not sessions.call_was_cancelled(session=session, request_id=7, run_id=run.pk)


def test_a_cancel_that_comes_before_the_calls_run_is_recorded_is_kept_for_it(make_user):
    alice = make_user("alice")
    token, _ = token_create(user=alice, name="a")
    session = sessions.digest_of(sessions.session_open(token=token, protocol_version="2025-11-25"))
    assert sessions.call_cancel(session=session, request_id="early") is None
    conversation = conversation_create(owner=alice, title="t")
    run = Run.objects.create(conversation=conversation, user=alice, status=Run.Status.RUNNING, model="m")
    assert sessions.call_record(session=session, request_id="early", run_id=run.pk) is True
    assert sessions.call_was_cancelled(session=session, request_id="early", run_id=run.pk)


def test_an_mcp_run_is_unattended_and_says_so():
    config = start_config(None, source="", options=None, via=MCP_VIA)
    assert config.unattended and config.unattended_reason == MCP_UNATTENDED and "MCP" in MCP_UNATTENDED
    assert not start_config(None, source="", options=None).unattended
