"""The Django side of agents: an agent profile (profiles.py, edited with form.py; an agent's
memory budget), read for a user (selectors.py), and the per-user tool-call rate
(tool_limits.py). The agent of a run is built from a profile by chat.runtime.build. See
docs/tools.md, "Agent profiles"."""
