"""OpenTelemetry traces of runs (docs/protocol.md, "Health and metrics"), when OTEL_EXPORTER_OTLP_ENDPOINT is set.

A run is one trace: a span for the run, one per model call attempt and one per tool
call, with the GenAI semantic-convention attributes. The spans are made from the
run's events as the runtime stores them (chat.runtime.execution), so the agent core
needs no hook: a model call is the stretch in which the model is being asked, from
the run's start or the end of a tool round up to its tool calls, the run's end or its
failure (an LLM_CALL_FAILED error; the retry is the next attempt). Arguments, results
and message text stay out of the spans: traces go to another system, and the
conventions make content opt-in.

Not configured, nothing here is imported by the runtime's hot path and no span is
made: run_trace() returns None. The exporter batches in a thread of its own
(BatchSpanProcessor), so a slow or absent collector never blocks a run.
"""

from __future__ import annotations

import time
from functools import cache
from typing import Any

from django.conf import settings

from chat.agent.events import ErrorCode, RunStatus

GEN_AI_SYSTEM = "openai"  # the wire protocol every endpoint here speaks (OpenAI-compatible)


@cache
def _provider(endpoint: str):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: "agentsite"}))
    # The generic endpoint variable names the collector; traces go to its /v1/traces (OTLP spec).
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")))
    return provider


def flush() -> None:
    """Export what is waiting now (tests)."""
    if settings.OTEL_EXPORTER_OTLP_ENDPOINT:
        _provider(settings.OTEL_EXPORTER_OTLP_ENDPOINT).force_flush()


def run_trace(*, run_id, conversation_id, resumes: int) -> RunTrace | None:
    endpoint = settings.OTEL_EXPORTER_OTLP_ENDPOINT
    if not endpoint:
        return None
    return RunTrace(
        _provider(endpoint).get_tracer("agentsite"),
        model=settings.AGENT_MODEL or "",
        run_id=str(run_id),
        conversation_id=str(conversation_id),
        resumes=resumes,
    )


class RunTrace:
    """The spans of one run (or of one resumed attempt of it), fed with its events in order."""

    def __init__(self, tracer, *, model: str, run_id: str, conversation_id: str, resumes: int) -> None:
        from opentelemetry import trace

        self._trace = trace
        self.tracer = tracer
        self.model = model
        self.base = {"gen_ai.system": GEN_AI_SYSTEM, "gen_ai.request.model": model}
        self.run_span = tracer.start_span(
            f"invoke_agent {model}",
            attributes={
                **self.base,
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "agentsite",
                "gen_ai.conversation.id": conversation_id,
                "agentsite.run.id": run_id,
                "agentsite.run.resumes": resumes,
            },
        )
        self.context = trace.set_span_in_context(self.run_span)
        self.iteration = 1
        self.attempt = 1
        self.model_call_started: int | None = time.time_ns()  # asked, no event of the answer yet
        self.model_span: Any = None
        self.tool_spans: dict[str, Any] = {}
        self.round_open = False  # tool calls asked for, the model not asked again yet

    # -- events --------------------------------------------------------------------------
    def observe(self, event: dict[str, Any], outcome=None, usage=None) -> None:
        """One event of the run; with `complete`, the run's outcome and this process's usage
        (chat.agent.turns.Usage: the tokens of the model calls it made)."""
        kind = event.get("type")
        if kind in ("text", "thinking", "reference"):
            self._model_span()
        elif kind == "approval_request":
            self._end_model_call()  # the wait for the user is not the model's time
            self.round_open = True
        elif kind == "tool_start":
            self._end_model_call()
            self.round_open = True
            self.tool_spans[event["toolCallId"]] = self.tracer.start_span(
                f"execute_tool {event['toolName']}",
                context=self.context,
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": event["toolName"],
                    "gen_ai.tool.call.id": event["toolCallId"],
                    "gen_ai.tool.type": "function",
                },
            )
        elif kind == "tool_end":
            span = self.tool_spans.pop(event["toolCallId"], None)
            if span is not None:
                if event.get("isError"):
                    self._fail(span, "tool_error", "the tool call failed")
                span.end()
            if not self.tool_spans and self.round_open:  # the round is over: the model is asked again
                self.round_open = False
                self.iteration += 1
                self.attempt = 1
                self.model_call_started = time.time_ns()
        elif kind == "error":
            self._on_error(event)
        elif kind == "complete":
            self._complete(event, outcome, usage)

    def _on_error(self, event: dict[str, Any]) -> None:
        code = event.get("code", "")
        if code == ErrorCode.LLM_CALL_FAILED:
            span = self._model_span()
            if span is not None:
                self._fail(span, code, event.get("message", ""))
                self._end_model_call()
            self.attempt += 1
            self.model_call_started = time.time_ns()
        elif code in (ErrorCode.CANCELLED, ErrorCode.INTERRUPTED):
            # Stopped while asking the model: that call ends here, unfinished.
            span = self._model_span()
            if span is not None:
                span.set_attribute("error.type", code)
            self._end_model_call()
        else:  # MAX_ITERATIONS and the like come between model calls
            self._end_model_call(discard=True)

    def _complete(self, event: dict[str, Any], outcome, usage) -> None:
        # Still waiting for a sign of a model call here means none was made (the retries ran out).
        self._end_model_call(discard=True)
        run = self.run_span
        status = event.get("status", "")
        run.set_attribute("agentsite.run.status", status)
        if usage is not None:
            run.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
            run.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)
        if outcome is not None:
            run.set_attribute("agentsite.run.iterations", outcome.iterations)
        if status == RunStatus.FAILED:
            self._fail(run, "run_failed", outcome.error if outcome is not None else "")
        self.close()

    def close(self) -> None:
        """End whatever is still open (the run was handed to another process, or broke)."""
        for span in self.tool_spans.values():
            span.end()
        self.tool_spans.clear()
        self._end_model_call(discard=True)
        if self.run_span.is_recording():
            self.run_span.end()

    # -- model calls ---------------------------------------------------------------------------
    def _model_span(self):
        """The span of the model call being answered, made when its first sign arrives."""
        if self.model_span is None and self.model_call_started is not None:
            self.model_span = self.tracer.start_span(
                f"chat {self.model}",
                context=self.context,
                start_time=self.model_call_started,
                attributes={
                    **self.base,
                    "gen_ai.operation.name": "chat",
                    "agentsite.iteration": self.iteration,
                    "agentsite.attempt": self.attempt,
                },
            )
            self.model_call_started = None
        return self.model_span

    def _end_model_call(self, *, discard: bool = False) -> None:
        if not discard:
            self._model_span()  # a call that ended without any text (tool calls only) still happened
        if self.model_span is not None:
            self.model_span.end()
        self.model_span = None
        self.model_call_started = None

    def _fail(self, span, error_type: str, message: str) -> None:
        span.set_attribute("error.type", error_type)
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, message[:200]))
