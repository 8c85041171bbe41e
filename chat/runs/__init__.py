"""The run engine's front door: what a client asks of runs (start, cancel, approve), checked
(`client_frames.py`) and handed to the process's run registry with the refusal codes of the
protocol (`actions.py`). The socket, the HTTP runs and `/v1` all go through it; none of them
knows how a run is stored or supervised."""
