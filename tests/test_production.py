"""Production settings: no start with the public development key, `check --deploy` clean under
docs/deployment.md's environment, and the client address believed from trusted proxies only."""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.http import HttpResponse
from django.test import RequestFactory

from serving.proxy import TrustedProxyMiddleware, forwarded_client

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def bare_env(**extra: str) -> dict[str, str]:
    """The environment of an operator who has set nothing of ours (no key file either)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "AGENT_", "OPENAI_", "SECURE_", "EMAIL_"))
        and k not in {"SECRET_KEY", "DEBUG", "DATABASE_URL", "REDIS_URL", "HTTPS", "TRUSTED_PROXIES"}
    }
    env.update(
        DJANGO_SETTINGS_MODULE="agentsite.settings", SECRET_KEY_FILE="/nonexistent/agentsite-key", PYTHONUNBUFFERED="1"
    )
    env.update(extra)
    return env


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def assert_refused(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "SECRET_KEY" in lines[0] and "DEBUG" in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_manage_py_refuses_the_development_key_without_debug():
    assert_refused(run([sys.executable, "manage.py", "check"], bare_env()))


def test_daphne_refuses_to_start_without_a_secret_key():
    result = run([str(BIN / "daphne"), "-b", "127.0.0.1", "-p", "0", "agentsite.asgi:application"], bare_env())
    assert_refused(result)


def test_debug_runs_with_the_development_key_and_a_key_file_is_read(tmp_path):
    assert run([sys.executable, "manage.py", "check"], bare_env(DEBUG="true")).returncode == 0
    key_file = tmp_path / "key"
    key_file.write_text(secrets.token_urlsafe(50) + "\n")
    show = "from django.conf import settings; print(settings.SECRET_KEY)"
    result = run([sys.executable, "manage.py", "shell", "-c", show], bare_env(SECRET_KEY_FILE=str(key_file)))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == key_file.read_text().strip()


DEPLOYMENT = (ROOT / "docs" / "deployment.md").read_text()


def documented_file() -> str:
    """The production environment file of docs/deployment.md, "Production", as written there."""
    block = re.search(r"```sh[^\n]*\n\s*# /etc/agentsite\.env[^\n]*\n(.*?)```", DEPLOYMENT, re.S)
    assert block, "docs/deployment.md lost its /etc/agentsite.env block"
    return "\n".join(line.strip() for line in block.group(1).splitlines()) + "\n"


def variables_of(text: str) -> dict[str, str]:
    variables = dict(re.findall(r"^([A-Z][A-Z0-9_]*)=(\S*)", text, re.M))
    assert {"SECRET_KEY", "ALLOWED_HOSTS", "TRUSTED_PROXIES", "HTTPS"} <= set(variables)
    return variables


def documented_environment(tmp_path: Path) -> dict[str, str]:
    """The file after the documented key command has run on it (on a copy here, without sudo)."""
    command = re.search(r"^\s*sudo (sed -i .*) /etc/agentsite\.env$", DEPLOYMENT, re.M)
    assert command, "docs/deployment.md lost the command that puts a key into /etc/agentsite.env"
    env_file = tmp_path / "agentsite.env"
    env_file.write_text(documented_file())
    subprocess.run(["sh", "-c", f'{command.group(1)} "$0"', str(env_file)], check=True, timeout=30)
    return variables_of(env_file.read_text())


CHECK_DEPLOY = [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"]


def test_the_documented_key_command_makes_check_deploy_clean(tmp_path):
    placeholder = variables_of(documented_file())["SECRET_KEY"]
    variables = documented_environment(tmp_path)
    assert variables["SECRET_KEY"] != placeholder and len(variables["SECRET_KEY"]) >= 50
    result = run(CHECK_DEPLOY, bare_env(**variables))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout
    # The file as written, placeholder and all, is not clean: the doc says why the command is needed.
    result = run(CHECK_DEPLOY, bare_env(**variables_of(documented_file())))
    assert result.returncode != 0 and "security.W009" in result.stdout + result.stderr
    assert "security.W009" in DEPLOYMENT


def test_check_deploy_looks_at_the_https_settings(tmp_path):
    # Without the HTTPS settings the same check fails: it does look at them.
    plain = documented_environment(tmp_path)
    del plain["HTTPS"]
    result = run(CHECK_DEPLOY, bare_env(**plain))
    assert result.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in result.stdout + result.stderr


# -- the client address behind a proxy ----------------------------------------------

PROXIES = tuple(ipaddress.ip_network(n) for n in ("127.0.0.1/32", "10.0.0.0/8"))


@pytest.mark.parametrize(
    ("peer", "header", "client"),
    [
        ("127.0.0.1", "203.0.113.7", "203.0.113.7"),
        # Entries left of the first untrusted address were written by the client: ignored.
        ("127.0.0.1", "198.51.100.1, 203.0.113.7", "203.0.113.7"),
        # Several trusted proxies in a row are walked through.
        ("127.0.0.1", "198.51.100.1, 203.0.113.7, 10.1.2.3", "203.0.113.7"),
        ("127.0.0.1", "2001:db8::1", "2001:db8::1"),
        # Garbage, or nothing at all: the last address that could be vouched for.
        ("127.0.0.1", "not-an-address", "127.0.0.1"),
        ("127.0.0.1", "", "127.0.0.1"),
        ("127.0.0.1", "203.0.113.7, junk, 10.1.2.3", "10.1.2.3"),
    ],
)
def test_forwarded_client(peer, header, client):
    assert forwarded_client(peer, header, PROXIES) == client


def through_middleware(settings, trusted: list[str], **meta: str):
    settings.TRUSTED_PROXIES = trusted
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    seen = {}

    def view(request):
        seen.update(
            address=request.META["REMOTE_ADDR"],
            secure=request.is_secure(),
            forwarded="HTTP_X_FORWARDED_FOR" in request.META,
        )
        return HttpResponse()

    TrustedProxyMiddleware(view)(RequestFactory().get("/", **meta))
    return seen


def test_headers_of_a_trusted_proxy_are_believed(settings):
    seen = through_middleware(
        settings,
        ["127.0.0.1"],
        REMOTE_ADDR="127.0.0.1",
        HTTP_X_FORWARDED_FOR="203.0.113.7",
        HTTP_X_FORWARDED_PROTO="https",
    )
    assert seen == {"address": "203.0.113.7", "secure": True, "forwarded": True}


@pytest.mark.parametrize("trusted", [[], ["10.0.0.0/8"]])
def test_headers_from_anyone_else_are_dropped(settings, trusted):
    seen = through_middleware(
        settings, trusted, REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.7", HTTP_X_FORWARDED_PROTO="https"
    )
    assert seen == {"address": "127.0.0.1", "secure": False, "forwarded": False}


def test_the_service_unit_preloads_an_allocator_the_loader_finds():
    # deploy/agentsite@.service names jemalloc by its soname, for any architecture's library
    # folder: a name the loader cannot find would be skipped with a warning on every start.
    unit = (ROOT / "deploy" / "agentsite@.service").read_text()
    preload = re.search(r"^Environment=LD_PRELOAD=(\S+)$", unit, re.MULTILINE)
    assert preload, "the unit sets no LD_PRELOAD"
    maps = run([sys.executable, "-c", "print(open('/proc/self/maps').read())"], bare_env(LD_PRELOAD=preload.group(1)))
    assert maps.returncode == 0
    assert "cannot be preloaded" not in maps.stderr
    assert re.search(r"/libjemalloc\.so\.2$", maps.stdout, re.MULTILINE)
