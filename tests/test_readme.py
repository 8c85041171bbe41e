"""The README's first answers hold: the port of `make run` and the address it ends with, how to
become staff, and what the demo model can do (the production file: tests/test_production.py)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from chat.agent.demo import demo_reply
from chat.eventlog.history import attachments_note

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
SET_UP = README.split("## Set up", 1)[1].split("\n## ", 1)[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def test_make_run_takes_the_documented_port_and_ends_with_the_address_to_open(tmp_path):
    variable = re.search(r"`([A-Z]+)=(\d+) make run`", SET_UP)
    assert variable and variable.group(1) == "PORT", "README: how to change the port of make run"
    port = free_port()  # the README's own number may be taken on this machine
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "AGENT_", "OPENAI_"))}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", SECRET_KEY="readme-test-key", PYTHONUNBUFFERED="1")
    # This venv, already installed, and the key from the environment: nothing written into the checkout.
    command = ["make", "-s", "-o", "install", "-o", ".secret_key", "run", f"VENV={sys.prefix}", f"PORT={port}"]
    server = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    lines: list[str] = []
    try:
        for line in server.stdout:
            lines.append(line.rstrip("\n"))
            if len(lines) > 1 and "Listening on" in lines[-2]:
                break  # the line after it is the last one of the start
        assert len(lines) > 1 and "Listening on TCP address" in lines[-2], lines
        url = f"http://127.0.0.1:{port}/"
        assert lines[-1] == f"agentsite is ready: open {url} in a browser"
        assert not any("HTTP/2" in line for line in lines), lines
        opener = urllib.request.build_opener(_NoRedirect)
        with pytest.raises(urllib.error.HTTPError) as answer:
            opener.open(url, timeout=30)
        assert answer.value.code == 302 and answer.value.headers["Location"].startswith("/accounts/login/")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.communicate(timeout=60)


@pytest.mark.django_db
def test_the_documented_superuser_command_makes_staff(client, monkeypatch):
    line = re.search(r"`[^`]*manage\.py (createsuperuser)`", SET_UP)
    assert line, "README: how to become staff"
    paragraph = SET_UP[SET_UP.rindex("\n\n", 0, line.start()) : line.end()]
    for place in ("/admin/", "run inspector", "agent profiles"):
        assert place in paragraph
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "a-long-admin-password-1")
    call_command(line.group(1), interactive=False, username="admin", email="admin@example.com", verbosity=0)
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_staff and admin.is_superuser and admin.check_password("a-long-admin-password-1")
    client.force_login(admin)
    for page in ("/admin/", "/inspect/", "/admin/chat/agentprofile/add/"):
        assert client.get(page).status_code == 200, page


def demo_prompts() -> list[str]:
    listed = SET_UP.split("The demo model can do", 1)[1].split("\n\n", 2)[1]
    return re.findall(r'^- [^"\n]*"([^"]+)"', listed, re.M)


TOOLS = [{"type": "function", "function": {"name": name}} for name in ("calculator", "current_time", "read_file")]


def demo_answer(prompt: str) -> tuple[str | None, str]:
    """The tool the demo calls for the prompt (a prompt about a file is sent with one), and what it says."""
    if "file" in prompt:
        prompt += attachments_note({"attachments": [{"path": "data.csv", "size": 20}]})
    script = demo_reply({"messages": [{"role": "user", "content": prompt}], "tools": TOOLS})
    calls = [d["tool_calls"][0]["function"]["name"] for d in script.deltas if d.get("tool_calls", [{}])[0].get("id")]
    return (calls[0] if calls else None), "".join(d.get("content", "") for d in script.deltas)


def test_every_listed_demo_prompt_is_one_the_demo_model_can_do():
    prompts = demo_prompts()
    assert len(prompts) >= 4, prompts
    outcomes = [demo_answer(prompt) for prompt in prompts]
    for prompt, (tool, text) in zip(prompts, outcomes, strict=True):
        assert tool or "and that is all" not in text, f"the demo model cannot do {prompt!r}"
    assert {"calculator", "current_time", "read_file"} <= {tool for tool, _ in outcomes}


def test_the_page_suggestions_are_listed():
    page = (ROOT / "templates" / "chat" / "index.html").read_text()
    suggestions = re.findall(r'data-suggestion="\{% translate \'([^\']+)\' %\}"', page)
    assert len(suggestions) == 3
    for suggestion in suggestions:
        assert f'"{suggestion}"' in SET_UP


def test_openid_connect_is_turned_on_by_the_three_lines_the_readme_gives(settings):
    section = README.split("## Sign in with your identity provider", 1)[1].split("\n## ", 1)[0]
    lines = section.split("```sh\n", 1)[1].split("```", 1)[0].strip().splitlines()
    names = [line.split("=", 1)[0] for line in lines]
    assert names == ["OIDC_ISSUER", "OIDC_CLIENT_ID", "OIDC_CLIENT_SECRET"]
    link = re.search(r"\(docs/deployment\.md#([a-z-]+)\)", section)
    headings = re.findall(r"^## (.+)$", (ROOT / "docs" / "deployment.md").read_text(), re.M)
    assert link and link.group(1) in {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in headings}
    env = {k: v for k, v in os.environ.items() if not k.startswith("OIDC_")}
    env.update(dict(line.split("=", 1) for line in lines), SECRET_KEY="readme-test-key")
    probe = "from django.conf import settings; print(settings.OIDC_ENABLED, settings.OIDC_ISSUER)"
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'agentsite.settings'; django.setup(); {probe}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.split()[-2:] == ["True", "https://id.example.com/realms/acme"]


def test_the_set_up_has_exactly_two_commands():
    block = SET_UP.split("```sh\n", 1)[1].split("```", 1)[0]
    assert [line.split("#")[0].strip() for line in block.strip().splitlines()] == ["make run", "make test"]
