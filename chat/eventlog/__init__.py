"""The event log, the one truth of every conversation (docs/architecture.md, "eventlog/"):
events appended with their seq (append.py), run starts (starts.py), heartbeat, release and
take-over of runs (takeover.py), reads (reads.py), the model's memory derived from the log
(history.py, memory.py), versions of turns (versions.py), search documents (search.py) and
the frame every client receives (frames.py). Only the runtime and chat.conversations write
here."""
