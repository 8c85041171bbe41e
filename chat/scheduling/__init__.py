"""Work that starts on its own (docs/protocol.md, "Schedules"): a door like the socket, whose
runs start through the one front door (chat.runs.engine).

- timing.py   cron, `every` and `at`: reading them and finding the next slot
- services.py creating, changing and reading a user's schedules
- firing.py   claiming due slots (exactly once across processes) and starting their runs
- poller.py   each server process's loop that fires due schedules
- triggers.py creating, changing and reading a user's triggers (docs/protocol.md, "Triggers")
- hooks.py    a trigger's call: its secret checked, the payload filled in, its run started
"""
