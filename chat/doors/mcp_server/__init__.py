"""The MCP server at /mcp (docs/protocol.md, "MCP server"): every agent a user may use as a tool
of an MCP client, each call a run started through the run engine's front door."""
