"""The MCP client against real servers: discovery, calls through the agent loop with the fake model,
failures, restarts, timeouts, `tools/list_changed`, images and the stdio server's environment."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

from chat import mcp
from chat.agent import ToolContext
from chat.agent.events import CompleteEvent, ToolEndEvent, ToolStartEvent
from chat.runtime import build as assistant
from tests.fakellm import text_reply, tool_call_reply

from .conftest import raw_server, stdio_server


@pytest.fixture
async def model(llm_settings, mcp_sessions):
    """The assistant aimed at the fake model, with this loop's model client and MCP sessions closed after."""
    yield llm_settings
    await assistant.close_client()


async def run(fake_llm, *calls, context: ToolContext | None = None) -> list:
    """One run of the configured agent in which the fake model makes these tool calls, then answers."""
    fake_llm.script(tool_call_reply(*calls), text_reply("done"))
    events = [event async for event in assistant.build_agent().stream("go", context=context or ToolContext())]
    assert isinstance(events[-1], CompleteEvent) and events[-1].status == "succeeded"
    return events


def ends(events) -> list[ToolEndEvent]:
    """The tool_end events in the order their calls were started: parallel calls end in any order."""
    started = [event.tool_call_id for event in events if isinstance(event, ToolStartEvent)]
    ended = [event for event in events if isinstance(event, ToolEndEvent)]
    return sorted(ended, key=lambda end: started.index(end.tool_call_id))


def offered(request: dict) -> dict[str, dict]:
    return {tool["function"]["name"]: tool["function"] for tool in request.get("tools", [])}


def error_of(end: ToolEndEvent) -> str:
    assert end.is_error is True
    return json.loads(end.result)["error"]


async def test_tools_are_offered_as_server__tool_with_the_servers_schema(model, mcp_config):
    mcp_config({"t": stdio_server()})
    await run(model, ("t__add", {"a": 1, "b": 2}))
    tools = offered(model.requests[0])
    assert {"t__add", "t__fail", "t__crash", "t__hang", "t__pid", "t__picture", "t__grow"} <= set(tools)
    assert "calculator" in tools  # the built-ins stay
    # `get.weather` is not an allowed tool name for the model: sanitised.
    assert "t__get_weather" in tools and "t__get.weather" not in tools
    add = tools["t__add"]
    assert add["description"].startswith("Add two integers.")
    assert add["parameters"]["properties"] == {
        "a": {"title": "A", "type": "integer"},
        "b": {"title": "B", "type": "integer"},
    }
    assert add["parameters"]["required"] == ["a", "b"]


async def test_a_call_goes_through_the_server_and_back_to_the_model(model, mcp_config):
    mcp_config({"t": stdio_server()})
    events = await run(model, ("t__add", {"a": 2, "b": 40}), ("t__get_weather", {"city": "Oslo"}))
    starts = [event for event in events if isinstance(event, ToolStartEvent)]
    assert [start.tool_name for start in starts] == ["t__add", "t__get_weather"]
    add, weather = ends(events)
    assert (add.is_error, add.result) == (False, "42")
    assert (weather.is_error, weather.result) == (False, "sunny in Oslo")
    tool_messages = [m for m in model.requests[-1]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == ["42", "sunny in Oslo"]


async def test_is_error_results_are_tool_errors(model, mcp_config):
    mcp_config({"t": stdio_server()})
    (end,) = ends(await run(model, ("t__fail", {"message": "no disk"})))
    assert error_of(end) == "cannot do that: no disk"


async def test_arguments_the_server_rejects_are_a_tool_error(model, mcp_config):
    mcp_config({"t": stdio_server()})
    (end,) = ends(await run(model, ("t__add", {"a": "many"})))
    assert "validation error" in error_of(end)


async def test_one_session_is_shared_by_runs(model, mcp_config):
    mcp_config({"t": stdio_server()})
    # Each run calls the tool first, then answers: the reply depends on what its messages hold.
    model.responder = lambda body: (
        text_reply("done") if body["messages"][-1]["role"] == "tool" else tool_call_reply(("t__pid", {}))
    )

    async def one_run():
        return [event async for event in assistant.build_agent().stream("go", context=ToolContext())]

    runs = await asyncio.gather(*(one_run() for _ in range(3)))
    pids = {ends(events)[0].result for events in runs}
    assert len(pids) == 1 and next(iter(pids)).isdigit()
    assert len(mcp.get_servers().connections) == 1


async def test_a_crashed_server_gives_a_tool_error_and_is_restarted_on_next_use(model, mcp_config):
    mcp_config({"t": stdio_server()})
    (before,) = ends(await run(model, ("t__pid", {})))
    (crash,) = ends(await run(model, ("t__crash", {})))
    assert "the connection closed" in error_of(crash) and "restarted on next use" in error_of(crash)
    (after,) = ends(await run(model, ("t__pid", {})))
    assert after.is_error is False and after.result.isdigit() and after.result != before.result


async def test_a_hanging_call_times_out_and_the_server_is_restarted(model, mcp_config):
    mcp_config({"t": stdio_server()}, timeout=20)
    (before,) = ends(await run(model, ("t__pid", {})))
    (hang,) = ends(await run(model, ("t__hang", {})))
    assert "no answer within 20 s" in error_of(hang)
    (after,) = ends(await run(model, ("t__pid", {})))
    assert after.is_error is False and after.result != before.result


async def test_a_server_that_cannot_restart_gives_a_clear_tool_error(model, mcp_config, tmp_path):
    mcp_config({"t": stdio_server("--once", str(tmp_path / "started"))})
    ends(await run(model, ("t__crash", {})))
    # Its tools are still offered (the last listing), and calling one says why it fails.
    (end,) = ends(await run(model, ("t__add", {"a": 1, "b": 1})))
    assert "t__add" in offered(model.requests[-2])
    message = error_of(end)
    assert message.startswith("MCP server 't' could not start:")


async def test_a_server_that_never_starts_costs_only_its_own_tools(model, mcp_config, tmp_path):
    attempts = tmp_path / "attempts"
    start_and_exit = f"open({str(attempts)!r}, 'a').write('x'); raise SystemExit(3)"
    mcp_config({"broken": {"command": sys.executable, "args": ["-c", start_and_exit]}, "t": stdio_server()})
    (end,) = ends(await run(model, ("t__add", {"a": 1, "b": 1})))
    assert end.result == "2"
    assert not [name for name in offered(model.requests[0]) if name.startswith("broken__")]
    assert mcp.get_servers().connections["broken"].last_error.startswith("could not start: ")
    # The next run does not wait for another attempt so soon after a failed one.
    (end,) = ends(await run(model, ("t__add", {"a": 2, "b": 2})))
    assert end.result == "4" and attempts.read_text() == "x"


async def test_a_server_whose_command_is_not_found_leaves_the_others_serving(model, mcp_config):
    mcp_config({"ghost": {"command": "no-such-command-xyz"}, "t": stdio_server()})
    (end,) = ends(await run(model, ("t__add", {"a": 1, "b": 1})))
    assert end.result == "2"
    ghost = mcp.get_servers().connections["ghost"]  # kept, and tried: it may be installed later
    assert ghost.last_error == "could not start: 'no-such-command-xyz' is not found on PATH"


async def test_a_call_under_a_server_that_never_started_names_the_cause(model, mcp_config):
    """A model that calls a tool of a server that never started (from an earlier turn, or a guess)
    is told the server is down and why, not that the tool does not exist."""
    mcp_config({"ghost": {"command": "no-such-command-xyz"}, "t": stdio_server()})
    (end,) = ends(await run(model, ("ghost__search", {"q": "x"})))
    assert end.is_error is True
    assert error_of(end) == (
        "MCP server 'ghost' is not available: could not start: 'no-such-command-xyz' is not found on PATH"
    )
    # A name under a running server's prefix that it does not offer is still an unknown tool.
    (unknown,) = ends(await run(model, ("t__no_such_tool", {})))
    assert error_of(unknown).startswith("unknown tool 't__no_such_tool'")


async def test_list_changed_refreshes_the_tools(model, mcp_config):
    mcp_config({"t": stdio_server()})
    (grown,) = ends(await run(model, ("t__grow", {"name": "shout"})))
    assert grown.result == "added shout"
    assert "t__shout" not in offered(model.requests[0])
    for _ in range(50):  # the notification travels on its own stream
        if mcp.get_servers().connections["t"]._stale:
            break
        await asyncio.sleep(0.1)
    (end,) = ends(await run(model, ("t__shout", {"text": "hey"})))
    assert "t__shout" in offered(model.requests[-2]) and end.result == "HEY"


async def test_older_servers_list_changed_notification_and_garbage(model, mcp_config):
    """A server of the initialize-handshake era: its list_changed notification is heard, and an
    answer that is not a tool result is a clear error, after which the server is restarted."""
    mcp_config({"raw": raw_server()})
    (echo,) = ends(await run(model, ("raw__echo", {"text": "hi"})))
    assert echo.result == "hi"
    (garbage,) = ends(await run(model, ("raw__garbage", {})))
    assert "not a valid MCP result (content: Input should be a valid list" in error_of(garbage)
    (announce,) = ends(await run(model, ("raw__announce", {})))
    assert announce.result == "announced"
    for _ in range(50):
        if mcp.get_servers().connections["raw"]._stale:
            break
        await asyncio.sleep(0.1)
    await run(model, ("raw__echo", {"text": "again"}))
    assert "raw__later" in offered(model.requests[-2])


async def test_stdio_servers_get_no_secrets_from_the_environment(model, mcp_config, monkeypatch):
    for name in ("OPENAI_API_KEY", "SECRET_KEY", "DATABASE_URL", "TAVILY_API_KEY", "REDIS_URL"):
        monkeypatch.setenv(name, "secret-value")
    mcp_config({"t": stdio_server(env={"MCP_TEST_TOKEN": "given-by-config"})})
    (end,) = ends(await run(model, ("t__environment", {})))
    environment = json.loads(end.result)
    assert environment["MCP_TEST_TOKEN"] == "given-by-config"
    assert "PATH" in environment
    for name in ("OPENAI_API_KEY", "SECRET_KEY", "DATABASE_URL", "TAVILY_API_KEY", "REDIS_URL"):
        assert name not in environment


async def test_images_are_saved_into_the_workspace_and_named(model, mcp_config, tmp_path):
    from tests.mcp.server import PIXEL

    mcp_config({"t": stdio_server()})
    workspace = tmp_path / "ws"
    (end,) = ends(await run(model, ("t__picture", {}), context=ToolContext(workspace=workspace)))
    text, saved = end.result.split("\n")
    assert text == "here is a pixel"
    (path,) = list(workspace.iterdir())
    assert saved == f"[image saved to the workspace as {path.name} (image/png, {len(PIXEL)} bytes)]"
    assert path.name.startswith("mcp-t-") and path.suffix == ".png" and path.read_bytes() == PIXEL


async def test_streamable_http_server(model, mcp_config, http_server):
    mcp_config({"remote": {"url": http_server.url, "headers": {"X-Test": "1"}}})
    events = await run(model, ("remote__add", {"a": 20, "b": 22}), ("remote__fail", {"message": "nope"}))
    add, fail = ends(events)
    assert add.result == "42" and error_of(fail) == "cannot do that: nope"
    assert {"remote__add", "remote__pid", "remote__get_weather"} <= set(offered(model.requests[0]))
    # tools/list_changed over HTTP
    ends(await run(model, ("remote__grow", {"name": "loud"})))
    for _ in range(50):
        if mcp.get_servers().connections["remote"]._stale:
            break
        await asyncio.sleep(0.1)
    (loud,) = ends(await run(model, ("remote__loud", {"text": "x"})))
    assert loud.result == "X"


async def test_a_restarted_http_server_is_reconnected_on_next_use(model, mcp_config, http_server):
    mcp_config({"remote": {"url": http_server.url}})
    (before,) = ends(await run(model, ("remote__pid", {})))
    http_server.stop()
    (down,) = ends(await run(model, ("remote__pid", {})))
    assert "MCP server 'remote'" in error_of(down)
    await asyncio.to_thread(http_server.start)
    (after,) = ends(await run(model, ("remote__pid", {})))
    assert after.is_error is False and after.result != before.result
