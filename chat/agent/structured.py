"""Structured answers: the `response_format` a model call asks for (from a pydantic model class
or a JSON schema), and the final answer checked against it."""

from __future__ import annotations

import json
from typing import Any

import pydantic


def response_format_of(spec: Any) -> dict[str, Any] | None:
    if spec is None:
        return None
    if isinstance(spec, type) and issubclass(spec, pydantic.BaseModel):
        return {
            "type": "json_schema",
            "json_schema": {"name": spec.__name__, "schema": spec.model_json_schema(), "strict": False},
        }
    if isinstance(spec, dict) and spec.get("type") in ("json_schema", "json_object"):
        return spec
    if isinstance(spec, dict):
        return {"type": "json_schema", "json_schema": {"name": "answer", "schema": spec, "strict": False}}
    raise TypeError("response_format must be a pydantic model class or a JSON schema dict")


def validate_structured(spec: Any, text: str) -> Any:
    """Parse the final answer against the requested format; ValueError says why it does not fit."""
    if isinstance(spec, type) and issubclass(spec, pydantic.BaseModel):
        try:
            return spec.model_validate_json(text)
        except pydantic.ValidationError as exc:
            raise ValueError(str(exc)) from None
    data = json.loads(text)
    schema = spec.get("json_schema", {}).get("schema", spec) if spec.get("type") == "json_schema" else spec
    if isinstance(schema, dict) and schema.get("type") == "object":
        if not isinstance(data, dict):
            raise ValueError("the answer is not a JSON object")
        missing = [key for key in schema.get("required", []) if key not in data]
        if missing:
            raise ValueError(f"the answer misses required keys: {', '.join(missing)}")
    return data
