"""The OpenAI-compatible door: /v1/models and /v1/chat/completions, each call a run through chat.runs."""
