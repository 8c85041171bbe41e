"""Tool registry: JSON schema from type hints, argument validation, context injection."""

from __future__ import annotations

import enum
from typing import Annotated, Literal

import pydantic
import pytest

from chat.agent import ToolContext, ToolRegistry
from chat.agent.tools import ToolError, error_result, make_tool, result_to_text


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Place(pydantic.BaseModel):
    city: str
    country: str = "FR"


async def forecast(
    place: Place,
    days: int,
    unit: Unit = Unit.CELSIUS,
    detail: Literal["short", "long"] = "short",
    note: Annotated[str, pydantic.Field(description="free text")] = "",
    ctx: ToolContext = None,
) -> dict:
    """Weather forecast.

    Several lines of description.
    """
    return {
        "city": place.city,
        "country": place.country,
        "days": days,
        "unit": unit.value,
        "detail": detail,
        "conversation": ctx.conversation_id,
    }


def test_schema_from_type_hints():
    spec = make_tool(forecast).spec()
    assert spec["type"] == "function"
    function = spec["function"]
    assert function["name"] == "forecast"
    assert function["description"] == "Weather forecast.\n\nSeveral lines of description."
    params = function["parameters"]
    assert params["type"] == "object"
    assert params["required"] == ["place", "days"]  # the ones without defaults
    assert params["additionalProperties"] is False
    assert set(params["properties"]) == {"place", "days", "unit", "detail", "note"}  # ctx is hidden
    assert params["properties"]["days"] == {"type": "integer"}
    assert params["properties"]["detail"] == {"default": "short", "enum": ["short", "long"], "type": "string"}
    assert params["properties"]["note"] == {"default": "", "description": "free text", "type": "string"}
    assert params["properties"]["place"] == {"$ref": "#/$defs/Place"}
    assert params["$defs"]["Place"]["required"] == ["city"]
    assert params["$defs"]["Unit"]["enum"] == ["celsius", "fahrenheit"]
    assert "title" not in params


async def test_arguments_are_validated_and_converted():
    tool = make_tool(forecast)
    result = await tool.run(
        '{"place": {"city": "Lyon"}, "days": "3", "unit": "fahrenheit"}', ToolContext(conversation_id="c1")
    )
    assert result == {
        "city": "Lyon",
        "country": "FR",
        "days": 3,
        "unit": "fahrenheit",
        "detail": "short",
        "conversation": "c1",
    }


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ('{"place": {"city": "Lyon"}, "days": 1, "extra": 1}', "extra: Extra inputs are not permitted"),
        ('{"place": {"city": "Lyon"}}', "days: Field required"),
        ('{"place": {"city": "Lyon"}, "days": 1, "detail": "medium"}', "detail: Input should be 'short' or 'long'"),
        ('{"place": {}, "days": 1}', "place.city: Field required"),
        ('{"place": {"city": "Lyon"}, "days": 1, "ctx": {}}', "ctx: Extra inputs are not permitted"),
    ],
)
def test_bad_arguments_are_tool_errors(raw, message):
    with pytest.raises(ToolError, match="invalid arguments for forecast") as exc:
        make_tool(forecast).parse_arguments(raw)
    assert message in str(exc.value)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("[1, 2]", "arguments must be a JSON object"),
        ("not json", "arguments are not valid JSON: Expecting value at position 0"),
    ],
)
def test_non_object_arguments(raw, message):
    with pytest.raises(ToolError, match=message):
        make_tool(forecast).parse_arguments(raw)


def test_empty_arguments_mean_no_arguments():
    async def ping() -> str:
        return "pong"

    assert make_tool(ping).parse_arguments("  ") == {}
    assert make_tool(ping).spec()["function"]["parameters"]["properties"] == {}
    assert make_tool(ping).spec()["function"]["description"] == "ping"  # no docstring: the name


def test_non_async_function_is_refused():
    def sync_tool(x: int) -> int:
        return x

    with pytest.raises(TypeError, match="must be an async function"):
        make_tool(sync_tool)


def test_var_args_are_refused():
    async def loose(*args, **kwargs) -> None:
        return None

    with pytest.raises(TypeError, match=r"\*args and \*\*kwargs"):
        make_tool(loose)


def test_registry_decorator_options_and_lookup():
    registry = ToolRegistry()

    @registry.tool
    async def first(x: int) -> int:
        return x

    @registry.tool(name="second_tool", description="The second.", timeout=2.5)
    async def second() -> str:
        return ""

    assert first.__name__ == "first"  # the decorator returns the function itself
    assert registry.names() == ["first", "second_tool"]
    assert len(registry) == 2 and "second_tool" in registry and "second" not in registry
    assert registry.get("second_tool").timeout == 2.5
    assert registry.get("missing") is None
    assert [s["function"]["description"] for s in registry.specs()] == ["first", "The second."]
    assert registry.subset(["second_tool", "nope"]).names() == ["second_tool"]
    with pytest.raises(ValueError, match="registered twice"):
        registry.add(make_tool(first))


def test_results_to_text():
    assert result_to_text("plain") == "plain"
    assert result_to_text(42) == "42"
    assert result_to_text({"ü": [1, None]}) == '{"ü": [1, null]}'
    assert result_to_text(Place(city="Nice")) == '{"city":"Nice","country":"FR"}'
    assert error_result('bad "x"') == '{"error": "bad \\"x\\""}'
