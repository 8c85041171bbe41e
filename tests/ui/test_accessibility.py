"""Accessibility in a real browser: axe-core finds no serious or critical violation on any page
of the product, light and dark, at 1280x800 and 390x844 (tests/ui/axe.py); the rules broken
per state, at every impact, are printed as a table at the end (artifacts/a11y/violations.txt).

Each entry of PAGES brings a page to one state; a new page is one more entry, most often
`"name": at("/path/", "selector shown once it is ready")`.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.harness import answer_text
from tests.fakellm import text_reply, tool_call_reply
from tests.ui.axe import IMPACTS, SCREENSHOTS, audit
from tests.ui.conftest import ROOT, PageWatch
from tests.ui.test_images import png
from tests.ui.test_shares import make_link, open_share_dialog, seed_shared
from tests.ui.test_timeline import assert_clean, last_turn, send, unique

pytestmark = pytest.mark.browser


class HoldAfterFirstText:
    """A WebSocket proxy that passes frames to the page until the answer's first text, then
    holds the rest until release(): the page stays in the middle of a streaming answer."""

    def __init__(self, page):
        self.holding = False
        self.held: list[str] = []
        self.page_side = None
        page.route_web_socket(re.compile(r".*/ws/chat/.*"), self.route)

    def route(self, ws) -> None:
        self.page_side = ws
        ws.connect_to_server().on_message(self.from_server)

    def from_server(self, message) -> None:
        if self.holding:
            self.held.append(message)
            return
        self.page_side.send(message)
        self.holding = json.loads(message).get("type") == "text"

    def release(self) -> None:
        self.holding = False
        for message in self.held:
            self.page_side.send(message)
        self.held.clear()


def make_staff(page, env) -> None:
    """The page's user becomes staff (tests/ui/seed_inspector.py, with runs of other users)."""
    subprocess.run(
        [sys.executable, "-m", "tests.ui.seed_inspector", page.username],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )


# Code with a line longer than a phone is wide, and a table wider than one: both scroll sideways.
ANSWER = f"""6 × 7 is **42**; 1/0 is undefined.

```python
print(6 * 7)  # {"a comment as long as a line can be " * 3}
```

| {" | ".join(f"column {i}" for i in range(12))} |
|{"---|" * 12}
| {" | ".join(str(i * 7) for i in range(12))} |
"""


@dataclass
class UI:
    """What a page state is built from: the signed-up user's page and the UI tests' fixtures."""

    page: Any
    replies: Any
    env: dict[str, str]
    new_context: Any
    server: Any


def finished_with_tools(ui: UI) -> None:
    message = unique("What is 6 * 7 and 1/0?")
    ui.replies.set(
        message,
        tool_call_reply(("calculator", {"expression": "6*7"}), ("calculator", {"expression": "1/0"})),
        text_reply(ANSWER, piece=12),
    )
    send(ui.page, message)
    turn = last_turn(ui.page)
    expect(turn).not_to_have_class(re.compile("is-running"))
    expect(turn.locator(".feedback")).to_be_visible()
    turn.locator(".timeline-summary").click()  # the folded timeline, opened with a tool's details
    turn.locator("li.tl-tool summary").first.click()
    expect(turn.locator(".tool-detail").first).to_contain_text("42")


def at(path: str, ready: str, *, signed_in: bool = True, staff: bool = False) -> Callable[[UI], Any]:
    """A state: a page at `path` once `ready` (a selector) shows, for the user (or staff), or signed out."""

    def state(ui: UI):
        page = ui.page
        if not signed_in:
            page = ui.new_context().new_page()
            page.watch = PageWatch(page, ui.server.base)
        if staff:
            make_staff(page, ui.env)
        page.goto(path)
        expect(page.locator(ready).first).to_be_visible()
        return page

    return state


def chat_streaming(ui: UI) -> None:
    HoldAfterFirstText(ui.page)
    ui.page.reload()
    message = unique("Stream a long answer")
    ui.replies.set(message, text_reply("A long answer, " * 40, piece=8))
    send(ui.page, message)
    expect(last_turn(ui.page).locator(".answer")).to_contain_text("A long")
    expect(ui.page.locator("#stop-button")).to_be_visible()


def chat_approval(ui: UI) -> None:
    message = unique("List the files")
    ui.replies.set(message, tool_call_reply(("bash", {"command": "ls -la"})), text_reply("Listed."))
    send(ui.page, message)
    expect(last_turn(ui.page).locator("li.tl-approval")).to_have_attribute("data-state", "pending")


FAILING = {"status": 500, "body": {"error": {"message": "upstream overloaded"}}}


def chat_retries(ui: UI) -> None:
    """A run that recovered after two retries: warning rows in the open timeline, a discarded answer."""
    earlier = ui.replies.set(unique("Hello first"), text_reply("Hello."))
    send(ui.page, earlier)
    expect(last_turn(ui.page).locator(".answer")).to_have_text("Hello.")
    broken = {"chunks": [{"delta": {"content": "Partial words"}}], "truncate_after": 1}
    message = ui.replies.set(unique("Flaky then fine"), broken, FAILING, text_reply("The full answer."))
    send(ui.page, message)
    turn = last_turn(ui.page)
    expect(turn.locator(".answer")).to_have_text("The full answer.")
    expect(turn.locator("li.tl-error")).to_have_count(2)


def chat_failed(ui: UI) -> None:
    """A run whose every attempt failed: error rows, the failure said under it."""
    send(ui.page, ui.replies.set(unique("Always failing"), FAILING))
    turn = last_turn(ui.page)
    expect(turn.locator(".turn-status")).to_have_text("The run failed.", timeout=20000)


def chat_versions(ui: UI) -> None:
    """An answer regenerated and a message edited: both version switchers shown."""
    message = ui.replies.set(unique("Versions"), text_reply("Take 1."), text_reply("Take 2."))
    send(ui.page, message)
    turn = last_turn(ui.page)
    expect(turn.locator(".answer")).to_have_text("Take 1.")
    turn.locator("[data-action=regenerate]").click()
    expect(ui.page.locator("article.turn:visible").last.locator(".answer-actions .version-label")).to_have_text("2 / 2")
    turn = ui.page.locator("article.turn:visible").last
    turn.get_by_role("button", name="Edit this message").click()
    turn.get_by_role("textbox", name="Edit your message").fill(ui.replies.set(unique("Edited"), text_reply("Edited.")))
    turn.locator(".edit-form").get_by_role("button", name="Send").click()
    turn = ui.page.locator("article.turn:visible").last
    expect(turn.locator(".answer")).to_have_text("Edited.")
    expect(turn.locator(".msg-user .version-label")).to_have_text("2 / 2")


def chat_composer_files(ui: UI) -> None:
    """Files to send in the composer, one an image its agent will not see (said under them)."""
    page = ui.page
    page.locator("#attach-input").set_input_files(
        [
            {"name": "notes.txt", "mimeType": "text/plain", "buffer": b"buy milk"},
            {"name": "photo.png", "mimeType": "image/png", "buffer": png(40, 30, "teal")},
        ]
    )
    expect(page.locator("#attachment-list .chip[data-status=ready]")).to_have_count(2)
    expect(page.locator("#attach-note")).to_be_visible()
    page.fill("#message-input", "What are these?")


def shared_page(ui: UI):
    """A conversation's shared link, opened signed out."""
    cid = seed_shared(ui.env, ui.page.username)
    ui.page.goto(f"/?c={cid}")
    expect(ui.page.locator("article.turn").first).to_be_visible()
    open_share_dialog(ui.page)
    url = make_link(ui.page)
    visitor = ui.new_context().new_page()
    visitor.watch = PageWatch(visitor, ui.server.base)
    visitor.goto(url)
    expect(visitor.locator("article.turn").first).to_be_visible()
    return visitor


def make_admin(ui: UI) -> str:
    """The page's user becomes a superuser with a profile of no tools (tests/ui/seed_admin.py); its pk."""
    result = subprocess.run(
        [sys.executable, "-m", "tests.ui.seed_admin", ui.page.username],
        cwd=ROOT, env=ui.env, check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return result.stdout.split()[-1]


def admin_profile_add(ui: UI) -> None:
    make_admin(ui)
    ui.page.goto("/admin/chat/agentprofile/add/")
    expect(ui.page.locator("#id_tools")).to_be_visible()


def admin_profile_saved_without_tools(ui: UI) -> None:
    """The change form, saved with no tools: its warning on top."""
    pk = make_admin(ui)
    ui.page.goto(f"/admin/chat/agentprofile/{pk}/change/")
    ui.page.locator("input[name=_continue]").click()
    expect(ui.page.locator(".messagelist .warning")).to_contain_text("has no tools")


def admin_group_add(ui: UI) -> None:
    make_admin(ui)
    ui.page.goto("/admin/auth/group/add/")
    expect(ui.page.locator("#id_name")).to_be_visible()


def inspector_run(ui: UI) -> None:
    finished_with_tools(ui)
    at(f"/inspect/?user={ui.page.username}", "tr.run-row", staff=True)(ui)
    ui.page.locator("tr.run-row a").first.click()
    expect(ui.page.locator("#replay article.turn")).to_be_visible()


# Each state returns the page to check, or None for the user's page.
PAGES: dict[str, Callable[[UI], Any]] = {
    "sign-in": at("/accounts/login/", "#id_username", signed_in=False),
    "sign-up": at("/accounts/signup/", "#id_password2", signed_in=False),
    "chat-empty": at("/", "#empty-state"),
    "account": at("/account/", "main h1"),
    "password-change": at("/accounts/password_change/", "#id_old_password"),
    "chat-streaming": chat_streaming,
    "chat-finished-with-tools": finished_with_tools,
    "chat-approval": chat_approval,
    "chat-retries": chat_retries,
    "chat-failed": chat_failed,
    "chat-versions": chat_versions,
    "chat-composer-files": chat_composer_files,
    "share": shared_page,
    "inspector-runs": at("/inspect/", "tr.run-row", staff=True),
    "inspector-run": inspector_run,
    "inspector-dashboard": at("/inspect/dashboard/", ".chart", staff=True),
    "admin-profile-add": admin_profile_add,
    "admin-profile-saved-without-tools": admin_profile_saved_without_tools,
    "admin-group-add": admin_group_add,
}

# The rules each state broke, by impact: printed as a table when the module's tests are done.
TABLE: dict[str, dict[str, int]] = {}


@pytest.fixture(scope="module", autouse=True)
def violation_table(request):
    yield
    if not TABLE:
        return
    lines = [
        "axe-core: rules broken per state (1280x800 and 390x844, light and dark)",
        f"{'state':<36} {'critical':>8} {'serious':>8} {'moderate':>8} {'minor':>8}",
    ]
    for name, counts in TABLE.items():
        lines.append(f"{name:<36} " + " ".join(f"{counts.get(impact, 0):>8}" for impact in IMPACTS))
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    (SCREENSHOTS / "violations.txt").write_text("\n".join(lines) + "\n")
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():  # past the capture of the fixture's teardown
            reporter.write_line("")
            for line in lines:
                reporter.write_line(line)


@pytest.mark.parametrize("name", PAGES)
def test_no_serious_accessibility_violation(name, user_page, replies, ui_env, new_context, ui_server):
    ui = UI(page=user_page, replies=replies, env=ui_env, new_context=new_context, server=ui_server)
    page = PAGES[name](ui) or user_page
    TABLE[name] = counts = {}
    audit(page, name, counts)
    assert_clean(page)


# Every text a live region of the page holds after a change, in order: what a screen reader says.
LIVE_REGION_RECORDER = """
window.__spoken = [];
const LIVE = '[aria-live]:not([aria-live="off"]), [role=status], [role=log], [role=alert]';
new MutationObserver((records) => {
  const regions = new Set();
  for (const record of records) {
    const node = record.target.nodeType === Node.ELEMENT_NODE ? record.target : record.target.parentElement;
    const region = node && node.closest(LIVE);
    if (region) regions.add(region);
  }
  for (const region of regions) {
    const text = region.textContent.trim();
    if (text) window.__spoken.push(text);
  }
}).observe(document, {subtree: true, childList: true, characterData: true});
"""


def ax_properties(page, selector: str) -> dict[str, Any]:
    """The accessibility properties chromium gives the element (live, busy, ...), from its own tree."""
    cdp = page.context.new_cdp_session(page)
    root = cdp.send("DOM.getDocument")["root"]["nodeId"]
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    ax = cdp.send("Accessibility.getPartialAXTree", {"nodeId": node, "fetchRelatives": False})["nodes"][0]
    cdp.detach()
    return {prop["name"]: prop["value"].get("value") for prop in ax.get("properties", [])}


def test_a_streaming_answer_is_announced_once_politely_when_finished(user_page, replies):
    page = user_page
    page.add_init_script(LIVE_REGION_RECORDER)
    proxy = HoldAfterFirstText(page)
    page.reload()
    message = unique("Count to sixty")
    words = answer_text(60).strip()
    replies.set(message, text_reply(f"**{words[:4]}** {words[5:]}", piece=5))
    send(page, message)
    answer = last_turn(page).locator(".answer")
    expect(answer).to_contain_text("w00")  # the first text frame may hold one piece: "**w00"

    # Streaming: the answer is marked busy and is no live region; nothing has said any of it.
    expect(answer).to_have_attribute("aria-busy", "true")
    assert ax_properties(page, "article.turn:last-child .answer").get("busy")
    assert "live" not in ax_properties(page, "article.turn:last-child .answer")
    assert ax_properties(page, "#sr-status")["live"] == "polite"
    assert [said for said in page.evaluate("window.__spoken") if "w000" in said] == []

    proxy.release()
    expect(answer).to_have_text(words)
    expect(answer).to_have_attribute("aria-busy", "false")
    # Finished: the polite status says so, with the answer's words (not its Markdown), once.
    finished = f"The answer is complete. {words}"
    expect(page.locator("#sr-status")).to_have_text(finished)
    assert [said for said in page.evaluate("window.__spoken") if "w000" in said] == [finished]
    assert_clean(page)


def tab_to(page, target, *, backwards: bool = False, limit: int = 80) -> None:
    """Presses Tab (or Shift+Tab) until `target` has the focus: fails if the keyboard cannot reach it."""
    handle = target.element_handle()
    for _ in range(limit):
        if page.evaluate("(element) => document.activeElement === element", handle):
            return
        page.keyboard.press("Shift+Tab" if backwards else "Tab")
    raise AssertionError(f"{target} not reached in {limit} presses of {'Shift+Tab' if backwards else 'Tab'}")


def shown_turns(page):
    return page.locator("article.turn:visible")


def test_everything_by_keyboard_alone(user_page, replies, shot):
    """Send a message, open its timeline and a tool row, approve a call, regenerate an answer and
    switch between its versions: Tab, Shift+Tab, typing, Enter and Space only, no pointer."""
    page = user_page
    composer = page.get_by_role("textbox", name="Message")
    first, second = unique("Add 2 and 3"), unique("List the workspace")
    replies.set(first, tool_call_reply(("calculator", {"expression": "2+3"})), text_reply("It is 5."))
    replies.set(
        second,
        tool_call_reply(("bash", {"command": "ls"})),
        text_reply("Listed, take 1."),
        text_reply("Listed, take 2."),
    )

    # Send a message.
    tab_to(page, composer)
    page.keyboard.type(first)
    page.keyboard.press("Enter")
    turn = last_turn(page)
    expect(turn.locator(".answer")).to_have_text("It is 5.")
    expect(turn).not_to_have_class(re.compile("is-running"))

    # Open the folded timeline, then the tool call's row.
    tab_to(page, turn.locator("summary", has_text="1 tool call"), backwards=True)
    page.keyboard.press("Enter")
    tool_row = turn.locator("li.tl-tool summary", has_text="calculator")
    tab_to(page, tool_row)
    page.keyboard.press("Enter")
    expect(turn.locator(".tool-detail")).to_contain_text('"expression": "2+3"')
    shot(page, "keyboard-tool-row")

    # Approve a call.
    tab_to(page, composer)
    page.keyboard.type(second)
    page.keyboard.press("Enter")
    turn = last_turn(page)
    expect(turn.locator("li.tl-approval")).to_have_attribute("data-state", "pending")
    tab_to(page, turn.get_by_role("button", name="Approve"), backwards=True)
    shot(page, "keyboard-approve")
    page.keyboard.press("Enter")
    expect(turn.locator("li.tl-approval")).to_have_attribute("data-state", "approved")
    expect(turn.locator(".answer")).to_have_text("Listed, take 1.")

    # Regenerate the answer, then switch back to its first version and forward again (the answer's
    # switcher, under the answer: a regenerate makes versions of the answer).
    tab_to(page, turn.get_by_role("button", name="Regenerate"), backwards=True)
    page.keyboard.press("Enter")
    newest = shown_turns(page).last
    expect(newest.locator(".answer")).to_have_text("Listed, take 2.", timeout=20000)
    expect(newest).not_to_have_class(re.compile("is-running"))
    tab_to(page, newest.get_by_role("button", name="Previous answer"), backwards=True)
    page.keyboard.press("Space")
    expect(shown_turns(page).last.locator(".answer")).to_have_text("Listed, take 1.")
    # The focus moved to the shown version's switch (its "previous" is disabled: to "next").
    tab_to(page, shown_turns(page).last.get_by_role("button", name="Next answer"), limit=1)
    page.keyboard.press("Enter")
    expect(shown_turns(page).last.locator(".answer")).to_have_text("Listed, take 2.")
    shot(page, "keyboard-versions")
    assert_clean(page)
