"""The run runtime: how one user message becomes a stored, published run.

The modules in the order a message flows through them:

- registry.py     the process's run table: batched starts, cancel, shutdown
- execution.py    one run: memory -> agent -> sink -> outcome
- sink.py         a run's events, text/thinking deltas coalesced
- clock.py        the shared coalescing window of every sink of the process
- writer.py       group commit: the waiting batches of every run in one transaction
- doorbell.py     group names and publishing stored frames to the sockets
- supervision.py  heartbeat, the reaper (closes or resumes dead processes' runs),
                  the cancel listener, SIGTERM
- batching.py     the queue-and-drain helper under the registry, the clock and the writer
- approvals.py    where a run's open approval requests wait for the user's answer
- lifecycle.py    the registry started with the first connection a process serves
- build.py        the Agent of one run: model client, tools, MCP sources, approvals, hooks
- image_parts.py  the memory's image references turned into image parts for the model
- titles.py       a conversation's title, asked after its first answer
- head_start.py   a conversation's first message: its run begun while its start is stored

See docs/architecture.md, "chat/runtime/".
"""
