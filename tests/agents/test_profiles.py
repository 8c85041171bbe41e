"""Agent profiles (docs/protocol.md, "Agents"): runs built from the conversation's profile against its own
endpoint, who may use which, the API, the admin form's refusals, and the default agent unchanged."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group
from django.test import Client

from chat.agent.tools import ToolError
from chat.agents import profiles
from chat.agents.form import AgentProfileForm
from chat.agents.selectors import agent_profiles_for_user
from chat.conversations.services import conversation_create
from chat.models import API_SOURCE, AgentProfile, Event, Run
from chat.runs.requests import StartRun
from chat.runs.starter import start_run
from chat.runtime import build as assistant
from chat.tools.skills import load_skill
from tests.asgi_socket import Socket
from tests.fakellm import FakeLLM, text_reply, tool_call_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


@pytest.fixture(scope="module")
def second_llm():
    with FakeLLM() as fake:
        yield fake


@pytest.fixture
def other_llm(second_llm):
    second_llm.reset()
    yield second_llm
    second_llm.reset()


def make_profile(slug: str, **fields) -> AgentProfile:
    users = fields.pop("users", [])
    groups = fields.pop("groups", [])
    fields.setdefault("name", slug.title())
    fields.setdefault("model", f"{slug}-model")
    profile = AgentProfile.objects.create(slug=slug, **fields)
    profile.users.set(users)
    profile.groups.set(groups)
    return profile


def tool_names(request: dict) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools", [])]


async def events_of(run) -> list[dict]:
    return await sync_to_async(lambda: [e.payload for e in Event.objects.filter(run=run).order_by("seq")])()


# -- runs -----------------------------------------------------------------------------------------
async def test_two_profiles_send_each_conversation_to_its_own_server_model_and_tools(
    make_user, registry, llm_settings, other_llm, monkeypatch
):
    monkeypatch.setenv("PROFILE_A_KEY", "key-a")
    monkeypatch.setenv("PROFILE_B_KEY", "key-b")
    alice = await sync_to_async(make_user)("alice")
    first = await sync_to_async(make_profile)(
        "alpha", base_url=llm_settings.base_url, api_key_env="PROFILE_A_KEY", model="model-a",
        tools=["calculator"], system_prompt="You are Alpha.", temperature=0.2, everyone=True,
    )  # fmt: skip
    second = await sync_to_async(make_profile)(
        "beta", base_url=other_llm.base_url, api_key_env="PROFILE_B_KEY", model="model-b",
        tools=["current_time", "read_file"], max_tokens=77, users=[alice],
    )  # fmt: skip
    llm_settings.responder = lambda body: text_reply("from A")
    other_llm.responder = lambda body: text_reply("from B")
    create = sync_to_async(lambda agent: conversation_create(owner=alice, agent=agent))
    in_a, in_b = await create(first), await create(second)

    run_a, _ = await start_run(StartRun(conversation=in_a, user=alice, content="hi A"))
    run_b, _ = await start_run(StartRun(conversation=in_b, user=alice, content="hi B"))
    await registry.wait_idle()

    assert [r["model"] for r in llm_settings.requests] == ["model-a"]
    assert [r["model"] for r in other_llm.requests] == ["model-b"]
    request_a, request_b = llm_settings.requests[0], other_llm.requests[0]
    assert tool_names(request_a) == ["calculator"]
    assert tool_names(request_b) == ["current_time", "read_file"]
    assert request_a["temperature"] == 0.2 and "max_tokens" not in request_a
    assert request_b["max_tokens"] == 77 and "temperature" not in request_b
    assert request_a["messages"][0] == {"role": "system", "content": "You are Alpha."}
    events_a, events_b = await events_of(run_a), await events_of(run_b)
    assert {k: events_a[0][k] for k in ("agent", "agentName", "model")} == {
        "agent": "alpha", "agentName": "Alpha", "model": "model-a",
    }  # fmt: skip
    assert events_b[0]["agent"] == "beta" and events_b[0]["model"] == "model-b"
    assert "".join(e["content"] for e in events_a if e["type"] == "text") == "from A"
    assert "".join(e["content"] for e in events_b if e["type"] == "text") == "from B"
    rows = {r.pk: r async for r in Run.objects.filter(pk__in=[run_a.pk, run_b.pk])}
    assert (rows[run_a.pk].agent_id, rows[run_a.pk].model) == (first.pk, "model-a")
    assert (rows[run_b.pk].agent_id, rows[run_b.pk].model) == (second.pk, "model-b")
    assert rows[run_a.pk].status == rows[run_b.pk].status == "succeeded"

    # One client per endpoint and key, per process: a second run reuses it.
    clients = assistant._client.cache_info().currsize
    await start_run(StartRun(conversation=in_a, user=alice, content="again"))
    await registry.wait_idle()
    assert assistant._client.cache_info().currsize == clients == 2
    assert [r["model"] for r in llm_settings.requests] == ["model-a", "model-a"]


async def test_a_profile_s_named_tool_choice_forces_the_first_call_and_lets_the_second_answer(
    make_user, registry, llm_settings
):
    alice = await sync_to_async(make_user)("alice")
    profile = await sync_to_async(make_profile)(
        "small", base_url=llm_settings.base_url, tools=["calculator"], tool_choice="calculator", everyone=True
    )
    llm_settings.script(tool_call_reply(("calculator", {"expression": "6*7"})), text_reply("42."))
    conversation = await sync_to_async(conversation_create)(owner=alice, agent=profile)
    run, _ = await start_run(StartRun(conversation=conversation, user=alice, content="6*7?"))
    await registry.wait_idle()
    first, second = llm_settings.requests
    assert first["tool_choice"] == {"type": "function", "function": {"name": "calculator"}}
    assert "tool_choice" not in second and tool_names(second) == ["calculator"]
    events = await events_of(run)
    assert [e["type"] for e in events if e["type"].startswith("tool")] == ["tool_start", "tool_end"]
    assert events[-1]["status"] == "succeeded"


async def test_without_a_profile_the_run_is_the_environment_s_exactly_as_before(conversation, registry, llm_settings):
    run, _ = await start_run(StartRun(conversation=conversation, user=conversation.owner, content="hi"))
    await registry.wait_idle()
    (request,) = llm_settings.requests
    assert request["model"] == "fake-model"
    assert tool_names(request) == [*assistant.offered_tools(), "read_skill_file"]
    assert "temperature" not in request and "max_tokens" not in request
    first = (await events_of(run))[0]
    assert {k: first[k] for k in ("agent", "agentName", "model")} == {
        "agent": "default", "agentName": "Default", "model": "fake-model",
    }  # fmt: skip
    row = await Run.objects.aget(pk=run.pk)
    assert row.agent_id is None and row.model == "fake-model" and row.status == "succeeded"


async def test_a_profile_added_while_the_server_runs_is_used_by_the_next_run(
    conversation, registry, llm_settings, other_llm
):
    await start_run(StartRun(conversation=conversation, user=conversation.owner, content="before"))
    await registry.wait_idle()
    added = await sync_to_async(make_profile)("late", base_url=other_llm.base_url, model="late-model", everyone=True)
    client = await sync_to_async(_client_of)(conversation.owner)
    patched = await sync_to_async(client.patch)(
        f"/api/conversations/{conversation.pk}/", {"agent": "late"}, content_type="application/json"
    )
    assert patched.status_code == 200 and patched.json()["agent"] == "late"
    # The socket-side conversation object is stale (loaded before the PATCH): the start reads it again.
    run, _ = await start_run(StartRun(conversation=conversation, user=conversation.owner, content="after"))
    await registry.wait_idle()
    assert [r["model"] for r in other_llm.requests] == ["late-model"]
    assert [r["model"] for r in llm_settings.requests] == ["fake-model"]
    assert (await Run.objects.aget(pk=run.pk)).agent_id == added.pk
    # Changed in the admin: the next run sends the new model name, still without a restart.
    await AgentProfile.objects.filter(pk=added.pk).aupdate(model="renamed-model")
    await start_run(StartRun(conversation=conversation, user=conversation.owner, content="renamed"))
    await registry.wait_idle()
    assert [r["model"] for r in other_llm.requests] == ["late-model", "renamed-model"]


async def test_a_failing_endpoint_gives_model_errors_and_the_run_fails_cleanly(conversation, registry, llm_settings):
    broken = await sync_to_async(make_profile)(
        "broken", base_url="http://127.0.0.1:9/v1", model="nowhere", max_retries=1, retry_interval=0, everyone=True
    )
    conversation.agent = broken
    await conversation.asave(update_fields=["agent"])
    run, _ = await start_run(StartRun(conversation=conversation, user=conversation.owner, content="hello?"))
    await registry.wait_idle()
    events = await events_of(run)
    assert [e["type"] for e in events] == ["user_message", "error", "error", "complete"]
    assert [e["code"] for e in events[1:3]] == ["LLM_CALL_FAILED", "LLM_CALL_FAILED"]
    assert events[1]["message"].endswith("(1/1)")
    assert events[-1]["status"] == "failed"
    row = await Run.objects.aget(pk=run.pk)
    assert row.status == "failed" and row.error.startswith("LLM_CALL_FAILED") and row.model == "nowhere"
    assert llm_settings.requests == []


async def test_a_user_who_lost_access_is_refused_with_a_clear_error_frame(make_user, registry, llm_settings):
    alice = await sync_to_async(make_user)("alice")
    private = await sync_to_async(make_profile)("private", base_url=llm_settings.base_url, users=[alice])
    conversation = await sync_to_async(conversation_create)(owner=alice, agent=private)
    socket = Socket(alice, conversation.pk)
    connected, _ = await socket.connect()
    assert connected
    await socket.history()
    await sync_to_async(private.users.clear)()
    await socket.send({"type": "message", "content": "still mine?"})
    frame = await socket.recv()
    assert frame["type"] == "error" and frame["code"] == "AGENT_UNAVAILABLE" and "seq" not in frame
    assert "pick another" in frame["message"]
    assert not await Run.objects.filter(conversation=conversation).aexists()
    # Back in a group that may use it: the next message runs.
    team = await Group.objects.acreate(name="team")
    await sync_to_async(alice.groups.add)(team)
    await sync_to_async(private.groups.add)(team)
    await socket.send({"type": "message", "content": "now?"})
    frames = await socket.run_to_end()
    assert frames[-1]["status"] == "succeeded" and frames[0]["agent"] == "private"
    await socket.close()
    assert llm_settings.requests[0]["model"] == "private-model"


async def test_a_profile_s_approval_patterns_gate_its_runs(conversation, registry, llm_settings, settings):
    settings.AGENT_APPROVAL_TOOLS = []  # the environment's agent asks for nothing
    careful = await sync_to_async(make_profile)(
        "careful", base_url=llm_settings.base_url, tools=["calculator"], approval_tools="calc*", everyone=True
    )
    conversation.agent = careful
    await conversation.asave(update_fields=["agent"])
    llm_settings.script(tool_call_reply(("calculator", {"expression": "6*7"})), text_reply("42"))
    run, _ = await start_run(StartRun(conversation=conversation, user=conversation.owner, content="6*7, carefully"))
    for _ in range(200):
        if any(e["type"] == "approval_request" for e in await events_of(run)):
            break
        await asyncio.sleep(0.05)
    (request,) = [e for e in await events_of(run) if e["type"] == "approval_request"]
    assert request["toolName"] == "calculator"
    assert not any(e["type"] == "tool_start" for e in await events_of(run))  # it waits for the user
    await registry.cancel(conversation_id=conversation.pk)
    await registry.wait_idle()
    assert (await events_of(run))[-1] == {**(await events_of(run))[-1], "type": "complete", "status": "cancelled"}


# -- who may use which, and the API -----------------------------------------------------------------
def _client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_access_by_user_group_and_everyone(make_user):
    alice, bob, carol = make_user("alice"), make_user("bob"), make_user("carol")
    team = Group.objects.create(name="team")
    carol.groups.add(team)
    make_profile("open", everyone=True, vision=True)
    make_profile("for-alice", users=[alice])
    make_profile("for-team", groups=[team], users=[carol])  # two ways in: still listed once
    make_profile("off", everyone=True, enabled=False)

    def slugs(user):
        return [p.slug for p in agent_profiles_for_user(user=user)]

    assert slugs(alice) == ["for-alice", "open"]
    assert slugs(bob) == ["open"]
    assert slugs(carol) == ["for-team", "open"]
    listed = _client_of(carol).get("/api/agents/").json()["agents"]
    assert listed == [
        {"slug": "default", "name": "Default", "description": "", "model": "demo", "vision": True, "delegates": []},
        {
            "slug": "for-team",
            "name": "For-Team",
            "description": "",
            "model": "for-team-model",
            "vision": False,
            "delegates": [],
        },
        {"slug": "open", "name": "Open", "description": "", "model": "open-model", "vision": True, "delegates": []},
    ]
    bob.is_active = False
    bob.save()
    assert slugs(bob) == []
    assert Client().get("/api/agents/").status_code == 401


def test_without_profiles_the_default_agent_alone_is_listed(make_user, settings):
    settings.AGENT_MODEL = "gpt-test"
    response = _client_of(make_user("alice")).get("/api/agents/")
    assert response.json() == {
        "agents": [
            {
                "slug": "default",
                "name": "Default",
                "description": "",
                "model": "gpt-test",
                "vision": False,
                "delegates": [],
            }
        ]
    }


def test_conversations_take_an_agent_the_user_may_use(make_user):
    alice, bob = make_user("alice"), make_user("bob")
    make_profile("mine", users=[alice])
    make_profile("bobs", users=[bob])
    make_profile("off", users=[alice], enabled=False)
    api = _client_of(alice)
    post = lambda body: api.post("/api/conversations/", body, content_type="application/json")  # noqa: E731
    created = post({"title": "t", "agent": "mine"})
    assert created.status_code == 201 and created.json()["agent"] == "mine"
    conversation_id = created.json()["id"]
    assert api.get(f"/api/conversations/{conversation_id}/").json()["agent"] == "mine"
    assert api.get("/api/conversations/").json()["conversations"][0]["agent"] == "mine"
    for refused in ("bobs", "off", "nope"):
        response = post({"agent": refused})
        assert response.status_code == 404 and response.json()["message"] == "No such agent."
    assert post({"agent": 3}).status_code == 400
    url = f"/api/conversations/{conversation_id}/"
    patch = lambda body: api.patch(url, body, content_type="application/json")  # noqa: E731
    assert patch({"agent": "bobs"}).status_code == 404
    assert patch({"agent": None}).status_code == 400
    assert patch({}).status_code == 400
    assert patch({"agent": "default"}).json()["agent"] == "default"
    both = patch({"agent": "mine", "title": "Renamed"}).json()
    assert (both["agent"], both["title"]) == ("mine", "Renamed")
    # Another user's conversation stays a 404, whatever the agent.
    assert _client_of(bob).patch(url, {"agent": "bobs"}, content_type="application/json").status_code == 404
    assert post({}).json()["agent"] == "default"


# -- the config a run is built from ------------------------------------------------------------------
def test_profile_config_reads_the_key_variable_and_exposes_approval_patterns(monkeypatch, settings):
    monkeypatch.setenv("MY_KEY", "sk-profile")
    settings.AGENT_APPROVAL_TOOLS = ["bash"]
    profile = make_profile(
        "cfg", api_key_env="MY_KEY", tools=["calculator", "web_search", "files__*"], skills=["csv-data-summary"],
        approval_tools="github__*, bash",
    )  # fmt: skip
    config = profiles.config_for(profile)
    assert config.api_key == "sk-profile" and "sk-profile" not in repr(config)
    assert config.tools == ("calculator",)  # web_search: no Tavily key on this server
    assert config.mcp_tools == ("files__*",)
    assert config.skills == frozenset({"csv-data-summary"})
    assert config.approval_tools == ("github__*", "bash")
    profile.approval_tools = ""
    assert profiles.config_for(profile).approval_tools == ("bash",)
    monkeypatch.delenv("MY_KEY")
    assert profiles.config_for(profile).api_key == "unset"  # the endpoint refuses it: a model error, not a crash
    assert profiles.config_for(None).slug == "default"


async def test_a_profile_s_skills_are_the_only_ones_listed_and_loadable():
    config = await sync_to_async(lambda: profiles.config_for(AgentProfile(
        slug="s", name="S", model="m", tools=["load_skill"], skills=["csv-data-summary"]
    )))()  # fmt: skip
    agent = assistant.build_agent(config=config)
    assert "csv-data-summary" in agent.system_prompt and "code-review-checklist" not in agent.system_prompt
    context = assistant.tool_context(conversation_id="c", config=config)
    assert (await load_skill("csv-data-summary", context)).startswith("# Skill: csv-data-summary")
    with pytest.raises(ToolError, match="no skill named 'code-review-checklist'; available skills: csv-data-summary"):
        await load_skill("code-review-checklist", context)
    every = assistant.build_agent()
    assert "code-review-checklist" in every.system_prompt


# -- the admin form ------------------------------------------------------------------------------------
VALID = {
    "slug": "fast",
    "name": "Fast",
    "description": "Quick answers",
    "enabled": "on",
    "base_url": "https://api.example.com/v1",
    "api_key_env": "FAST_API_KEY",
    "model": "fast-1",
    "system_prompt": "",
    "tools": "calculator, current_time\nload_skill",
    "skills": "csv-data-summary",
    "approval_tools": "bash\n github__*",
    "temperature": "0.7",
    "max_tokens": "",
    "top_p": "",
    "max_iterations": "10",
    "max_retries": "3",
    "retry_interval": "10",
    "everyone": "on",
}


@pytest.fixture
def key_set(monkeypatch):
    monkeypatch.setenv("FAST_API_KEY", "sk-fast")


def form_errors(**changes) -> dict[str, list[str]]:
    form = AgentProfileForm(data={**VALID, **changes})
    form.is_valid()
    return {field: list(messages) for field, messages in form.errors.items()}


def test_a_valid_profile_is_saved_with_its_lists(key_set):
    form = AgentProfileForm(data=VALID)
    assert form.is_valid(), form.errors
    profile = form.save()
    assert profile.tools == ["calculator", "current_time", "load_skill"]
    assert profile.skills == ["csv-data-summary"]
    assert profile.approval_tools == "bash, github__*"
    assert "calculator, current_time, load_skill" in str(AgentProfileForm(instance=profile)["tools"])


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"tools": "calculator, telepathy"}, "tools", "'telepathy' is not a built-in tool"),
        ({"tools": "github__create_issue"}, "tools", "'github__create_issue' names no configured MCP server 'github'"),
        ({"skills": "astrology"}, "skills", "'astrology' is not a skill of AGENT_SKILLS_DIR"),
        (
            {"api_key_env": "UNSET_VARIABLE_XYZ"},
            "api_key_env",
            "UNSET_VARIABLE_XYZ is not set in the server's environment",
        ),
        ({"api_key_env": "SECRET_KEY"}, "api_key_env", "SECRET_KEY is one of the server's own secrets"),
        ({"api_key_env": "not a name"}, "api_key_env", "'not a name' is not an environment variable name"),
        ({"base_url": "ftp://files.example.com"}, "base_url", "is not an http:// or https:// URL with a host"),
        ({"base_url": "http://"}, "base_url", "is not an http:// or https:// URL with a host"),
        ({"base_url": "http://host:99999/v1"}, "base_url", "not a valid URL"),
        ({"temperature": "3"}, "temperature", "temperature must be between 0 and 2."),
        ({"top_p": "1.5"}, "top_p", "top_p must be between 0 and 1."),
        ({"max_tokens": "0"}, "max_tokens", "max tokens must be between 1 and 1e+06."),
        ({"max_iterations": "0"}, "max_iterations", "max iterations must be between 1 and 100."),
        ({"max_retries": "11"}, "max_retries", "max retries must be between 0 and 10."),
        ({"retry_interval": "-1"}, "retry_interval", "retry interval must be between 0 and 300."),
        ({"slug": "default"}, "slug", "'default' names the server's environment configuration."),
        ({"approval_tools": "bash, a/b"}, "approval_tools", "'a/b' can match no tool name"),
        ({"approval_tools": "git(hub)"}, "approval_tools", "'git(hub)' can match no tool name"),
        (
            {"tool_choice": "bash"},
            "tool_choice",
            "'bash' is neither auto, none, required nor one of this agent's tools",
        ),
    ],
)
def test_the_admin_form_refuses(key_set, changes, field, message):
    errors = form_errors(**changes)
    assert list(errors) == [field]
    assert message in " ".join(errors[field])


@pytest.mark.parametrize("choice", ["", "auto", "none", "required", "current_time"])
def test_a_tool_choice_is_a_mode_or_one_of_the_profile_s_tools(key_set, choice):
    form = AgentProfileForm(data={**VALID, "tool_choice": f" {choice} "})
    assert form.is_valid(), form.errors
    assert form.save().tool_choice == choice


def test_mcp_tools_are_accepted_for_a_configured_server(key_set, settings, tmp_path):
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"files": {"command": sys.executable, "args": ["-c", "pass"]}}}))
    settings.AGENT_MCP_CONFIG = str(config)
    assert form_errors(tools="files__*, files__read, calculator") == {}
    errors = form_errors(tools="files__")
    assert errors["tools"] == ["'files__' names no tool: write files__<tool> or files__*."]
    assert "(servers: files)" in form_errors(tools="other__x")["tools"][0]


def test_the_admin_adds_a_profile_through_the_form(key_set, admin_client):
    page = admin_client.get("/admin/chat/agentprofile/add/")
    assert page.status_code == 200 and b"API key variable" in page.content
    body = {**VALID, "tools": "calculator, nonsense"}
    refused = admin_client.post("/admin/chat/agentprofile/add/", body)
    assert refused.status_code == 200 and b"&#x27;nonsense&#x27; is not a built-in tool" in refused.content
    saved = admin_client.post("/admin/chat/agentprofile/add/", VALID)
    assert saved.status_code == 302
    assert AgentProfile.objects.get(slug="fast").tools == ["calculator", "current_time", "load_skill"]


def test_a_profile_saved_without_tools_says_it_has_none(key_set, admin_client):
    page = admin_client.get("/admin/chat/agentprofile/add/")
    assert b"Empty: this agent has no tools at all" in page.content  # said next to the field
    with_tools = admin_client.post("/admin/chat/agentprofile/add/", VALID, follow=True)
    assert [str(m) for m in with_tools.context["messages"] if m.level_tag == "warning"] == []
    toolless = admin_client.post(
        "/admin/chat/agentprofile/add/", {**VALID, "slug": "plain", "name": "Plain", "tools": ""}, follow=True
    )
    assert toolless.status_code == 200
    warnings = [str(m) for m in toolless.context["messages"] if m.level_tag == "warning"]
    assert warnings == ["“Plain” has no tools: its model will answer without calling any."]
    assert AgentProfile.objects.get(slug="plain").tools == []


def test_a_responses_run_is_unattended_with_its_instructions_whatever_its_conversation(settings):
    page = profiles.start_config(None, source="", options=None)
    assert not page.unattended and page.instructions is None
    responses = profiles.start_config(
        None, source="", options=None, via=profiles.RESPONSES_VIA, instructions="Answer in French."
    )
    assert responses.unattended and responses.instructions == "Answer in French."
    assert responses.compacts  # the server keeps its conversation: it may compact
    other = profiles.start_config(None, source="", options=None, via="schedule", instructions="ignored")
    assert not other.unattended and other.instructions is None


def test_an_agui_run_is_attended_with_its_context_whatever_its_conversation():
    context = {"context": [{"description": "Page", "value": "/pricing"}, {"description": "Plan", "value": "pro"}]}
    instructions = profiles.door_instructions(context)
    assert instructions == "Page: /pricing\nPlan: pro"
    agui = profiles.start_config(
        None, source=API_SOURCE, options=None, via=profiles.AGUI_VIA, instructions=instructions
    )
    assert not agui.unattended and agui.compacts and agui.instructions == instructions
    assert profiles.start_config(None, source=API_SOURCE, options=None).unattended  # a /v1 conversation's own
    assert profiles.door_instructions({"instructions": "Be brief."}) == "Be brief."
    assert profiles.door_instructions({"threadId": "t"}) is None and profiles.door_instructions(None) is None
