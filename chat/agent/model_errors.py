"""Why a model call failed, in words a user and an operator can act on.

Every failure of a model call becomes one ModelCallError that says:

- `detail`: the cause as a sentence for users ("The model endpoint rejected the
  API key (HTTP 401)."). Never the endpoint's own text: that may quote the key.
- `log_detail`: the same with the endpoint's text or the transport's reason, for
  the server log. Both are redacted (chat.agent.redact) and capped.
- `retryable`: whether sending the same call again can succeed. A wrong key, a
  missing model or a malformed request fail the same way every time (400, 401,
  403, 404, 422 and the other 4xx); 408, 409, 429, 5xx and network errors are
  retried, after `retry_after` seconds when the endpoint said so.

The transport is found by walking the exception chain: the SDK's aiohttp bridge
reports a refused connection, a failed DNS lookup and a failed TLS handshake
all as "Request timed out" (httpx2.ConnectTimeout), with the real reason below.
"""

from __future__ import annotations

import email.utils
import re
import socket
import ssl
import time
from collections.abc import Iterable
from typing import Any

import openai

from .redact import redact

# Endpoints' words for a request longer than the model's context window (OpenAI,
# Anthropic-compatible, vLLM, llama.cpp, Ollama, DashScope).
_CONTEXT_LENGTH = re.compile(
    r"context[ _-]?length|context window|maximum context|too many tokens|prompt is too long|"
    r"reduce the length|exceeds? the (?:model'?s? )?(?:max|context)",
    re.IGNORECASE,
)
_RETRYABLE_STATUSES = {408, 409, 429}
_NOT_RETRIED = "Retrying cannot fix this, so the call was not retried."


class ModelCallError(Exception):
    """A model call that failed; `detail` is what users are shown (see the module docstring)."""

    def __init__(
        self,
        detail: str,
        *,
        log_detail: str | None = None,
        status: int | None = None,
        retryable: bool = True,
        retry_after: float | None = None,
        hint: str = "",
    ):
        detail = redact(detail)
        super().__init__(detail)
        self.detail = detail
        self.log_detail = redact(log_detail) if log_detail else detail
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        self.hint = hint or _NOT_RETRIED

    def redact_secrets(self, secrets: Iterable[str | None]) -> None:
        """Take out the known secrets too (the client's API key), pieces of them included."""
        secrets = list(secrets)
        self.detail = redact(self.detail, secrets)
        self.log_detail = redact(self.log_detail, secrets)
        self.args = (self.detail,)


def from_exception(
    exc: BaseException,
    *,
    model: str,
    base_url: Any,
    secrets: Iterable[str | None] = (),
    responded: bool = False,
) -> ModelCallError:
    """The ModelCallError for whatever the SDK or the transport raised; `responded`: the endpoint
    had answered (status and headers) when it was raised."""
    if isinstance(exc, openai.APIStatusError):
        error = _from_status(exc, model=model, base_url=base_url)
    else:
        error = _from_transport(exc, base_url=base_url, responded=responded)
    error.redact_secrets(secrets)
    return error


def _from_status(exc: openai.APIStatusError, *, model: str, base_url: Any) -> ModelCallError:
    status = exc.status_code
    text = endpoint_message(exc)
    log_detail = f"HTTP {status}: {text}"
    where = _host(base_url)
    if status in _RETRYABLE_STATUSES or status >= 500:
        if status == 429:
            detail = "The model endpoint is limiting requests (HTTP 429)."
        elif status == 408:
            detail = "The model endpoint gave up waiting for the request (HTTP 408)."
        elif status == 409:
            detail = "The model endpoint reported a conflict (HTTP 409)."
        else:
            detail = f"The model endpoint failed with a server error (HTTP {status})."
        retry_after = _retry_after(exc.response.headers) if exc.response is not None else None
        return ModelCallError(detail, log_detail=log_detail, status=status, retry_after=retry_after)
    if status == 400 and _CONTEXT_LENGTH.search(text):
        detail, hint = (
            "The conversation is too long for the model's context window (HTTP 400).",
            "Start a new conversation, or send a shorter message.",
        )
    elif status == 401:
        detail, hint = (
            "The model endpoint rejected the API key (HTTP 401).",
            "The server's API key for the model endpoint is wrong or expired (OPENAI_API_KEY).",
        )
    elif status == 403:
        detail, hint = (
            "The model endpoint refused access with this API key (HTTP 403).",
            "The key is valid but may not use this model or endpoint.",
        )
    elif status == 404 and "model" in text.lower():
        detail, hint = (
            f"Model '{model}' was not found at {where} (HTTP 404).",
            "Check the model name (AGENT_MODEL) and the endpoint (OPENAI_BASE_URL).",
        )
    elif status == 404:
        detail, hint = (
            f"The model endpoint at {where} has no chat completions API at this address (HTTP 404).",
            "Check the endpoint's base URL (OPENAI_BASE_URL); most end in /v1.",
        )
    elif status == 400:
        detail, hint = "The model endpoint rejected the request as invalid (HTTP 400).", ""
    elif status == 422:
        detail, hint = "The model endpoint could not process the request (HTTP 422).", ""
    else:
        detail, hint = f"The model endpoint refused the request (HTTP {status}).", ""
    return ModelCallError(detail, log_detail=log_detail, status=status, retryable=False, hint=hint)


def _from_transport(exc: BaseException, *, base_url: Any, responded: bool = False) -> ModelCallError:
    where = _host(base_url)
    chain = _chain(exc)
    for cause in reversed(chain):  # the root cause first: the transports' wrappers say less
        if isinstance(cause, ConnectionRefusedError):
            return ModelCallError(
                f"The model endpoint at {where} refused the connection.", log_detail=_log_detail(cause, chain)
            )
        if isinstance(cause, socket.gaierror):
            name = getattr(base_url, "host", "") or where
            return ModelCallError(
                f"The model endpoint's host name {name} could not be resolved (DNS lookup failed).",
                log_detail=_log_detail(cause, chain),
            )
        if isinstance(cause, ssl.SSLError):
            return ModelCallError(
                f"The TLS connection to the model endpoint at {where} failed: {_tls_reason(cause)}.",
                log_detail=_log_detail(cause, chain),
            )
    for cause in chain:
        if isinstance(cause, TimeoutError | openai.APITimeoutError) or "Timeout" in type(cause).__name__:
            return ModelCallError(
                f"The model endpoint at {where} did not answer in time.", log_detail=_log_detail(cause, chain)
            )
    root = chain[-1]
    log_detail = _log_detail(root, chain)
    if responded:  # whatever broke (a reset, a body cut mid-chunk), the endpoint had been reached
        return ModelCallError(
            f"The connection to the model endpoint at {where} was lost mid-response ({type(root).__name__}).",
            log_detail=log_detail,
        )
    if isinstance(root, OSError) or "Disconnect" in type(root).__name__ or "Protocol" in type(root).__name__:
        return ModelCallError(
            f"The connection to the model endpoint at {where} was lost ({type(root).__name__}).",
            log_detail=log_detail,
        )
    return ModelCallError(
        f"The model endpoint at {where} could not be reached ({type(root).__name__}).", log_detail=log_detail
    )


def _log_detail(cause: BaseException, chain: list[BaseException]) -> str:
    """The cause with its own words, then the wrappers by name only: the SDK's aiohttp bridge
    wraps a refused connection in "APITimeoutError: Request timed out", which is not what happened."""
    wrappers = [type(e).__name__ for e in chain if e is not cause]
    return f"{type(cause).__name__}: {cause}" + (f" (via {' <- '.join(wrappers)})" if wrappers else "")


def empty_response() -> ModelCallError:
    """A 200 whose body held no event: the server failed on the request after it had begun
    streaming, and said why only in its own log (llama-cpp-python, for a prompt longer than its
    context window or a streamed tool_choice it cannot do). The same request fails the same way."""
    return ModelCallError(
        "The model endpoint answered with an empty response (HTTP 200 without a single event): "
        "it could not process the request, most often a conversation too long for the model's context window.",
        retryable=False,
        hint="Start a new conversation or send a shorter message; the model server's log says what it refused.",
    )


def timed_out(*, base_url: Any, timeout: float | None, responded: bool) -> ModelCallError:
    """The whole call ran past ChatModel.timeout: before the response headers, or while streaming."""
    if responded:
        return ModelCallError(f"The model did not finish within {timeout:g} s.")
    return ModelCallError(f"The model endpoint at {_host(base_url)} sent no response within {timeout:g} s.")


def endpoint_message(exc: openai.APIError) -> str:
    """The endpoint's own words for an error: for the log, and to recognise the case."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str) and inner:
            return inner
    return str(getattr(exc, "message", None) or exc)


def _retry_after(headers: Any) -> float | None:
    """Seconds from `retry-after-ms` (OpenAI) or `Retry-After` (seconds or an HTTP date)."""
    try:
        if headers.get("retry-after-ms"):
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
    except ValueError:
        pass
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _tls_reason(error: ssl.SSLError) -> str:
    verify = getattr(error, "verify_message", None)
    reason = (getattr(error, "reason", None) or "").replace("_", " ").lower()
    if verify:
        return f"{reason or 'certificate verify failed'} ({verify})"
    return reason or str(error)


def _host(base_url: Any) -> str:
    """host:port of the endpoint (never its path or credentials)."""
    host = getattr(base_url, "host", None)
    if not host:
        return "the configured address"
    port = getattr(base_url, "port", None)
    return f"{host}:{port}" if port else host
