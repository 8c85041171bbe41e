"""bench/doors.py: the MCP and A2A doors' readers tell answer text from the other messages, and the
end of the run from its outcome."""

from __future__ import annotations

from bench.doors import a2a_read, mcp_read


def progress(message: str) -> dict:
    params = {"progressToken": "bench", "progress": 3, "message": message}
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}


def test_mcp_text_is_a_progress_notification_of_a_text_event_and_the_result_ends_the_call():
    assert mcp_read(progress("0@1796671776.1 1@1796671776.2 ")) == ("0@1796671776.1 1@1796671776.2 ", None)
    assert mcp_read(progress("calling calculator")) == ("", None)
    assert mcp_read(progress("complete: succeeded")) == ("", None)
    result = {"jsonrpc": "2.0", "id": 1, "result": {"structuredContent": {"status": "succeeded"}}}
    assert mcp_read(result) == ("", "")
    failed = {"jsonrpc": "2.0", "id": 1, "result": {"structuredContent": {"status": "failed"}, "isError": True}}
    assert mcp_read(failed) == ("", "failed")
    assert mcp_read({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602}}) == ("", "error -32602")


def test_a2a_text_is_an_artifact_update_and_a_final_status_ends_the_stream():
    chunk = {"artifactUpdate": {"artifact": {"artifactId": "answer", "parts": [{"text": "0@1.0 "}]}, "append": False}}
    assert a2a_read({"jsonrpc": "2.0", "id": 1, "result": chunk}) == ("0@1.0 ", None)
    working = {"statusUpdate": {"status": {"state": "TASK_STATE_WORKING"}}}
    assert a2a_read({"jsonrpc": "2.0", "id": 1, "result": working}) == ("", None)
    assert a2a_read({"jsonrpc": "2.0", "id": 1, "result": {"task": {"id": "t"}}}) == ("", None)
    done = {"statusUpdate": {"status": {"state": "TASK_STATE_COMPLETED"}}}
    assert a2a_read({"jsonrpc": "2.0", "id": 1, "result": done}) == ("", "")
    failed = {"statusUpdate": {"status": {"state": "TASK_STATE_FAILED"}}}
    assert a2a_read({"jsonrpc": "2.0", "id": 1, "result": failed}) == ("", "TASK_STATE_FAILED")
