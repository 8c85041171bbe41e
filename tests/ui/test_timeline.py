"""The timeline in a real browser: streaming, tools, folding, errors, Stop, refresh, tabs, reconnect."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from playwright.sync_api import expect

from tests.e2e.harness import answer_text, slow_text_reply
from tests.fakellm import text_reply, tool_call_reply

pytestmark = pytest.mark.browser

# Records every state each tool item of the page goes through, live.
TOOL_STATES_RECORDER = """
window.__toolStates = {};
new MutationObserver((records) => {
  for (const node of document.querySelectorAll("li.tl-tool")) {
    const id = node.dataset.toolCallId, status = node.dataset.status;
    const seen = (window.__toolStates[id] = window.__toolStates[id] || []);
    if (seen[seen.length - 1] !== status) seen.push(status);
  }
}).observe(document, {subtree: true, childList: true, attributes: true, attributeFilter: ["data-status"]});
"""


class HoldAfterToolStart:
    """A WebSocket proxy that holds the frames after each tool_start until release():
    the tool's running state stays on screen however fast the tool is."""

    def __init__(self, page):
        self.held: list[str] = []
        self.holding = False
        self.page_side = None
        page.route_web_socket(re.compile(r".*/ws/chat/.*"), self.route)

    def route(self, ws) -> None:
        self.page_side = ws
        server = ws.connect_to_server()
        server.on_message(self.from_server)

    def from_server(self, message) -> None:
        if self.holding:
            self.held.append(message)
            return
        self.page_side.send(message)
        if json.loads(message).get("type") == "tool_start":
            self.holding = True

    def release(self) -> None:
        self.holding = False
        for message in self.held:
            self.page_side.send(message)
        self.held.clear()


def unique(text: str) -> str:
    return f"{text} [{uuid.uuid4().hex[:6]}]"


def send(page, message: str) -> None:
    page.fill("#message-input", message)
    expect(page.locator("#send-button")).to_be_enabled()  # connected, nothing running
    page.press("#message-input", "Enter")


def last_turn(page):
    return page.locator("article.turn").last


def assert_clean(page) -> None:
    assert page.watch.console_errors == [], page.watch.console_errors
    assert page.watch.dialogs == [], page.watch.dialogs
    assert page.watch.foreign_requests == [], page.watch.foreign_requests


def conversation_id(page) -> str:
    page.wait_for_url(re.compile(r".*\?c=[0-9a-f-]{36}$"))
    return page.url.rsplit("=", 1)[1]


ANSWER = """The product is **42**.

```python
def multiply(a, b):
    return a * b  # 6 * 7
```

| a | b | a*b |
|---|---|-----|
| 6 | 7 | 42 |

- first item
- second item
"""


def test_message_thinking_tool_answer_and_fold(user_page, replies, shot):
    page = user_page
    page.add_init_script(TOOL_STATES_RECORDER)
    proxy = HoldAfterToolStart(page)
    page.reload()
    message = unique("What is 6 * 7?")
    thinking = "The user wants a product. I will use the calculator to check."
    replies.set(
        message,
        {
            "chunks": [
                *[{"delta": {"reasoning_content": thinking[i : i + 3]}} for i in range(0, len(thinking), 3)],
                *tool_call_reply(("calculator", {"expression": "6 * 7"}))["chunks"],
            ],
            "delay": 0.03,
        },
        slow_text_reply(ANSWER, chunks=40, delay=0.04),
    )
    expect(page.locator("#send-button")).to_be_disabled()  # nothing typed yet
    page.fill("#message-input", "line one")
    page.press("#message-input", "Shift+Enter")
    page.type("#message-input", "line two")
    assert page.input_value("#message-input") == "line one\nline two"  # Shift+Enter: a newline, not sent
    assert page.locator("article.turn").count() == 0
    send(page, message)

    turn = last_turn(page)
    expect(turn.locator(".msg-user .bubble")).to_have_text(message)
    timeline = turn.locator("details.timeline")
    expect(timeline).to_have_attribute("open", "")
    expect(turn.locator(".thinking-text")).to_contain_text("I will use the calculator")
    # While it runs: the composer stays open, Send waits with its reason, Stop offered, sidebar mark.
    expect(page.locator("#message-input")).to_be_editable()
    expect(page.locator("#send-button")).to_be_disabled()
    expect(page.locator("#composer-reason")).to_contain_text("Enter queues your message for after this answer")
    expect(page.locator("#stop-button")).to_be_visible()
    expect(page.locator(".conv-item.active.running")).to_have_count(1)
    tool = turn.locator("li.tl-tool")
    expect(tool).to_have_attribute("data-status", "running")
    expect(tool.locator(".status-icon.running")).to_be_visible()
    expect(timeline.locator(".tl-label")).to_contain_text("Running calculator")
    shot(page, "01-tool-running")
    proxy.release()
    expect(tool).to_have_attribute("data-status", "done", timeout=15000)
    expect(tool.locator(".status-icon.done")).to_be_visible()

    # The answer streams in as Markdown, then the timeline folds away.
    answer = turn.locator(".answer")
    expect(answer.locator("strong")).to_have_text("42", timeout=15000)
    shot(page, "02-answer-streaming")
    expect(timeline).not_to_have_attribute("open", "", timeout=15000)
    expect(turn).not_to_have_class(re.compile("is-running"))
    expect(answer.locator(".code-block pre code.hljs .hljs-keyword").first).to_have_text("def")
    expect(answer.locator(".code-block .copy-btn")).to_have_count(1)
    expect(answer.locator("table td")).to_have_count(3)
    expect(answer.locator("ul > li")).to_have_count(2)
    expect(timeline.locator(".tl-counts")).to_contain_text("1 tool call")
    expect(page.locator("#message-input")).to_be_enabled()
    expect(page.locator("#stop-button")).to_be_hidden()
    expect(page.locator(".conv-item.active.running")).to_have_count(0)
    assert page.evaluate("window.__toolStates")["call_0"] == ["running", "done"]
    shot(page, "03-answer-folded")

    # Keyboard: the folded timeline opens again from its summary; tool details on click.
    timeline.locator("summary.timeline-summary").focus()
    page.keyboard.press("Enter")
    expect(timeline).to_have_attribute("open", "")
    page.evaluate("document.activeElement.blur()")
    shot(page, "04-timeline-reopened")
    tool.locator("summary").click()
    expect(tool.locator(".tool-detail")).to_contain_text('"expression": "6 * 7"')
    expect(tool.locator(".tool-detail")).to_contain_text("42")
    shot(page, "04b-tool-details")
    page.emulate_media(color_scheme="dark")
    shot(page, "04c-tool-details-dark")
    page.emulate_media(color_scheme="light")

    # Copy button puts the code on the clipboard.
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    answer.locator(".copy-btn").click()
    expect(answer.locator(".copy-btn")).to_have_text("Copied")
    assert "def multiply" in page.evaluate("navigator.clipboard.readText()")
    assert_clean(page)


def test_error_retries_keep_timeline_open(user_page, replies, shot):
    page = user_page
    message = unique("Flaky model")
    failing = {"status": 500, "body": {"error": {"message": "upstream overloaded"}}}
    replies.set(message, failing, failing, text_reply("Recovered after two retries.", piece=5))
    send(page, message)
    turn = last_turn(page)
    expect(turn.locator(".answer")).to_have_text("Recovered after two retries.", timeout=15000)
    expect(turn).not_to_have_class(re.compile("is-running"))
    timeline = turn.locator("details.timeline")
    expect(timeline).to_have_attribute("open", "")
    errors = turn.locator("li.tl-error")
    expect(errors).to_have_count(2)
    expect(errors.first.locator(".badge")).to_have_text("retry 1 of 3")
    expect(errors.nth(1).locator(".badge")).to_have_text("retry 2 of 3")
    expect(errors.first).to_contain_text("LLM_CALL_FAILED")
    expect(timeline.locator(".tl-label")).to_have_text("Recovered after 2 retries")
    expect(timeline.locator(".tl-counts")).not_to_contain_text("retries")  # said once, by the label
    shot(page, "05-error-retries-open")

    # A run that fails for good: timeline open, the failure said under it.
    message = unique("Broken model")
    replies.set(message, failing)  # the last reply repeats: every attempt fails
    send(page, message)
    turn = last_turn(page)
    expect(turn.locator(".turn-status")).to_have_text("The run failed.", timeout=15000)
    expect(turn.locator("details.timeline")).to_have_attribute("open", "")
    expect(turn.locator("li.tl-error")).to_have_count(4)  # 3 retries announced + the final one
    expect(turn.locator("li.tl-error.is-warning")).to_have_count(3)  # only the final failure is red
    expect(turn.locator(".tl-label")).to_have_text("Finished with errors")
    expect(page.locator("#message-input")).to_be_enabled()
    shot(page, "06-run-failed")
    assert page.watch.dialogs == []


RAW_CODE = re.compile(r"\b(CANCELLED|INTERRUPTED|LLM_CALL_FAILED|MAX_ITERATIONS)\b")


def expect_codes_only_as_badges(turn, codes: list[str]) -> None:
    """Each error row of the turn reads as words; its code is only the small badge beside them."""
    rows = turn.locator("li.tl-error")
    expect(rows).to_have_count(len(codes))
    for index, code in enumerate(codes):
        row = rows.nth(index)
        expect(row.locator(".code-badge")).to_have_text(code)
        title = row.locator(".tl-title > span").first.inner_text()
        assert title and not RAW_CODE.search(title), title
        detail = row.locator(".error-detail")
        assert detail.count() == 0 or not RAW_CODE.search(detail.inner_text()), detail.inner_text()


def test_error_codes_are_badges_never_the_rows_words(user_page, replies, shot):
    page = user_page
    failing = {"status": 500, "body": {"error": {"message": "upstream overloaded"}}}
    message = unique("Broken for good")
    replies.set(message, failing)  # every attempt fails: three retries, then the final failure
    send(page, message)
    turn = last_turn(page)
    expect(turn.locator(".turn-status")).to_have_text("The run failed.", timeout=15000)
    expect_codes_only_as_badges(turn, ["LLM_CALL_FAILED"] * 4)
    expect(turn.locator("li.tl-error .tl-title > span").first).to_have_text("The model did not answer; trying again")
    expect(turn.locator("li.tl-error").last.locator(".tl-title > span").first).to_have_text("The model did not answer")
    expect(turn.locator("li.tl-error").last.locator(".error-detail")).to_contain_text("gave up after 3 retries")
    shot(page, "h-error-codes-llm")

    message = unique("Loop forever")
    replies.set(message, tool_call_reply(("calculator", {"expression": "1+1"})))  # never a final answer
    send(page, message)
    turn = last_turn(page)
    expect(turn.locator(".turn-status")).to_have_text("The run failed.", timeout=30000)
    expect_codes_only_as_badges(turn, ["MAX_ITERATIONS"])
    turn.locator("li.tl-error").scroll_into_view_if_needed()
    shot(page, "h-error-codes-max-iterations")

    message = unique("Calculate, then talk at length")
    replies.set(
        message,
        tool_call_reply(("calculator", {"expression": "2+2"})),
        slow_text_reply(answer_text(300), chunks=300, delay=0.05),
    )
    send(page, message)
    turn = last_turn(page)
    expect(turn.locator(".answer")).to_contain_text("w005", timeout=15000)
    page.click("#stop-button")
    expect(turn.locator(".turn-status")).to_have_text("Stopped.", timeout=15000)
    turn.locator(".timeline-summary").click()  # a stopped run's timeline is folded: open it
    expect_codes_only_as_badges(turn, ["CANCELLED"])
    shot(page, "h-error-codes-cancelled")
    assert_clean(page)


def test_stop_cancels_the_run(user_page, replies, shot):
    page = user_page
    message = unique("Tell me a long story")
    replies.set(message, slow_text_reply(answer_text(300), chunks=300, delay=0.05))
    send(page, message)
    turn = last_turn(page)
    expect(turn.locator(".answer")).to_contain_text("w010", timeout=15000)
    page.click("#stop-button")
    expect(turn.locator(".turn-status")).to_have_text("Stopped.", timeout=15000)
    expect(page.locator("#stop-button")).to_be_hidden()
    expect(page.locator("#message-input")).to_be_enabled()
    text = turn.locator(".answer").inner_text()
    assert "w299" not in text
    page.wait_for_timeout(500)
    assert turn.locator(".answer").inner_text() == text  # nothing more arrives
    shot(page, "07-stopped")
    assert_clean(page)


def test_refresh_mid_run_shows_history_and_live_rest(user_page, replies):
    page = user_page
    first = unique("First question")
    replies.set(first, text_reply("First answer.", piece=4))
    send(page, first)
    expect(last_turn(page).locator(".answer")).to_have_text("First answer.")
    message = unique("Count slowly")
    expected = answer_text(120)
    replies.set(message, slow_text_reply(expected, chunks=120, delay=0.03))
    send(page, message)
    expect(last_turn(page).locator(".answer")).to_contain_text("w020", timeout=15000)
    page.reload()
    expect(page.locator("article.turn")).to_have_count(2)
    expect(page.locator("article.turn").first.locator(".answer")).to_have_text("First answer.")
    running = last_turn(page)
    expect(running).to_have_class(re.compile("is-running"))
    expect(page.locator("#stop-button")).to_be_visible()
    expect(running.locator(".answer")).to_have_text(expected.strip(), timeout=20000)
    expect(running).not_to_have_class(re.compile("is-running"))
    assert_clean(page)


def test_two_pages_on_one_conversation_show_the_same(user_page, replies, shot):
    page = user_page
    message = unique("Shared run")
    expected = answer_text(80)
    replies.set(
        message,
        tool_call_reply(("calculator", {"expression": "2+2"})),
        slow_text_reply(expected, chunks=80, delay=0.03),
    )
    send(page, message)
    cid = conversation_id(page)
    expect(last_turn(page).locator(".answer")).to_contain_text("w005", timeout=15000)
    other = page.context.new_page()
    other.goto(f"/?c={cid}")
    for each in (page, other):
        expect(last_turn(each).locator(".answer")).to_have_text(expected.strip(), timeout=20000)
        expect(last_turn(each)).not_to_have_class(re.compile("is-running"))
    assert page.locator("li.tl-item").count() == other.locator("li.tl-item").count() == 1
    # A message sent from the second page appears on the first.
    second = unique("From the other tab")
    replies.set(second, text_reply("Seen everywhere.", piece=3))
    send(other, second)
    expect(last_turn(page).locator(".msg-user .bubble")).to_have_text(second)
    expect(last_turn(page).locator(".answer")).to_have_text("Seen everywhere.")
    assert page.locator("article.turn").count() == other.locator("article.turn").count() == 2
    assert_clean(page)


def test_reconnect_after_the_socket_drops(user_page, replies, shot):
    page = user_page
    sockets = []

    def proxy(ws):
        sockets.append(ws)
        ws.connect_to_server()

    page.route_web_socket(re.compile(r".*/ws/chat/.*"), proxy)
    message = unique("Survive a drop")
    expected = answer_text(150)
    replies.set(message, slow_text_reply(expected, chunks=150, delay=0.03))
    send(page, message)
    conversation_id(page)
    turn = last_turn(page)
    expect(turn.locator(".answer")).to_contain_text("w030", timeout=15000)
    sockets[-1].close(code=1006, reason="network gone")
    expect(page.locator("#connection-status")).to_have_attribute("data-mode", re.compile("waiting|connecting"))
    expect(page.locator("#connection-text")).to_contain_text(re.compile("Reconnecting|Connecting"))
    shot(page, "08-reconnecting")
    expect(page.locator("#connection-status")).to_have_attribute("data-mode", "live", timeout=15000)
    expect(turn.locator(".answer")).to_have_text(expected.strip(), timeout=20000)
    assert len(sockets) >= 2
    after = int(re.search(r"after=(\d+)", sockets[-1].url).group(1))
    assert after > 1, sockets[-1].url
    assert page.locator("article.turn").count() == 1
    assert_clean(page)


def test_a_finished_turn_shows_its_time_and_tokens(user_page, replies):
    page = user_page
    message = unique("How long and how much?")
    reply = text_reply("Counted.", piece=4)
    usage = {"prompt_tokens": 1200, "completion_tokens": 34, "total_tokens": 1234}
    replies.set(message, {**reply, "chunks": [*reply["chunks"], {"usage": usage}]})
    send(page, message)
    turn = last_turn(page)
    footer = turn.locator(".turn-footer")
    expect(footer).to_have_text(re.compile(r"^\d+\.\d s · 1,234 tokens$"), timeout=15000)
    shown = footer.inner_text()  # read before the reload: after it, the footer is drawn anew
    page.reload()  # the same from the stored complete
    expect(last_turn(page).locator(".turn-footer")).to_have_text(shown, timeout=15000)
    assert_clean(page)


def test_the_sidebar_shows_the_users_own_tokens_today_and_this_month(user_page, replies):
    page = user_page
    line = page.locator("#usage-line")
    expect(line).to_have_text("0 tokens today · 0 this month", timeout=15000)  # a new user
    message = unique("Count my tokens")
    reply = text_reply("Counted.", piece=4)
    usage = {"prompt_tokens": 1200, "completion_tokens": 34, "total_tokens": 1234}
    replies.set(message, {**reply, "chunks": [*reply["chunks"], {"usage": usage}]})
    send(page, message)
    # Refreshed when the run finishes, from the stored model calls.
    expect(line).to_have_text("1,234 tokens today · 1,234 this month", timeout=15000)
    page.reload()
    expect(page.locator("#usage-line")).to_have_text("1,234 tokens today · 1,234 this month", timeout=15000)
    assert_clean(page)


# Records the answer's length at every animation frame that changed it (what reached the screen).
ANSWER_SAMPLER = """
window.__answerLengths = [];
const sample = () => {
  const answers = document.querySelectorAll("article.turn .answer");
  const length = answers.length ? answers[answers.length - 1].textContent.length : 0;
  const seen = window.__answerLengths;
  if (length && seen[seen.length - 1] !== length) seen.push(length);
  requestAnimationFrame(sample);
};
requestAnimationFrame(sample);
"""


def test_a_live_answer_is_drawn_at_an_even_pace_and_ends_whole(user_page, replies, shot):
    page = user_page
    message = unique("Pace yourself")
    expected = answer_text(150)
    replies.set(message, slow_text_reply(expected, chunks=150, delay=0.02))  # 3 s, windows up to 500 ms
    text_frames = []
    page.on(
        "websocket",
        lambda ws: ws.on(
            "framereceived",
            lambda payload: text_frames.append(payload) if '"type":"text"' in str(payload) else None,
        ),
    )
    page.reload()  # the socket opened after the listener
    page.wait_for_selector("#message-input")
    page.evaluate(ANSWER_SAMPLER)
    send(page, message)
    turn = last_turn(page)
    expect(turn.locator(".answer")).to_contain_text("w060", timeout=15000)
    shot(page, "h-stream-paced-answer-mid-stream")
    expect(turn.locator(".answer")).to_have_text(expected.strip(), timeout=20000)
    expect(turn).not_to_have_class(re.compile("is-running"))
    lengths = page.evaluate("window.__answerLengths")
    assert lengths == sorted(lengths)  # only ever grows
    # Drawn between the frames as well as at them: more screen updates than text frames came.
    assert 0 < len(text_frames) < len(lengths), (len(text_frames), len(lengths))
    assert len(text_frames) < 40  # the growing windows: ~150 deltas in about a dozen frames
    page.reload()  # the replay of the finished run shows the same answer at once
    expect(last_turn(page).locator(".answer")).to_have_text(expected.strip())
    assert_clean(page)


def test_an_answer_cut_off_by_the_token_limit_says_so_and_continue_asks_for_the_rest(user_page, replies, shot):
    page = user_page
    message = unique("Why is the sky blue?")
    cut = {"chunks": [{"delta": {"content": "The sky is blue. It has to"}}, {"finish_reason": "length"}]}
    replies.set(message, cut)
    send(page, message)
    turn = page.locator("article.turn").first  # the first turn, also once there is a second
    note = turn.locator(".turn-cut")
    expect(note).to_be_visible(timeout=30000)
    expect(note).to_contain_text("Cut off by the token limit.")
    expect(turn.locator(".answer")).to_have_text("The sky is blue. It has to")
    shot(page, "cut-off-answer-1280")
    page.set_viewport_size({"width": 390, "height": 844})
    shot(page, "cut-off-answer-390")
    page.set_viewport_size({"width": 1280, "height": 800})

    replies.set("Continue", text_reply(" scatter light."))
    note.get_by_role("button", name="Continue").click()
    expect(page.locator("article.turn")).to_have_count(2)
    expect(last_turn(page).locator(".msg-user .bubble")).to_have_text("Continue")
    expect(last_turn(page).locator(".answer")).to_have_text("scatter light.", timeout=30000)
    expect(last_turn(page).locator(".turn-cut")).to_be_hidden()  # a whole answer
    expect(note).to_be_visible()  # the first answer stays marked ...
    expect(note.get_by_role("button", name="Continue")).to_be_hidden()  # ... but only the last one continues
    page.reload()  # the same from the stored events
    first = page.locator("article.turn").first.locator(".turn-cut")
    expect(first).to_contain_text("Cut off by the token limit.", timeout=30000)
    expect(last_turn(page).locator(".turn-cut")).to_be_hidden()
    assert_clean(page)
