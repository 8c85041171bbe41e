"""Sign-in with OpenID Connect against a real provider (panva's oidc-provider, tests/oidc/), over HTTP
on real daphnes (docs/protocol.md, "Sign-in with OpenID Connect"): users by (issuer, sub), groups
and staff from the claims, and every failure a page that logs one line and creates nothing."""

from __future__ import annotations

import asyncio
import uuid
from urllib.parse import parse_qs, quote, urlencode, urljoin, urlsplit, urlunsplit

import pytest

from chat.accounts.oidc import PENDING_MAX
from chat.accounts.sessions import SessionStore

from .harness import Client, free_port, run_text
from .oidc import Provider, form_of, groups_of, rows, sign_in, through_provider, to_callback, write
from .test_revocation import closed_with

pytestmark = pytest.mark.services


@pytest.fixture(scope="module")
def idp(log_dir, databases, make_server):
    """The provider, and the agentsite servers that sign in with it (or try to)."""
    provider = Provider(log_dir)
    sites = {}
    sites["main"] = make_server(
        db := databases.new(),
        name="oidc-main",
        **provider.env(OIDC_ALLOWED_GROUPS="users,staff", OIDC_STAFF_GROUPS="staff"),
    )
    sites["main"].database_url = db
    sites["nopassword"] = make_server(
        db := databases.new(), name="oidc-nopassword", **provider.env(ALLOW_PASSWORD_LOGIN="false", OIDC_LABEL="Acme")
    )
    sites["nopassword"].database_url = db
    sites["broken"] = make_server(
        databases.new(), name="oidc-broken", **provider.env(OIDC_ISSUER=f"{provider.issuer}/broken")
    )
    sites["down"] = make_server(
        databases.new(), name="oidc-down", **provider.env(OIDC_ISSUER=f"http://127.0.0.1:{free_port()}")
    )
    provider.start([sites["main"], sites["nopassword"]])
    provider.sites = sites
    yield provider
    provider.stop()


@pytest.fixture(autouse=True)
def honest_provider(idp):
    """Each test starts with the provider's clock right and its tokens untouched."""
    idp.set(tamper=None, clockOffset=0)


@pytest.fixture
def main(idp):
    return idp.sites["main"]


def login_name() -> str:
    return f"oidc{uuid.uuid4().hex[:8]}"


def users_named(server, username: str) -> int:
    return rows(server.database_url, "SELECT count(*) FROM auth_user WHERE username LIKE ?", f"{username}%")[0][0]


def failure_lines(server) -> list[str]:
    return [line for line in server.log(None).splitlines() if "oidc sign-in failed" in line]


async def test_first_sign_in_creates_the_user_with_groups_and_staff(idp, main):
    name = login_name()
    idp.account(name, groups=["users", "staff", f"team-{name}"], email=f"{name}@corp.test", name="Ada Lovelace")
    client = Client(main)
    r = await sign_in(client, name)
    assert (r.status_code, r.headers["location"]) == (302, "/")
    assert (await client.http.get(client.url("/"))).status_code == 200
    assert (await client.http.get(client.url("/admin/"))).status_code == 200  # staff from OIDC_STAFF_GROUPS
    (user,) = rows(
        main.database_url,
        "SELECT u.id, u.email, u.first_name, u.last_name, u.is_staff, u.password, i.issuer, i.subject"
        " FROM auth_user u JOIN chat_oidcidentity i ON i.user_id = u.id WHERE u.username = ?",
        name,
    )
    assert user[1:5] == (f"{name}@corp.test", "Ada", "Lovelace", True)
    assert user[5].startswith("!")  # no password: this user signs in through the provider only
    assert user[6:] == (idp.issuer, name)
    assert groups_of(main.database_url, name) == {"users": True, "staff": True, f"team-{name}": True}
    await client.aclose()


async def test_a_second_sign_in_updates_groups_and_staff(idp, main):
    name = login_name()
    idp.account(name, groups=["users", "staff", f"gone-{name}"])
    first = Client(main)
    assert (await sign_in(first, name)).status_code == 302
    rows_before = rows(main.database_url, "SELECT id FROM auth_user WHERE username = ?", name)
    # A group made by hand in the admin is the operator's: no sign-in takes it away.
    hand = f"hand-{name}"
    write(main.database_url, "INSERT INTO auth_group (name) VALUES (?)", hand)
    write(
        main.database_url,
        "INSERT INTO auth_user_groups (user_id, group_id) SELECT u.id, g.id FROM auth_user u, auth_group g"
        " WHERE u.username = ? AND g.name = ?",
        name,
        hand,
    )
    idp.account(name, groups=["users", f"new-{name}"])
    second = Client(main)
    assert (await sign_in(second, name)).status_code == 302
    assert rows(main.database_url, "SELECT id FROM auth_user WHERE username = ?", name) == rows_before
    assert groups_of(main.database_url, name) == {"users": True, f"new-{name}": True, hand: False}
    assert rows(main.database_url, "SELECT is_staff FROM auth_user WHERE username = ?", name) == [(False,)]
    assert (await second.http.get(second.url("/admin/"))).status_code == 302
    for client in (first, second):
        await client.aclose()


async def test_a_taken_username_gets_a_new_one_and_is_never_matched(idp, main):
    owner = await Client(main).signup()  # a password account with the name the provider will claim
    idp.account("x", groups=["users"])
    idp.account(f"sub-{owner.username}", preferred_username=owner.username, groups=["users"])
    client = Client(main)
    assert (await sign_in(client, f"sub-{owner.username}")).status_code == 302
    found = rows(main.database_url, "SELECT username FROM auth_user WHERE username LIKE ?", f"{owner.username}%")
    assert sorted(found) == [(owner.username,), (f"{owner.username}-2",)]
    assert groups_of(main.database_url, owner.username) == {}
    for c in (owner, client):
        await c.aclose()


async def test_an_outsider_is_refused_and_not_created(idp, main):
    name = login_name()
    idp.account(name, groups=["contractors"])
    client = Client(main)
    before = len(failure_lines(main))
    r = await sign_in(client, name)
    assert r.status_code == 403
    assert "not in a group that may use this site" in r.text
    assert users_named(main, name) == 0
    assert rows(main.database_url, "SELECT count(*) FROM auth_group WHERE name = 'contractors'") == [(0,)]
    assert (await client.http.get(client.url("/"))).status_code == 302  # not signed in
    assert len(failure_lines(main)) == before + 1
    await client.aclose()


async def test_a_tampered_state_is_refused(idp, main):
    name = login_name()
    idp.account(name, groups=["users"])
    client = Client(main)
    callback = await to_callback(client, name)
    parts = urlsplit(callback)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    query["state"] = query["state"][:-2] + "xx"
    r = await client.http.get(urlunsplit(parts._replace(query=urlencode(query))))
    assert r.status_code == 400
    assert "expired or was started in another browser" in r.text
    r = await client.http.get(client.url("/accounts/oidc/callback/?code=abc"))  # no state at all
    assert r.status_code == 400
    assert users_named(main, name) == 0
    await client.aclose()


async def test_a_replayed_code_is_refused(idp, main):
    name = login_name()
    idp.account(name, groups=["users"])
    victim = Client(main)
    callback = await to_callback(victim, name)
    assert (await victim.http.get(callback)).status_code == 302
    # The same callback again: its state was used up.
    assert (await victim.http.get(callback)).status_code == 400
    # The code under a fresh state of another browser: the provider refuses the used code.
    attacker = Client(main)
    fresh = await attacker.http.get(attacker.url("/accounts/oidc/login/"))
    state = parse_qs(urlsplit(fresh.headers["location"]).query)["state"][0]
    code = parse_qs(urlsplit(callback).query)["code"][0]
    before = len(failure_lines(main))
    r = await attacker.http.get(attacker.url(f"/accounts/oidc/callback/?code={code}&state={state}"))
    assert r.status_code == 400
    assert "did not complete the sign-in (invalid_grant)" in r.text
    assert (await attacker.http.get(attacker.url("/"))).status_code == 302
    assert len(failure_lines(main)) == before + 1
    for c in (victim, attacker):
        await c.aclose()


@pytest.mark.parametrize("tamper", ["audience", "signature", "nonce"])
async def test_an_id_token_that_does_not_verify_is_refused(idp, main, tamper):
    name = login_name()
    idp.account(name, groups=["users"])
    client = Client(main)
    idp.set(tamper=tamper)
    before = len(failure_lines(main))
    r = await sign_in(client, name)
    assert r.status_code == 400
    assert "did not verify" in r.text
    assert users_named(main, name) == 0
    lines = failure_lines(main)[before:]
    assert len(lines) == 1 and "ID token rejected" in lines[0], lines
    await client.aclose()


async def test_an_expired_id_token_is_refused(idp, main):
    name = login_name()
    idp.account(name, groups=["users"])
    client = Client(main)
    callback = await to_callback(client, name)
    idp.set(clockOffset=-7200)  # the provider's clock two hours behind: its ID token expired an hour ago
    r = await client.http.get(callback)
    assert r.status_code == 400
    assert "did not verify" in r.text
    assert "ExpiredTokenError" in failure_lines(main)[-1]
    assert users_named(main, name) == 0
    await client.aclose()


@pytest.mark.parametrize("site", ["down", "broken"])
async def test_an_unreachable_or_broken_provider_is_a_page(idp, site):
    server = idp.sites[site]
    client = Client(server)
    r = await client.http.get(client.url("/accounts/oidc/login/?next=/"))
    assert r.status_code == 502
    assert "could not be reached" in r.text
    assert 'class="btn btn-primary btn-block oidc-button"' in r.text  # the way to try again
    r = await client.http.get(client.url("/accounts/oidc/callback/?code=x&state=y"))
    assert r.status_code == 502
    lines = failure_lines(server)
    assert len(lines) == 2 and all("provider unavailable" in line for line in lines), lines
    assert "Traceback" not in server.log(None)
    await client.aclose()


async def test_password_sign_in_turned_off(idp):
    server = idp.sites["nopassword"]
    client = Client(server)
    page = await client.http.get(client.url("/accounts/login/"))
    assert "Sign in with Acme" in page.text
    assert 'name="password"' not in page.text and "/accounts/signup/" not in page.text
    assert (await client.http.get(client.url("/accounts/signup/"))).status_code == 404
    token = client.http.cookies.get("csrftoken")
    r = await client.http.post(
        client.url("/accounts/login/"),
        data={"csrfmiddlewaretoken": token, "username": "admin", "password": "whatever-it-is"},
        headers={"Referer": server.base},
    )
    assert r.status_code == 403
    assert "Signing in with a password is turned off" in r.text
    idp.account("np-user", groups=["anything"])
    assert (await sign_in(client, "np-user")).status_code == 302
    assert (await client.http.get(client.url("/"))).status_code == 200
    await client.aclose()


async def test_logout_ends_the_provider_session(idp, main):
    name = login_name()
    idp.account(name, groups=["users"])
    client = Client(main)
    assert (await sign_in(client, name)).status_code == 302
    r = await client.http.post(client.url("/accounts/logout/"), headers=client._unsafe_headers())
    assert r.status_code == 302
    end = urlsplit(r.headers["location"])
    assert f"{end.scheme}://{end.netloc}{end.path}" == f"{idp.issuer}/session/end"
    query = parse_qs(end.query)
    assert query["post_logout_redirect_uri"] == [client.url("/accounts/login/")]
    assert query["id_token_hint"][0].count(".") == 2
    page = await client.http.get(r.headers["location"])
    action, fields = form_of(page.text)  # the provider's "sign out?" confirmation
    r = await client.http.post(urljoin(str(page.url), action), data={**fields, "logout": "yes"})
    assert r.headers["location"].startswith(client.url("/accounts/login/"))
    assert "POST /session/end/confirm" in idp.served()
    assert (await client.http.get(client.url("/"))).status_code == 302
    # The provider's session ended too: signing in again asks for the login again.
    again = await client.http.get(client.url("/accounts/oidc/login/"))
    prompt = await client.http.get(again.headers["location"], follow_redirects=True)
    assert 'name="login"' in prompt.text
    await client.aclose()


async def test_an_oidc_session_works_and_its_revocation_closes_the_socket(idp, main):
    name = login_name()
    idp.account(name, groups=["users"])
    client = Client(main)
    assert (await sign_in(client, name)).status_code == 302
    conversation = await client.create_conversation()
    sock = await client.socket(conversation)
    await sock.sync()
    await sock.message("hello over OIDC")
    frames = await sock.until_complete()
    assert run_text(frames) == "Hello from the fake model."
    # Its logout closes its socket on the spot, as a password session's does.
    r = await client.http.post(client.url("/accounts/logout/"), headers=client._unsafe_headers())
    assert r.status_code == 302
    assert await closed_with(sock) == 4401
    await client.aclose()


async def test_hostile_callbacks_and_next_urls(idp, main):
    name = login_name()
    idp.account(name, groups=["users"])
    client = Client(main)
    # The provider says no (the user pressed Cancel there): a page, not a 500.
    r = await client.http.get(client.url("/accounts/oidc/login/"))
    state = parse_qs(urlsplit(r.headers["location"]).query)["state"][0]
    r = await client.http.get(client.url(f"/accounts/oidc/callback/?error=access_denied&state={state}"))
    assert r.status_code == 400 and "(access_denied)" in r.text
    # Junk and huge parameters.
    for query in ("", "?state=" + "x" * 4000, "?code=&state=", "?state=%00%ff"):
        r = await client.http.get(client.url(f"/accounts/oidc/callback/{query}"))
        assert r.status_code == 400, (query, r.status_code)
    # A `next` off the site is dropped: the sign-in lands on the chat.
    callback = await to_callback(client, name, next_path="https://evil.example/steal")
    r = await client.http.get(callback)
    assert (r.status_code, r.headers["location"]) == (302, "/")
    assert "Traceback" not in main.log(None)
    await client.aclose()


async def test_only_the_last_pending_sign_ins_are_kept(idp, main):
    """A page that starts sign-ins over and over grows its session no further than PENDING_MAX;
    the oldest pending one is dropped (its callback refused), the ones kept still sign in."""
    name = login_name()
    idp.account(name, groups=["users"])
    client = Client(main)
    starts = []
    for _ in range(PENDING_MAX + 3):
        r = await client.http.get(client.url("/accounts/oidc/login/"))
        starts.append(r.headers["location"])
    sql = "SELECT session_data FROM chat_user_session WHERE session_key = ?"
    ((data,),) = rows(main.database_url, sql, client.http.cookies["sessionid"])
    session = SessionStore().decode(data)
    states = [parse_qs(urlsplit(url).query)["state"][0] for url in starts]
    assert sorted(k for k in session if k.startswith("_state_oidc_")) == sorted(f"_state_oidc_{s}" for s in states[3:])
    assert sorted(k for k in session if k.startswith("oidc_next_")) == sorted(f"oidc_next_{s}" for s in states[3:])
    dropped = await client.http.get(await through_provider(client, starts[2], name))
    assert dropped.status_code == 400 and "This sign-in expired" in dropped.text
    kept = await client.http.get(await through_provider(client, starts[3], name))
    assert (kept.status_code, kept.headers["location"]) == (302, "/")
    await client.aclose()


FORGED = "\r\n2099-01-01 00:00:00,000 INFO chat.accounts.oidc: oidc sign-in of user 1 (admin)\x1b[2J\u2028"


async def test_request_values_cannot_forge_log_lines(idp, main):
    """A provider's error text and a path, each with CR, LF, ESC and a line separator, reach the log
    (through the project's LOGGING, on a real daphne) as one line each, escaped."""
    client = Client(main)
    r = await client.http.get(client.url("/accounts/oidc/login/"))
    state = parse_qs(urlsplit(r.headers["location"]).query)["state"][0]
    query = urlencode({"error": "access_denied", "error_description": FORGED, "state": state})
    assert (await client.http.get(client.url(f"/accounts/oidc/callback/?{query}"))).status_code == 400
    assert (await client.http.get(client.url("/nowhere/" + quote(FORGED)))).status_code == 404
    # A raw ESC in the request line is refused by daphne's HTTP layer before its access log.
    reader, writer = await asyncio.open_connection("127.0.0.1", main.port)
    writer.write(b"GET /raw\x1b[2Jpath HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    await writer.drain()
    assert (await reader.read()).startswith(b"HTTP/1.1 400 ")
    writer.close()
    await client.aclose()
    escaped = "\\r\\n2099-01-01 00:00:00,000 INFO chat.accounts.oidc: oidc sign-in of user 1 (admin)\\x1b[2J\\u2028"
    log = main.log(None)
    assert "\x1b" not in log and "\r" not in log and "\u2028" not in log
    assert not [line for line in log.splitlines() if line.startswith("2099-")]
    (failure,) = [line for line in log.splitlines() if "oidc sign-in failed:" in line and "2099" in line]
    assert failure.endswith(f"oidc sign-in failed: provider error: access_denied: {escaped}"), failure
    (not_found,) = [line for line in log.splitlines() if "Not Found:" in line and "2099" in line]
    assert not_found.endswith(f"WARNING django.request: Not Found: /nowhere/{escaped}"), not_found
    # daphne's access log names the path as the client sent it, percent-encoded.
    assert any('"GET /nowhere/%0D%0A2099-01-01' in line for line in log.splitlines())
