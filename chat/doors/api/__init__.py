"""The JSON API under /api/: conversations, their events, files and exports, runs over HTTP, API tokens, the account."""
