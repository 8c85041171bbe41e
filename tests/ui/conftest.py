"""Browser tests: a real daphne, the fake model, and Debian's chromium driven by Playwright.

Playwright never downloads a browser here: it launches /usr/bin/chromium (`make browser`
installs it). Without chromium the browser tests are skipped with that hint.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.e2e.harness import Replies, Server, migrate, server_env

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PASSWORD = "ui-Pass-w0rd-long"  # noqa: S105 - a test account


@pytest.fixture(scope="session")
def ui_tmp():
    path = Path(tempfile.mkdtemp(prefix="agentsite-ui-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def ui_env(ui_tmp, fake_llm_server):
    env = server_env(
        database_url=f"sqlite:///{ui_tmp / 'ui.sqlite3'}",
        llm_base_url=fake_llm_server.base_url,
        AGENT_TOOLS="calculator,current_time,bash",
        AGENT_RETRY_INTERVAL="0.3",
        AGENT_STREAM_FLUSH_MS="30",
        AGENT_WORKSPACE_ROOT=str(ui_tmp / "workspaces"),
    )
    migrate(env)
    return env


@pytest.fixture(scope="session")
def ui_server(ui_env, ui_tmp):
    server = Server(ui_env, log_dir=ui_tmp, name="daphne-ui").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def demo_server(ui_tmp):
    """A server on the built-in offline demo model, as a fresh install without an API key runs."""
    env = server_env(
        database_url=f"sqlite:///{ui_tmp / 'demo.sqlite3'}",
        llm_base_url="http://127.0.0.1:9/unused",
        AGENT_MODEL="demo",
        AGENT_TOOLS="calculator,current_time,read_file,write_file,list_files,load_skill",  # the default
        AGENT_DEMO_CHUNK_DELAY="0.005",
        AGENT_WORKSPACE_ROOT=str(ui_tmp / "demo-workspaces"),
    )
    migrate(env)
    server = Server(env, log_dir=ui_tmp, name="daphne-demo").start()
    yield server
    server.stop()


@pytest.fixture
def seed_interrupted(ui_env):
    """Writes a conversation of interrupted runs (tests/ui/seed_interrupted.py); its id."""

    def seed(username: str) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "tests.ui.seed_interrupted", username],
            cwd=ROOT,
            env=ui_env,
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return result.stdout.strip().splitlines()[-1]

    return seed


@pytest.fixture(scope="session")
def keyed_replies(fake_llm_server):
    return Replies(fake_llm_server)


@pytest.fixture
def replies(fake_llm_server, keyed_replies):
    """Fake-model replies keyed by the user message that starts the run (the session's fake
    model is shared with other suites, which may reset its responder between tests)."""
    saved = fake_llm_server.responder
    fake_llm_server.responder = keyed_replies.respond
    yield keyed_replies
    fake_llm_server.responder = saved


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM} (run `make browser`)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


class PageWatch:
    """What a page did that it should not have: console errors, dialogs, foreign requests."""

    def __init__(self, page, base: str):
        self.base = base
        self.console_errors: list[str] = []
        self.dialogs: list[str] = []
        self.foreign_requests: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.console_errors.append(f"pageerror: {error}"))
        page.on("dialog", self._dialog)
        page.on("request", self._request)

    def _console(self, message) -> None:
        if message.type == "error":
            self.console_errors.append(message.text)

    def _dialog(self, dialog) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def _request(self, request) -> None:
        url = request.url
        if not (
            url.startswith(self.base) or url.startswith(self.base.replace("http", "ws", 1)) or url.startswith("data:")
        ):
            self.foreign_requests.append(url)


# Assertions wait as long as page actions do: on CI the UI runs beside the PostgreSQL pass and the
# container check on two cores, and a run's first frame has taken more than expect's default 5 s.
expect.set_options(timeout=15000)


@pytest.fixture
def new_context(browser, ui_server):
    contexts = []

    def make(**options):
        options.setdefault("viewport", {"width": 1280, "height": 820})
        options.setdefault("locale", "en-US")
        options.setdefault("base_url", ui_server.base)
        context = browser.new_context(**options)
        context.set_default_timeout(15000)
        contexts.append(context)
        return context

    yield make
    for context in contexts:
        context.close()


def sign_up(page, username: str | None = None) -> str:
    username = username or f"ui{uuid.uuid4().hex[:10]}"
    page.goto("/accounts/signup/")
    page.fill("#id_username", username)
    page.fill("#id_password1", PASSWORD)
    page.fill("#id_password2", PASSWORD)
    page.click("form.auth-form button[type=submit]")
    page.wait_for_url("**/")
    page.wait_for_selector("#message-input")
    return username


@pytest.fixture
def user_page(new_context, ui_server):
    """A signed-up user's chat page, watched for errors, dialogs and foreign requests."""
    context = new_context()
    page = context.new_page()
    page.watch = PageWatch(page, ui_server.base)
    page.username = sign_up(page)
    return page


@pytest.fixture(scope="session")
def shot():
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def save(page, name: str, **options) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        options.setdefault("animations", "disabled")
        page.screenshot(path=str(path), **options)
        return path

    return save


@pytest.fixture
def seed_history(ui_env):
    """Writes a long finished conversation straight into the test database."""

    def seed(username: str, events: int) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "tests.ui.seed_history", username, str(events)],
            cwd=ROOT,
            env=ui_env,
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return result.stdout.strip().splitlines()[-1]

    return seed


@pytest.fixture
def seed_conversations(ui_env):
    """Writes many conversations for a user straight into the test database; their ids, newest first."""

    def seed(username: str, count: int) -> list[str]:
        result = subprocess.run(
            [sys.executable, "-m", "tests.ui.seed_conversations", username, str(count)],
            cwd=ROOT,
            env=ui_env,
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return result.stdout.split()

    return seed
