"""Structured output: a pydantic model or JSON schema as the answer's format."""

from __future__ import annotations

import pydantic
import pytest

from chat.agent import Agent
from tests.fakellm import text_reply

from .helpers import run_events


class City(pydantic.BaseModel):
    city: str
    population_millions: float


async def test_request_carries_the_json_schema(fake_llm, make_agent):
    fake_llm.load("structured_valid")
    await run_events(make_agent(response_format=City).stream("Biggest French city?"))
    assert fake_llm.requests[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "City", "schema": City.model_json_schema(), "strict": False},
    }


async def test_valid_answer_gives_the_model_instance(fake_llm, make_agent):
    fake_llm.load("structured_valid")
    run = make_agent(response_format=City).stream("Biggest French city?")
    events = await run_events(run)
    assert events == [
        {"type": "text", "content": '{"city": "Paris", '},
        {"type": "text", "content": '"population_millions": 2.1}'},
        {"type": "complete", "status": "succeeded"},
    ]
    assert run.result.structured == City(city="Paris", population_millions=2.1)


async def test_invalid_answer_fails_the_run(fake_llm, make_agent):
    fake_llm.load("structured_invalid")
    run = make_agent(response_format=City).stream("Biggest French city?")
    events = await run_events(run)
    assert [e["type"] for e in events] == ["text", "error", "complete"]
    assert events[1]["code"] == "INVALID_OUTPUT"
    assert events[1]["message"] == "The answer does not match the requested format."
    assert "population_millions" in events[1]["detail"]
    assert events[2] == {"type": "complete", "status": "failed"}
    assert run.result.status == "failed" and run.result.structured is None


async def test_not_json_at_all_fails_the_run(fake_llm, make_agent):
    fake_llm.script(text_reply("Paris, about 2 million."))
    run = make_agent(response_format=City).stream("x")
    events = await run_events(run)
    assert events[-2]["code"] == "INVALID_OUTPUT" and events[-1]["status"] == "failed"


SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


@pytest.mark.parametrize(
    ("answer", "ok"), [('{"city": "Rome"}', True), ('{"town": "Rome"}', False), ('["Rome"]', False), ("Rome", False)]
)
async def test_dict_schema(fake_llm, make_agent, answer, ok):
    fake_llm.script(text_reply(answer))
    run = make_agent(response_format=SCHEMA).stream("x")
    events = await run_events(run)
    assert fake_llm.requests[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": SCHEMA, "strict": False},
    }
    if ok:
        assert run.result.structured == {"city": "Rome"} and events[-1]["status"] == "succeeded"
    else:
        assert events[-2]["code"] == "INVALID_OUTPUT" and events[-1]["status"] == "failed"


async def test_json_object_format_is_passed_through(fake_llm, make_agent):
    fake_llm.script(text_reply('{"any": 1}'))
    run = make_agent(response_format={"type": "json_object"}).stream("x")
    await run_events(run)
    assert fake_llm.requests[0]["response_format"] == {"type": "json_object"}
    assert run.result.structured == {"any": 1}


def test_other_formats_are_refused(chat_model):
    with pytest.raises(TypeError):
        Agent(chat_model, response_format=str)
