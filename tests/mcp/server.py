"""A real MCP server for the tests, written with the SDK's MCPServer (FastMCP in mcp 1.x).

    python server.py stdio [--once FLAG]     serve over stdin/stdout
    python server.py http PORT               serve streamable HTTP on 127.0.0.1:PORT/mcp

`--once FLAG`: start only if the file FLAG does not exist yet (and create it), so that a test can
make the first start succeed and every restart fail.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ImageContent, TextContent

# The smallest valid PNG: one transparent pixel.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)

server = MCPServer("testserver")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool(name="get.weather")
def get_weather(city: str) -> str:
    """A tool whose name has a character the model's tool names may not have."""
    return f"sunny in {city}"


@server.tool()
def fail(message: str) -> list:
    """Answer with an error result (isError), as a tool that failed does."""
    from mcp.types import CallToolResult

    return CallToolResult(content=[TextContent(type="text", text=f"cannot do that: {message}")], is_error=True)


@server.tool()
def crash() -> str:
    """The server process dies in the middle of the call."""
    os._exit(3)


@server.tool()
async def hang(seconds: float = 3600) -> str:
    """Take far longer than any timeout."""
    await anyio.sleep(seconds)
    return "woke up"


@server.tool()
def pid() -> int:
    """This server process's id: a new one means the server was restarted."""
    return os.getpid()


@server.tool()
def environment() -> str:
    """The names (and MCP_TEST_* values) of this server's environment variables."""
    return json.dumps({name: value if name.startswith("MCP_TEST_") else "" for name, value in os.environ.items()})


@server.tool()
def picture() -> list:
    """Text and an image."""
    return [
        TextContent(type="text", text="here is a pixel"),
        ImageContent(type="image", data=base64.b64encode(PIXEL).decode(), mime_type="image/png"),
    ]


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool called `name` and announce that the tool list changed."""

    def added(text: str) -> str:
        return text.upper()

    server.add_tool(added, name=name, description="Upper-cases a text.")
    await ctx.notify_tools_changed()
    return f"added {name}"


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        if "--once" in sys.argv:
            flag = Path(sys.argv[sys.argv.index("--once") + 1])
            if flag.exists():
                sys.exit("this server starts only once")
            flag.touch()
        server.run("stdio")
    else:
        server.settings.log_level = "WARNING"  # uvicorn's access log would fill the test output
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
