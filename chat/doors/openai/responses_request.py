"""The body of POST /v1/responses read into what a run start needs
(docs/protocol.md, "Responses API"): its input as the chat completion request it amounts to (chat.doors.openai.openai_shapes,
so that images, history and options are taken exactly as /v1/chat/completions takes them), and
the Responses options the run's user_message keeps as `request`. Raises BadRequest."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from chat.agent.turns import ModelOptions
from chat.agents.profiles import RANGES
from chat.doors.openai.openai_shapes import BadRequest, CompletionRequest, ImageURL, RequestMessage

ROLES = ("user", "assistant", "system", "developer")
# Items a client sends back from an earlier output: accepted, left out.
SENT_BACK = ("reasoning", "mcp_call", "mcp_list_tools")


@dataclass(frozen=True)
class ResponsesRequest:
    call: CompletionRequest
    background: bool = False
    instructions: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    previous_response_id: str | None = None
    conversation_id: str | None = None

    def recorded(self) -> dict[str, Any]:
        """The user_message's `request`."""
        kept: dict[str, Any] = {"metadata": self.metadata, "background": self.background}
        if self.instructions is not None:
            kept["instructions"] = self.instructions
        if self.previous_response_id is not None:
            kept["previousResponseId"] = self.previous_response_id
        if self.call.options.max_tokens is not None:
            kept["maxOutputTokens"] = self.call.options.max_tokens
        if self.call.options.temperature is not None:
            kept["temperature"] = self.call.options.temperature
        return kept


def _message(item: Mapping[str, Any], where: str) -> RequestMessage:
    role = item.get("role")
    if role not in ROLES:
        raise BadRequest("A message's role must be user, assistant, system or developer.", param=f"{where}.role")
    content = item.get("content")
    if isinstance(content, str):
        return RequestMessage("system" if role == "developer" else role, content)
    if not isinstance(content, list):
        raise BadRequest("content must be a string or a list of parts.", param=f"{where}.content")
    texts: list[str] = []
    images: list[ImageURL] = []
    for number, part in enumerate(content):
        at = f"{where}.content[{number}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text") and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "input_image" and role == "user":
            url = part.get("image_url")
            if not isinstance(url, str):
                raise BadRequest(
                    "An input_image needs image_url, a data: URL (file_id is not supported).",
                    param=f"{at}.image_url",
                    code="invalid_content",
                )
            images.append(ImageURL(url, f"{at}.image_url"))
        else:
            raise BadRequest(
                "A part must be input_text or output_text, or input_image in a user message.",
                param=at,
                code="invalid_content",
            )
    return RequestMessage("system" if role == "developer" else role, "".join(texts), tuple(images))


def _input(body: Mapping[str, Any]) -> list[RequestMessage]:
    given = body.get("input")
    if isinstance(given, str):
        return [RequestMessage("user", given)]
    if not isinstance(given, list) or not given:
        raise BadRequest("input must be a string or a non-empty list of items.", param="input")
    messages: list[RequestMessage] = []
    for index, item in enumerate(given):
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind in SENT_BACK:
            continue
        if kind != "message" or not isinstance(item, dict):
            raise BadRequest(
                "input items must be messages (reasoning, mcp_call and mcp_list_tools are left out).",
                param=f"input[{index}]",
                code="invalid_input",
            )
        messages.append(_message(item, f"input[{index}]"))
    if not messages or messages[-1].role != "user" or not messages[-1].content.strip():
        raise BadRequest(
            "The last message of input must be the user's, with text.", param="input", code="invalid_input"
        )
    return messages


def _options(body: Mapping[str, Any]) -> ModelOptions:
    low, high = RANGES["temperature"]
    temperature = body.get("temperature")
    if temperature is not None and (
        isinstance(temperature, bool) or not isinstance(temperature, int | float) or not low <= temperature <= high
    ):
        raise BadRequest(f"temperature must be a number from {low:g} to {high:g}.", param="temperature")
    fewest, most = RANGES["max_tokens"]
    cap = body.get("max_output_tokens")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or not fewest <= cap <= most):
        raise BadRequest(
            f"max_output_tokens must be an integer from {fewest:g} to {most:g}.", param="max_output_tokens"
        )
    return ModelOptions(temperature=None if temperature is None else float(temperature), max_tokens=cap)


def _metadata(body: Mapping[str, Any]) -> dict[str, str]:
    metadata = body.get("metadata")
    if metadata is None:
        return {}
    if (
        not isinstance(metadata, dict)
        or len(metadata) > 16
        or not all(isinstance(k, str) and len(k) <= 64 for k in metadata)
        or not all(isinstance(v, str) and len(v) <= 512 for v in metadata.values())
    ):
        raise BadRequest(
            "metadata: at most 16 string pairs, keys at most 64 and values at most 512 characters.",
            param="metadata",
        )
    return metadata


def _refusals(body: Mapping[str, Any]) -> None:
    if body.get("tools"):
        raise BadRequest(
            "Client tools are not supported: the agent runs its own tools.", param="tools", code="tools_not_supported"
        )
    if body.get("tool_choice") not in (None, "auto"):
        raise BadRequest(
            "Client tools are not supported: the agent runs its own tools.",
            param="tool_choice",
            code="tools_not_supported",
        )
    text = body.get("text")
    if text is not None and (not isinstance(text, dict) or text.get("format", {"type": "text"}) != {"type": "text"}):
        raise BadRequest("Only text output is supported.", param="text.format", code="unsupported_parameter")
    if body.get("prompt") is not None:
        raise BadRequest("Stored prompts are not supported.", param="prompt", code="unsupported_parameter")


def responses_request(body: Any) -> ResponsesRequest:
    """The request of POST /v1/responses, checked."""
    if not isinstance(body, dict):
        raise BadRequest("The body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("model must be an agent's slug (GET /v1/models).", param="model")
    _refusals(body)
    messages = _input(body)
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise BadRequest("instructions must be a string.", param="instructions")
        if len(instructions) > settings.AGENT_MAX_MESSAGE_CHARS:
            raise BadRequest(
                f"instructions are longer than {settings.AGENT_MAX_MESSAGE_CHARS} characters.",
                param="instructions",
                code="context_length_exceeded",
            )
    previous = body.get("previous_response_id")
    if previous is not None and not isinstance(previous, str):
        raise BadRequest("previous_response_id must be a string.", param="previous_response_id")
    conversation = body.get("conversation")
    if isinstance(conversation, dict):
        conversation = conversation.get("id")
    if conversation is not None and not isinstance(conversation, str):
        raise BadRequest("conversation must be a conversation id.", param="conversation")
    if conversation is not None and previous is not None:
        raise BadRequest("Give conversation or previous_response_id, not both.", param="conversation")
    last = messages.pop()
    call = CompletionRequest(
        model=model,
        content=last.content,
        history=tuple(messages),
        images=last.images,
        stream=body.get("stream") is True,
        options=_options(body),
    )
    return ResponsesRequest(
        call,
        background=body.get("background") is True,
        instructions=instructions,
        metadata=_metadata(body),
        previous_response_id=previous,
        conversation_id=conversation,
    )
