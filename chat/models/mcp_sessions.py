"""Sessions of the MCP server's handshake era (docs/protocol.md, "MCP server"), kept in the
database so that every server process serves every request of a session: the SDK's own session
manager keeps its sessions in one process's memory (chat.doors.mcp_server.gate says why it is
mounted stateless). A session belongs to the token that opened it and goes with it."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class McpSession(models.Model):
    """One `initialize` handshake: the SHA-256 of its `Mcp-Session-Id` (the value is a bearer
    secret of the session, like a token's), the token and user that opened it, its version."""

    digest = models.CharField(max_length=64, primary_key=True)
    token = models.ForeignKey("chat.ApiToken", on_delete=models.CASCADE, related_name="mcp_sessions")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    protocol_version = models.CharField(max_length=16)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(default=timezone.now, db_index=True)

    def __str__(self) -> str:
        return f"MCP session of token {self.token_id} ({self.protocol_version})"


class McpCall(models.Model):
    """A `tools/call` of a session and the run it started, so that the session's
    `notifications/cancelled` {"requestId"} finds the run from whichever process receives it.
    `request_id` is the JSON of the JSON-RPC id (1 and "1" are different requests)."""

    session = models.ForeignKey(McpSession, on_delete=models.CASCADE, related_name="calls")
    request_id = models.CharField(max_length=200)
    # None: the client's cancel came before the call's run was recorded (the call cancels it then).
    run = models.ForeignKey("chat.Run", on_delete=models.CASCADE, related_name="+", null=True)
    # The client cancelled the call: its run ends cancelled, and the call gets no result.
    cancelled = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "request_id"], name="mcp_call_once")]

    def __str__(self) -> str:
        return f"MCP call {self.request_id} → run {self.run_id}"
