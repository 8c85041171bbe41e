"""chat.agent.answer: the one rule for which text is the answer."""

from __future__ import annotations

from chat.agent.answer import Answer, without_discarded


def _text(seq, content):
    return {"type": "text", "content": content, "seq": seq}


def test_a_failed_model_call_discards_only_the_text_of_its_own_attempt():
    answer = Answer()
    events = [
        {"type": "user_message", "content": "q", "seq": 1},
        _text(2, "Let me check. "),
        {"type": "tool_start", "toolName": "t", "toolCallId": "c", "arguments": "{}", "seq": 3},
        {"type": "tool_end", "toolName": "t", "toolCallId": "c", "result": "1", "isError": False, "seq": 4},
        _text(5, "The ans"),
        {"type": "thinking", "content": "hmm", "seq": 6},
        _text(7, "wer is"),
    ]
    assert [answer.add(e) for e in events] == [[]] * len(events)
    assert [e["seq"] for e in answer.attempt] == [5, 7]
    discarded = answer.add({"type": "error", "code": "LLM_CALL_FAILED", "message": "m", "seq": 8})
    assert [e["seq"] for e in discarded] == [5, 7]
    answer.add(_text(9, "The answer is 1."))
    assert answer.text == "Let me check. The answer is 1."


def test_a_resumed_interruption_discards_but_cancel_and_a_final_interruption_keep_the_text():
    for error, kept in [
        ({"type": "error", "code": "INTERRUPTED", "message": "m", "resumed": True}, ""),
        ({"type": "error", "code": "INTERRUPTED", "message": "m"}, "half"),
        ({"type": "error", "code": "CANCELLED", "message": "m"}, "half"),
        ({"type": "error", "code": "MAX_ITERATIONS", "message": "m"}, "half"),
    ]:
        answer = Answer()
        answer.add(_text(2, "half"))
        answer.add(error)
        assert answer.text == kept, error


def test_without_discarded_drops_the_failed_attempts_text_and_keeps_everything_else():
    events = [
        _text(2, "a"),
        {"type": "error", "code": "LLM_CALL_FAILED", "message": "m", "seq": 3},
        {"type": "error", "code": "LLM_CALL_FAILED", "message": "m", "seq": 4},  # an attempt with no text
        _text(5, "b"),
    ]
    assert [e["seq"] for e in without_discarded(events)] == [3, 4, 5]
