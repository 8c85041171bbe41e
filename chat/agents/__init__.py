"""The Django side of agents: an agent profile (profiles.py, edited with form.py), read for a
user (selectors.py), built into a chat.agent Agent with its tools, MCP sources, approvals and
rate limit (build.py, tool_limits.py). See docs/tools.md, "Agent profiles"."""
