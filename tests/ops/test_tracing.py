"""OpenTelemetry traces: real runs exported over OTLP/HTTP to a receiver started here."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from chat.ops import tracing
from tests.fakellm import text_reply, tool_call_reply
from tests.otlp import Receiver, attributes

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


@pytest.fixture
def receiver(settings):
    receiver = Receiver()
    settings.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.endpoint
    yield receiver
    tracing.flush()
    receiver.stop()


async def test_a_run_is_exported_as_a_trace_of_run_model_call_and_tool_call_spans(
    conversation, registry, llm_settings, receiver, settings
):
    from tests.asgi_socket import Socket

    settings.AGENT_MAX_RETRIES = 2
    error = {"status": 500, "body": {"error": {"message": "upstream down"}}}
    usage = {"usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}}
    calls = tool_call_reply(("calculator", {"expression": "2+2"}), ("calculator", {"expression": "2+"}))
    answer = text_reply("Four.")
    llm_settings.script(error, calls, {**answer, "chunks": [*answer["chunks"], usage]})
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": "two plus two?"})
    frames = await socket.run_to_end()
    assert frames[-1]["status"] == "succeeded"
    await socket.close()
    await sync_to_async(tracing.flush)()

    assert set(receiver.paths) == {"/v1/traces"}
    spans = receiver.spans
    (run,) = [s for s in spans if attributes(s)["gen_ai.operation.name"] == "invoke_agent"]
    models = sorted(
        (s for s in spans if attributes(s)["gen_ai.operation.name"] == "chat"), key=lambda s: s.start_time_unix_nano
    )
    tools = sorted(
        (s for s in spans if attributes(s)["gen_ai.operation.name"] == "execute_tool"),
        key=lambda s: attributes(s)["gen_ai.tool.call.id"],
    )
    assert len(spans) == 1 + 3 + 2
    assert {s.trace_id for s in spans} == {run.trace_id}
    assert all(s.parent_span_id == run.span_id for s in models + tools)

    run_attributes = attributes(run)
    assert run.name == "invoke_agent fake-model"
    assert run_attributes["gen_ai.system"] == "openai"
    assert run_attributes["gen_ai.request.model"] == "fake-model"
    assert run_attributes["gen_ai.usage.input_tokens"] == 12
    assert run_attributes["gen_ai.usage.output_tokens"] == 4
    assert run_attributes["agentsite.run.id"] == frames[-1]["runId"]
    assert run_attributes["gen_ai.conversation.id"] == str(conversation.pk)
    assert run.status.code != run.status.STATUS_CODE_ERROR

    # The failed attempt, its retry (which asked for the tools), then the answer.
    assert [(attributes(s)["agentsite.iteration"], attributes(s)["agentsite.attempt"]) for s in models] == [
        (1, 1),
        (1, 2),
        (2, 1),
    ]
    assert [s.status.code == s.status.STATUS_CODE_ERROR for s in models] == [True, False, False]
    assert attributes(models[0])["error.type"] == "LLM_CALL_FAILED"
    assert all(attributes(s)["gen_ai.request.model"] == "fake-model" for s in models)
    assert models[1].end_time_unix_nano <= min(t.start_time_unix_nano for t in tools)
    assert models[2].start_time_unix_nano >= max(t.end_time_unix_nano for t in tools)

    assert [s.name for s in tools] == ["execute_tool calculator", "execute_tool calculator"]
    assert [attributes(s)["gen_ai.tool.name"] for s in tools] == ["calculator", "calculator"]
    assert [s.status.code == s.status.STATUS_CODE_ERROR for s in tools] == [False, True]
    # Tool arguments and results are content: they stay out of the trace.
    assert not any("2+2" in str(attributes(s)) for s in spans)
    assert run.start_time_unix_nano <= models[0].start_time_unix_nano
    assert run.end_time_unix_nano >= models[2].end_time_unix_nano


async def test_a_run_that_fails_is_an_error_span_and_no_model_call_is_invented(
    conversation, registry, llm_settings, receiver, settings
):
    from tests.asgi_socket import Socket

    settings.AGENT_MAX_RETRIES = 1
    error = {"status": 500, "body": {"error": {"message": "upstream down"}}}
    llm_settings.script(error, error)
    socket = Socket(conversation.owner, conversation.pk)
    await socket.connect()
    await socket.history()
    await socket.send({"type": "message", "content": "hi"})
    assert (await socket.run_to_end())[-1]["status"] == "failed"
    await socket.close()
    await sync_to_async(tracing.flush)()
    kinds = sorted(attributes(s)["gen_ai.operation.name"] for s in receiver.spans)
    assert kinds == ["chat", "chat", "invoke_agent"]
    assert all(s.status.code == s.status.STATUS_CODE_ERROR for s in receiver.spans)


def test_nothing_is_traced_without_an_endpoint(settings):
    settings.OTEL_EXPORTER_OTLP_ENDPOINT = None
    assert tracing.run_trace(run_id="r", conversation_id="c", resumes=0) is None
