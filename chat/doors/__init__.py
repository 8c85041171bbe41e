"""The doors: each way in to the server, thin, in a folder of its own (pages, the JSON API, the
socket, server-sent events, the OpenAI-compatible API, the OpenAPI document). A door
authenticates (chat.accounts), reads its request, and hands runs to the front door (chat.runs);
none knows how a run is stored or supervised. `errors.py` answers the errors of all of them."""
