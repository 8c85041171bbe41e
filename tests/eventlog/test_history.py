"""The model's memory, derived from events."""

from itertools import groupby

from chat.eventlog.history import run_messages


def messages_from_events(events):
    """Chat messages of the given events, run by run in the order given (as a run's memory is made)."""
    return [
        message
        for _, run_events in groupby(events, key=lambda e: e["runId"])
        for message in run_messages(list(run_events))
    ]


def ev(run, kind, **fields):
    return {"type": kind, "runId": run, **fields}


def test_a_plain_answer():
    events = [
        ev("r1", "user_message", content="hi"),
        ev("r1", "thinking", content="hmm"),
        ev("r1", "text", content="Hel"),
        ev("r1", "text", content="lo"),
        ev("r1", "complete", status="succeeded"),
    ]
    assert messages_from_events(events) == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello"},
    ]


def test_tool_rounds_keep_call_order_and_results():
    events = [
        ev("r1", "user_message", content="q"),
        ev("r1", "text", content="Let me check."),
        ev("r1", "tool_start", toolName="a", toolCallId="c1", arguments="{}"),
        ev("r1", "tool_start", toolName="b", toolCallId="c2", arguments='{"x": 1}'),
        ev("r1", "tool_end", toolName="b", toolCallId="c2", result="B", isError=False, durationMs=1),
        ev("r1", "tool_end", toolName="a", toolCallId="c1", result="A", isError=False, durationMs=1),
        ev("r1", "tool_start", toolName="a", toolCallId="c3", arguments="{}"),
        ev("r1", "tool_end", toolName="a", toolCallId="c3", result='{"error": "x"}', isError=True, durationMs=1),
        ev("r1", "text", content="Done."),
        ev("r1", "complete", status="succeeded"),
    ]
    assert messages_from_events(events) == [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "a", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "b", "arguments": '{"x": 1}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "A"},
        {"role": "tool", "tool_call_id": "c2", "content": "B"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c3", "type": "function", "function": {"name": "a", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c3", "content": '{"error": "x"}'},
        {"role": "assistant", "content": "Done."},
    ]


def test_a_failed_run_keeps_the_question_and_an_unfinished_tool_gets_a_result():
    events = [
        ev("r1", "user_message", content="q1"),
        ev("r1", "error", code="LLM_CALL_FAILED", message="m", detail="d"),
        ev("r1", "complete", status="failed"),
        ev("r2", "user_message", content="q2"),
        ev("r2", "tool_start", toolName="a", toolCallId="c1", arguments="{}"),
        ev("r2", "complete", status="interrupted"),
    ]
    assert messages_from_events(events) == [
        {"role": "user", "content": "q1"},
        {"role": "user", "content": "q2"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "a", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"error": "the tool did not finish"}'},
    ]


def test_text_of_a_failed_attempt_is_not_memory():
    events = [
        ev("r1", "user_message", content="q"),
        ev("r1", "text", content="The ans"),
        ev("r1", "error", code="LLM_CALL_FAILED", message="retrying (1/3)", detail="truncated"),
        ev("r1", "text", content="The answer."),
        ev("r1", "complete", status="succeeded"),
    ]
    assert messages_from_events(events) == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "The answer."},
    ]


def test_a_resumed_run_forgets_the_answer_its_dead_process_had_begun():
    events = [
        ev("r1", "user_message", content="q"),
        ev("r1", "tool_start", toolName="a", toolCallId="c1", arguments="{}"),
        ev("r1", "tool_end", toolName="a", toolCallId="c1", result="A", isError=False, durationMs=1),
        ev("r1", "text", content="The answer is hal"),
        ev("r1", "error", code="INTERRUPTED", message="stopped", detail="w", resumed=True),
        ev("r1", "text", content="The answer is A."),
        ev("r1", "complete", status="succeeded"),
    ]
    assert messages_from_events(events) == [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "a", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "A"},
        {"role": "assistant", "content": "The answer is A."},
    ]


def test_a_call_denied_at_approval_is_in_memory_with_its_denial():
    denial = '{"error": "denied by the user: no"}'
    events = [
        ev("r1", "user_message", content="q"),
        ev("r1", "approval_request", toolName="bash", toolCallId="c1", arguments='{"command": "ls"}', expiresAt="x"),
        ev("r1", "approval_request", toolName="bash", toolCallId="c2", arguments='{"command": "rm"}', expiresAt="x"),
        ev("r1", "approval_result", toolCallId="c1", decision="approved", reason=""),
        ev("r1", "approval_result", toolCallId="c2", decision="denied", reason="no"),
        ev("r1", "tool_start", toolName="calculator", toolCallId="c3", arguments="{}"),
        ev("r1", "tool_start", toolName="bash", toolCallId="c1", arguments='{"command": "ls"}'),
        ev("r1", "tool_end", toolName="bash", toolCallId="c2", result=denial, isError=True, durationMs=0),
        ev("r1", "tool_end", toolName="calculator", toolCallId="c3", result="1", isError=False, durationMs=1),
        ev("r1", "tool_end", toolName="bash", toolCallId="c1", result="a.txt", isError=False, durationMs=1),
        ev("r1", "text", content="Done."),
        ev("r1", "complete", status="succeeded"),
    ]
    messages = messages_from_events(events)
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["c1", "c2", "c3"]  # one round
    assert messages[2:5] == [
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        {"role": "tool", "tool_call_id": "c2", "content": denial},
        {"role": "tool", "tool_call_id": "c3", "content": "1"},
    ]
    assert messages[5] == {"role": "assistant", "content": "Done."}
