"""A real OpenID provider for the sign-in tests, and the sign-in flow driven over HTTP.

`Provider` runs tests/oidc/provider.mjs (panva's oidc-provider, installed by `make oidc-provider`
from tests/oidc/package-lock.json) with the machine's Node.js on a port chosen before the
agentsite servers start, since they name it as their issuer and it names their callbacks.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import time
from html import unescape
from pathlib import Path
from urllib.parse import urljoin

import httpx2
import psycopg

from .harness import ROOT, Client, Server, free_port

PROVIDER_DIR = ROOT / "tests" / "oidc"
CLIENT_ID, CLIENT_SECRET = "agentsite", "agentsite-secret"  # noqa: S105 - the test provider's client


class Provider:
    def __init__(self, log_dir: Path):
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.log_path = log_dir / f"oidc-provider-{self.port}.log"
        self.proc: subprocess.Popen | None = None

    def env(self, **extra: str) -> dict[str, str]:
        """The variables of an agentsite server signing in with this provider."""
        return {
            "OIDC_ISSUER": self.issuer,
            "OIDC_CLIENT_ID": CLIENT_ID,
            "OIDC_CLIENT_SECRET": CLIENT_SECRET,
            "OIDC_SCOPES": "openid email profile groups",
            **extra,
        }

    def start(self, sites: list[Server]) -> Provider:
        if not (PROVIDER_DIR / "node_modules" / "oidc-provider").exists():
            raise AssertionError("oidc-provider is not installed: run `make oidc-provider`")
        uris = [f"{site.base}{path}" for site in sites for path in ("/accounts/oidc/callback/", "/accounts/login/")]
        env = {"PATH": "/usr/bin:/bin:/usr/local/bin", "PORT": str(self.port), "ISSUER": self.issuer}
        env["REDIRECT_URIS"] = ",".join(uris)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                ["node", "provider.mjs"], cwd=PROVIDER_DIR, env=env, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if httpx2.get(f"{self.issuer}/.well-known/openid-configuration", timeout=2).status_code == 200:
                    return self
            except httpx2.HTTPError:
                time.sleep(0.1)
        raise RuntimeError(f"the OpenID provider did not start:\n{self.log_path.read_text()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def set(self, **state) -> None:
        """Changes what the provider says from now on (tests/oidc/provider.mjs, /__test__/state)."""
        r = httpx2.post(f"{self.issuer}/__test__/state", content=json.dumps(state), timeout=5)
        assert r.status_code == 200, r.text

    def account(self, login: str, **claims) -> None:
        accounts = httpx2.post(f"{self.issuer}/__test__/state", content="{}", timeout=5).json()["accounts"]
        self.set(accounts={**accounts, login: claims})

    def served(self) -> list[str]:
        return httpx2.get(f"{self.issuer}/__test__/log", timeout=5).json()


def form_of(html: str) -> tuple[str, dict[str, str]]:
    """The page's first form: its action and its named inputs' values."""
    action = unescape(re.search(r'<form[^>]*action="([^"]*)"', html).group(1))
    fields = {}
    for tag in re.findall(r"<(?:input|button)\b[^>]*>", html):
        name = re.search(r'name="([^"]*)"', tag)
        if name:
            value = re.search(r'value="([^"]*)"', tag)
            fields[unescape(name.group(1))] = unescape(value.group(1)) if value else ""
    return action, fields


async def to_callback(client: Client, login: str, *, next_path: str = "/") -> str:
    """From agentsite's "Sign in with" link through the provider's login form, up to the
    callback URL the provider sends the browser back to (not followed)."""
    r = await client.http.get(client.url(f"/accounts/oidc/login/?next={next_path}"))
    assert r.status_code == 302, (r.status_code, r.text[:1000])
    return await through_provider(client, r.headers["location"], login)


async def through_provider(client: Client, url: str, login: str) -> str:
    """From the provider's authorization URL (the redirect of agentsite's sign-in link) through
    its login form, up to the callback URL it sends the browser back to (not followed)."""
    http, callback = client.http, client.url("/accounts/oidc/callback/")
    for _ in range(12):
        if url.startswith(callback):
            return url
        r = await http.get(url)
        if r.status_code == 200 and 'name="login"' in r.text:
            action, fields = form_of(r.text)
            r = await http.post(urljoin(url, action), data={**fields, "login": login, "password": "any"})
        assert r.status_code in (302, 303), (url, r.status_code, r.text[:1000])
        url = urljoin(url, r.headers["location"])
    raise AssertionError(f"the provider never sent the browser back: {url}")


async def sign_in(client: Client, login: str) -> httpx2.Response:
    """The whole flow; the callback's answer (a redirect into the site on success)."""
    return await client.http.get(await to_callback(client, login))


def rows(database_url: str, sql: str, *params) -> list[tuple]:
    """A read of a server's database (SQLite file or PostgreSQL), `?` placeholders."""
    if database_url.startswith("sqlite:///"):
        with sqlite3.connect(database_url.removeprefix("sqlite:///")) as conn:
            return conn.execute(sql, params).fetchall()
    with psycopg.connect(database_url) as conn:
        return conn.execute(sql.replace("?", "%s"), params).fetchall()


def write(database_url: str, sql: str, *params) -> None:
    if database_url.startswith("sqlite:///"):
        with sqlite3.connect(database_url.removeprefix("sqlite:///")) as conn:
            conn.execute(sql, params)
        return
    with psycopg.connect(database_url) as conn:
        conn.execute(sql.replace("?", "%s"), params)


def groups_of(database_url: str, username: str) -> dict[str, bool]:
    """The user's groups, each with whether the provider manages it."""
    found = rows(
        database_url,
        "SELECT g.name, p.group_id IS NOT NULL FROM auth_group g"
        " JOIN auth_user_groups ug ON ug.group_id = g.id JOIN auth_user u ON u.id = ug.user_id"
        " LEFT JOIN chat_providergroup p ON p.group_id = g.id WHERE u.username = ?",
        username,
    )
    return {name: bool(managed) for name, managed in found}
