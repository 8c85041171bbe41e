"""The run engine's front door: the only way to start, cancel or answer a run. A door builds one
typed request (`requests.py`, reading a client's frame with `client_frames.py`) and hands it to
`engine.py`, which answers with the protocol's refusal codes; a start is queued and stored with
others (`starter.py`, `starts.py`) after its rules (`admission.py`: the agent, the rate, the
quota, one run per conversation), then executed by the run registry (chat.runtime). The socket,
the HTTP runs and `/v1` all go through it; none of them knows how a run is stored or supervised."""
