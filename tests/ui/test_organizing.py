"""The sidebar's organizing and the first hour in a real browser: the agent chosen in a draft is
the one that runs, even when a file attached first creates the conversation, and quick switches
end on the last choice; a generated title comes into the list live; conversations are pinned and
archived from a row's menu; each row is one Tab stop whose actions the keyboard reaches; axe
finds nothing serious on these states. Screenshots of them go to /tmp/shots/convo/."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import expect

from tests.e2e.harness import Server, migrate, server_env
from tests.fakellm import FakeLLM, text_reply
from tests.ui.axe import audit
from tests.ui.conftest import ROOT, PageWatch, sign_up
from tests.ui.test_sidebar import list_rows, seed_dated
from tests.ui.test_timeline import assert_clean, conversation_id, last_turn, send, unique

pytestmark = pytest.mark.browser

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
SHOTS = Path("/tmp/shots/convo")


def snap(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), animations="disabled")


def item(page, title: str):
    return page.locator("li.conv-item", has=page.locator(".conv-title", has_text=title))


def api_get(page, path: str) -> dict:
    return page.evaluate("(path) => fetch(path).then((r) => r.json())", path)


# --- the agent that runs ------------------------------------------------------------------


@pytest.fixture(scope="module")
def research_llm():
    with FakeLLM() as fake:
        yield fake


def seed_profiles(env, username: str, base_a: str, base_b: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "tests.ui.seed_profiles", username, base_a, base_b],
        cwd=ROOT, env=env, check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


# Every PATCH the page sends is counted; the first one starts 300 ms late, so that sends made
# together would reach the server out of order (as a slow network may deliver them).
COUNT_PATCHES = """() => {
  const real = window.fetch;
  window.__patches = {sent: 0, done: 0, delayed: false};
  window.fetch = async (url, options = {}) => {
    if ((options.method || "GET") !== "PATCH") return real(url, options);
    window.__patches.sent += 1;
    if (!window.__patches.delayed) {
      window.__patches.delayed = true;
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
    try { return await real(url, options); } finally { window.__patches.done += 1; }
  };
}"""


def test_the_agent_chosen_in_the_draft_runs_when_a_file_is_attached_first(
    user_page, ui_env, replies, research_llm, fake_llm_server
):
    page = user_page
    seed_profiles(ui_env, page.username, fake_llm_server.base_url, research_llm.base_url)
    page.reload()
    picker = page.locator("#agent-select")
    researcher, coder = f"researcher-{page.username}", f"coder-{page.username}"
    picker.select_option(researcher)
    # The file is attached before anything is typed: its upload creates the conversation.
    page.set_input_files("#attach-input", files=[{"name": "notes.txt", "mimeType": "text/plain", "buffer": b"hi"}])
    expect(page.locator("#attachment-list .chip")).to_have_attribute("data-status", "ready")
    conversation = conversation_id(page)
    assert api_get(page, f"/api/conversations/{conversation}/")["agent"] == researcher
    expect(picker).to_have_value(researcher)
    question = unique("What is in my notes?")
    research_llm.responder = lambda body: text_reply("Notes read, says the researcher.")
    send(page, question)
    turn = last_turn(page)
    expect(turn.locator(".answer")).to_have_text("Notes read, says the researcher.", timeout=15000)
    expect(turn.locator(".turn-agent")).to_have_text("Researcher · research-1")
    asked = [r for r in research_llm.requests if question in json.dumps(r["messages"][-1])]
    assert [r["model"] for r in asked] == ["research-1"]

    # Switched three times at once in the open conversation: the server ends on the last choice,
    # and so does the picker, even though the first save would reach the server last.
    page.evaluate(COUNT_PATCHES)
    page.evaluate(
        """(slugs) => {
            const select = document.getElementById("agent-select");
            for (const slug of slugs) {
              select.value = slug;
              select.dispatchEvent(new Event("change"));
            }
        }""",
        [coder, "default", researcher],
    )
    page.wait_for_function("() => window.__patches.sent >= 1 && window.__patches.done === window.__patches.sent")
    assert api_get(page, f"/api/conversations/{conversation}/")["agent"] == researcher
    expect(picker).to_have_value(researcher)
    send(page, unique("And now?"))
    expect(last_turn(page).locator(".turn-agent")).to_have_text("Researcher · research-1")
    assert_clean(page)


# --- generated titles, live ------------------------------------------------------------------


@pytest.fixture(scope="module")
def titles_server(ui_tmp):
    """The offline demo model with generated titles on (the fake-model servers have them off)."""
    env = server_env(
        database_url=f"sqlite:///{ui_tmp / 'titles.sqlite3'}",
        llm_base_url="http://127.0.0.1:9/unused",
        AGENT_MODEL="demo",
        AGENT_TITLES="true",
        AGENT_DEMO_CHUNK_DELAY="0.005",
        AGENT_WORKSPACE_ROOT=str(ui_tmp / "titles-workspaces"),
    )
    migrate(env)
    server = Server(env, log_dir=ui_tmp, name="daphne-titles").start()
    yield server
    server.stop()


def test_a_generated_title_comes_into_the_list_and_the_header_live(new_context, titles_server):
    page = new_context(base_url=titles_server.base, viewport=DESKTOP).new_page()
    page.watch = PageWatch(page, titles_server.base)
    sign_up(page)
    titles = []
    page.on(
        "websocket",
        lambda ws: ws.on(
            "framereceived",
            lambda payload: titles.append(json.loads(payload)) if '"type":"title"' in str(payload) else None,
        ),
    )
    # The list fetched when the answer completes races the title: one answered after the title's
    # frame with what the server had before it must not put the first message back (it did once,
    # under CI's load). The lists are held and answered with the list as it was during the run.
    held = []

    def hold_lists(route):
        if route.request.method == "GET":
            held.append(route)
        else:
            route.continue_()  # the conversation's creation

    page.route("**/api/conversations/", hold_lists)
    send(page, "what is 6 * 7?")
    conversation_id(page)
    before = page.request.get(f"{titles_server.base}/api/conversations/")
    assert [c["titleSource"] for c in before.json()["conversations"]] == ["default"]  # not named yet
    # The first message stands in at once; the demo model's title replaces it after the answer.
    expect(last_turn(page).locator(".answer")).to_contain_text("42")
    expect(page.locator("#chat-title")).to_have_text("What Is 6 * 7")
    expect(page.locator("li.conv-item .conv-title")).to_have_text(["What Is 6 * 7"])
    assert held, "the list fetched at the answer's end was not held"
    for route in held:
        route.fulfill(response=before)
    page.unroute("**/api/conversations/")
    page.wait_for_timeout(300)  # the held lists are drawn
    assert page.locator("li.conv-item .conv-title").all_inner_texts() == ["What Is 6 * 7"]
    expect(page.locator("#chat-title")).to_have_text("What Is 6 * 7")
    assert page.title() == "What Is 6 * 7 · agentsite"
    assert titles == [{"type": "title", "title": "What Is 6 * 7"}]  # it came by the socket
    snap(page, "title-generated-1280")
    page.reload()
    expect(page.locator("li.conv-item .conv-title")).to_have_text(["What Is 6 * 7"])
    assert_clean(page)


# --- pinning and archiving ---------------------------------------------------------------------


def test_pin_and_archive_from_a_rows_menu_by_keyboard_and_pointer(user_page, ui_env, shot):
    page = user_page
    page.set_viewport_size(DESKTOP)
    now = datetime.now(ZoneInfo("UTC"))
    seed_dated(
        ui_env,
        page.username,
        [
            ("Groceries for the week", now - timedelta(minutes=5)),
            ("Trip to Lisbon", now - timedelta(days=3)),
            ("Quarterly report draft", now - timedelta(days=40)),
        ],
    )
    page.reload()
    expect(page.locator("li.conv-item")).to_have_count(3)

    # By keyboard: the row's link, → opens its menu on its first action; ↓ to Pin, Enter.
    link = item(page, "Quarterly report draft").locator(".conv-link")
    link.focus()
    page.keyboard.press("ArrowRight")
    menu = page.locator("#conversation-menu")
    expect(menu).to_be_visible()
    expect(menu.get_by_role("menuitem")).to_have_text(["Rename", "Pin", "Archive", "Delete"])
    expect(menu.get_by_role("menuitem", name="Rename")).to_be_focused()
    snap(page, "menu-open-1280")
    page.keyboard.press("ArrowDown")
    expect(menu.get_by_role("menuitem", name="Pin")).to_be_focused()
    page.keyboard.press("Enter")
    expect(menu).to_be_hidden()
    expect(page.locator("li.conv-group").first).to_have_text("Pinned")
    expect(item(page, "Quarterly report draft").locator(".conv-link")).to_be_focused()  # focus stays on the row
    rows = list_rows(page)
    assert rows[:2] == [("group", "Pinned"), ("item", "Quarterly report draft")], rows
    assert ("item", "Groceries for the week") in rows[2:]
    snap(page, "pinned-1280")

    # By pointer: the row's "⋯", then Archive; it leaves the list, and is kept under Archived.
    trip = item(page, "Trip to Lisbon")
    trip.hover()
    trip.locator("[data-action=menu]").click()
    expect(menu.get_by_role("menuitem", name="Archive")).to_be_visible()
    menu.get_by_role("menuitem", name="Archive").click()
    expect(page.locator("li.conv-item .conv-title")).to_have_text(["Quarterly report draft", "Groceries for the week"])
    toggle = page.locator("#archived-toggle")
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#conversations-label")).to_have_text("Archived")
    expect(page.locator("li.conv-item .conv-title")).to_have_text(["Trip to Lisbon"])
    snap(page, "archived-view-1280")
    audit(page, "sidebar-archived-view")
    page.set_viewport_size(DESKTOP)

    # Unarchived from the Archived view: it goes back to the list.
    archived = item(page, "Trip to Lisbon")
    archived.locator(".conv-link").focus()
    page.keyboard.press("Shift+F10")
    expect(menu.get_by_role("menuitem")).to_have_text(["Rename", "Unarchive", "Delete"])
    menu.get_by_role("menuitem", name="Unarchive").click()
    expect(page.locator("li.conv-item")).to_have_count(0)
    expect(page.locator(".conv-no-archived")).to_be_visible()
    snap(page, "archived-empty-1280")
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "false")
    expect(page.locator("li.conv-item .conv-title")).to_have_text(
        ["Quarterly report draft", "Groceries for the week", "Trip to Lisbon"]
    )
    page.reload()  # as the server lists it
    expect(page.locator("li.conv-item")).to_have_count(3)
    assert list_rows(page)[:2] == [("group", "Pinned"), ("item", "Quarterly report draft")]

    # Unpinned: back among the others by date.
    link = item(page, "Quarterly report draft").locator(".conv-link")
    link.focus()
    page.keyboard.press("ArrowRight")
    expect(menu.get_by_role("menuitem")).to_have_text(["Rename", "Unpin", "Archive", "Delete"])
    menu.get_by_role("menuitem", name="Unpin").click()
    expect(page.locator("li.conv-item .conv-title")).to_have_text(
        ["Groceries for the week", "Trip to Lisbon", "Quarterly report draft"]
    )
    assert ("group", "Pinned") not in list_rows(page)
    assert_clean(page)


def test_the_sidebar_states_at_both_sizes_pass_axe(user_page, ui_env):
    page = user_page
    now = datetime.now(ZoneInfo("UTC"))
    titles = ["Pinned planning notes", "Recipe ideas", "A much longer title about the infrastructure budget review"]
    ids = seed_dated(ui_env, page.username, [(t, now - timedelta(hours=n)) for n, t in enumerate(titles)])
    page.evaluate(
        """(id) => fetch(`/api/conversations/${id}/`, {method: "PATCH", headers: {"Content-Type": "application/json",
             "X-CSRFToken": document.querySelector("meta[name=csrf-token]").content}, body: JSON.stringify({pinned: true})})""",
        ids[0],
    )
    page.reload()
    page.set_viewport_size(DESKTOP)
    expect(page.locator("li.conv-group").first).to_have_text("Pinned")
    snap(page, "sidebar-list-1280")
    audit(page, "sidebar-pinned")
    item(page, "Recipe ideas").locator(".conv-link").focus()
    page.keyboard.press("ArrowRight")
    expect(page.locator("#conversation-menu")).to_be_visible()
    audit(page, "sidebar-menu-open")
    page.keyboard.press("Escape")
    expect(page.locator("#conversation-menu")).to_be_hidden()
    expect(item(page, "Recipe ideas").locator(".conv-link")).to_be_focused()

    # The phone: the list in its drawer, a row's menu open, the archived view.
    page.set_viewport_size(PHONE)
    page.click("#sidebar-toggle")
    expect(page.locator("#sidebar")).to_be_in_viewport()
    snap(page, "sidebar-list-390")
    item(page, "Recipe ideas").locator("[data-action=menu]").click()
    expect(page.locator("#conversation-menu")).to_be_visible()
    snap(page, "menu-open-390")
    page.keyboard.press("Escape")
    page.click("#archived-toggle")
    expect(page.locator(".conv-no-archived")).to_be_visible()
    snap(page, "archived-empty-390")
    page.click("#archived-toggle")
    expect(page.locator("li.conv-item")).to_have_count(3)
    assert_clean(page)


# --- one Tab stop per conversation ---------------------------------------------------------------


def test_each_conversation_is_one_tab_stop_opened_with_enter(user_page, ui_env, replies):
    page = user_page
    page.set_viewport_size(DESKTOP)
    now = datetime.now(ZoneInfo("UTC"))
    titles = [f"Conversation {n}" for n in range(4)]
    ids = seed_dated(ui_env, page.username, [(t, now - timedelta(minutes=n)) for n, t in enumerate(titles)])
    page.reload()
    links = page.locator("li.conv-item .conv-link")
    expect(links).to_have_count(4)
    links.first.focus()
    reached = []
    for _ in range(4):
        reached.append(page.evaluate("document.activeElement.closest('li.conv-item')?.dataset.id || null"))
        page.keyboard.press("Tab")
    assert reached == ids  # each Tab goes to the next conversation: no button between them
    # Nothing in the list but the links takes the Tab key.
    stops = page.evaluate(
        """() => [...document.querySelectorAll('#conversation-list a, #conversation-list button, #conversation-list input')]
                 .filter((el) => el.tabIndex >= 0).map((el) => el.className)"""
    )
    assert stops == ["conv-link"] * 4, stops
    # ↓ and ↑ move between them too; Enter opens the one focused.
    links.first.focus()
    page.keyboard.press("ArrowDown")
    expect(links.nth(1)).to_be_focused()
    page.keyboard.press("ArrowUp")
    expect(links.first).to_be_focused()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(rf".*\?c={ids[1]}$"))
    expect(page.locator("#chat-title")).to_have_text("Conversation 1")
    # F2 renames the focused one in place.
    links.nth(2).focus()
    page.keyboard.press("F2")
    rename = page.locator(".rename-input")
    expect(rename).to_be_focused()
    rename.fill("Renamed by keyboard")
    page.keyboard.press("Enter")
    expect(item(page, "Renamed by keyboard").locator(".conv-link")).to_be_focused()
    assert api_get(page, f"/api/conversations/{ids[2]}/")["titleSource"] == "user"
    assert_clean(page)
