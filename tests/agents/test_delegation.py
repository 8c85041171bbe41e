"""Delegates of a profile (docs/protocol.md, "Sub-agents"): what the admin refuses, what
GET /api/agents/ lists, the reserved MCP server name."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from chat.agents.form import AgentProfileForm
from chat.checks import check_mcp_config
from chat.models import AgentProfile

pytestmark = pytest.mark.django_db


def make_profile(slug: str, **fields) -> AgentProfile:
    users = fields.pop("users", [])
    groups = fields.pop("groups", [])
    fields.setdefault("name", slug.title())
    fields.setdefault("model", "demo")
    profile = AgentProfile.objects.create(slug=slug, **fields)
    profile.users.set(users)
    profile.groups.set(groups)
    return profile


def form_data(**changes) -> dict:
    data = {
        "slug": "boss",
        "name": "Boss",
        "model": "demo",
        "enabled": "on",
        "tools": "",
        "skills": "",
        "max_iterations": "10",
        "max_retries": "3",
        "retry_interval": "10",
    }
    return {**data, **changes}


def delegate_errors(instance=None, **changes) -> list[str]:
    form = AgentProfileForm(data=form_data(**changes), instance=instance)
    form.is_valid()
    return list(form.errors.get("delegates", []))


def test_a_delegate_open_to_everyone_is_saved():
    helper = make_profile("helper", everyone=True)
    form = AgentProfileForm(data=form_data(everyone="on", delegates=[helper.pk]))
    assert form.is_valid(), form.errors
    assert [d.slug for d in form.save().delegates.all()] == ["helper"]


def test_the_profile_itself_is_refused():
    boss = make_profile("boss", everyone=True)
    (error,) = delegate_errors(instance=boss, everyone="on", delegates=[boss.pk])
    assert "itself" in error


def test_a_disabled_delegate_is_refused():
    off = make_profile("off", everyone=True, enabled=False)
    (error,) = delegate_errors(everyone="on", delegates=[off.pk])
    assert "disabled" in error


def test_a_slug_too_long_for_a_tool_name_is_refused():
    fits = make_profile("a" * 57, everyone=True)
    long = make_profile("b" * 58, everyone=True)
    assert delegate_errors(everyone="on", delegates=[fits.pk]) == []
    (error,) = delegate_errors(everyone="on", delegates=[long.pk])
    assert "57" in error


def test_the_delegate_must_be_open_to_everyone_this_one_is(make_user):
    alice, bob = make_user("alice"), make_user("bob")
    team, others = Group.objects.create(name="team"), Group.objects.create(name="others")
    bob.groups.add(team)
    for_team = make_profile("for-team", groups=[team])
    for_alice = make_profile("for-alice", users=[alice])
    # Open to everyone: the delegate must be too.
    (error,) = delegate_errors(everyone="on", delegates=[for_team.pk])
    assert "everyone" in error
    # A user: by name, or through one of their groups.
    assert delegate_errors(users=[alice.pk], delegates=[for_alice.pk]) == []
    assert delegate_errors(users=[bob.pk], delegates=[for_team.pk]) == []
    (error,) = delegate_errors(users=[bob.pk], delegates=[for_alice.pk])
    assert "bob" in error
    # A group: the delegate must be open to that group (or to everyone).
    assert delegate_errors(groups=[team.pk], delegates=[for_team.pk]) == []
    (error,) = delegate_errors(groups=[others.pk], delegates=[for_team.pk])
    assert "others" in error


def test_a_cycle_may_be_saved():
    a = make_profile("a", everyone=True)
    b = make_profile("b", everyone=True)
    b.delegates.set([a])
    form = AgentProfileForm(
        data=form_data(slug="a", name="A", everyone="on", delegates=[b.pk]),
        instance=a,
    )
    assert form.is_valid(), form.errors


def test_the_agents_list_names_the_delegates_the_user_may_use(make_user):
    alice = make_user("alice")
    boss = make_profile("boss", everyone=True)
    helper = make_profile("helper", everyone=True)
    secret = make_profile("secret", users=[])
    off = make_profile("off", everyone=True, enabled=False)
    boss.delegates.set([helper, secret, off])
    client = Client()
    client.force_login(alice)
    agents = {a["slug"]: a for a in client.get("/api/agents/").json()["agents"]}
    assert agents["boss"]["delegates"] == ["helper"]
    assert agents["helper"]["delegates"] == []
    assert agents["default"]["delegates"] == []


def test_an_mcp_server_named_agent_is_refused(settings, tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"agent": {"command": "true"}}}))
    settings.AGENT_MCP_CONFIG = str(path)
    assert "agentsite.E043" in [e.id for e in check_mcp_config(None)]
    path.write_text(json.dumps({"mcpServers": {"agents": {"command": "true"}}}))
    assert "agentsite.E043" not in [e.id for e in check_mcp_config(None)]


def test_the_admin_page_sets_delegates_and_says_what_is_refused(admin_client):
    helper = make_profile("helper", everyone=True)
    narrow = make_profile("narrow")
    page = admin_client.get("/admin/chat/agentprofile/add/")
    assert page.status_code == 200 and b'name="delegates"' in page.content
    refused = admin_client.post(
        "/admin/chat/agentprofile/add/", form_data(everyone="on", delegates=[narrow.pk], approval_tools="")
    )
    assert refused.status_code == 200 and b"is not open to everyone" in refused.content
    saved = admin_client.post(
        "/admin/chat/agentprofile/add/", form_data(everyone="on", delegates=[helper.pk], approval_tools="")
    )
    assert saved.status_code == 302, saved.content[:2000]
    assert [d.slug for d in AgentProfile.objects.get(slug="boss").delegates.all()] == ["helper"]
