"""System checks: misconfiguration is reported at start-up, not at the first run."""

from __future__ import annotations

import re
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.core import checks
from django.core.checks.security import base as security_checks
from django.core.checks.security import csrf as csrf_checks
from django.core.checks.security import sessions as session_checks
from django.test.utils import override_settings

from chat.accounts.budgets import reserve_setting
from chat.conversations.images import parse_box
from chat.http_urls import http_url_problem
from chat.mcp.config import read
from chat.pricing import price_problems
from chat.runtime.build import tool_settings
from chat.tools import BUILTIN_TOOLS
from chat.tools.sandbox import SandboxUnavailable, check_available
from chat.tools.skill_catalogue import discover
from serving.loop_middleware import django_names

# The MCP server name that would make tools `agent__<tool>`: the prefix of delegate tools.
RESERVED_MCP_SERVER = "agent"


@checks.register()
def check_agent_settings(app_configs, **kwargs):
    errors = []
    if not settings.AGENT_MODEL:
        errors.append(
            checks.Error(
                "OPENAI_API_KEY is set but AGENT_MODEL is not.",
                hint="Set AGENT_MODEL to the model name of your endpoint, e.g. gpt-4o-mini or deepseek-chat.",
                id="agentsite.E001",
            )
        )
    unknown = [name for name in settings.AGENT_TOOLS if name not in BUILTIN_TOOLS]
    if unknown:
        errors.append(
            checks.Error(
                f"AGENT_TOOLS names unknown tools: {', '.join(unknown)}.",
                hint=f"Known tools: {', '.join(sorted(BUILTIN_TOOLS))}.",
                id="agentsite.E002",
            )
        )
    numbers = {
        "AGENT_MAX_RETRIES": (settings.AGENT_MAX_RETRIES, 0),
        "AGENT_RETRY_INTERVAL": (settings.AGENT_RETRY_INTERVAL, 0),
        "AGENT_MAX_ITERATIONS": (settings.AGENT_MAX_ITERATIONS, 1),
        "AGENT_MAX_MESSAGE_CHARS": (settings.AGENT_MAX_MESSAGE_CHARS, 1),
        "AGENT_STREAM_FLUSH_MS": (settings.AGENT_STREAM_FLUSH_MS, 0),
        "AGENT_STREAM_FLUSH_MAX_MS": (settings.AGENT_STREAM_FLUSH_MAX_MS, 0),
        "AGENT_MAX_RESUMES": (settings.AGENT_MAX_RESUMES, 0),
        "AGENT_MAX_QUEUED": (settings.AGENT_MAX_QUEUED, 0),
        "AGENT_SCHEDULE_MIN_SECONDS": (settings.AGENT_SCHEDULE_MIN_SECONDS, 1),
        "AGENT_MAX_SCHEDULES": (settings.AGENT_MAX_SCHEDULES, 0),
        "AGENT_SCHEDULE_POLL_SECONDS": (settings.AGENT_SCHEDULE_POLL_SECONDS, 0.1),
        "AGENT_SCHEDULE_CATCHUP": (settings.AGENT_SCHEDULE_CATCHUP, 0),
        "AGENT_MAX_DELEGATION_DEPTH": (settings.AGENT_MAX_DELEGATION_DEPTH, 0),
        "AGENT_DAILY_TOKEN_QUOTA": (settings.AGENT_DAILY_TOKEN_QUOTA, 0),
        "AGENT_MAX_UPLOAD_BYTES": (settings.AGENT_MAX_UPLOAD_BYTES, 1),
        "AGENT_IMAGE_MAX_INPUT_PIXELS": (settings.AGENT_IMAGE_MAX_INPUT_PIXELS, 1),
        "AGENT_IMAGE_DECODES": (settings.AGENT_IMAGE_DECODES, 1),
        "AGENT_CONTEXT_TOKENS": (settings.AGENT_CONTEXT_TOKENS, 1),
        "AGENT_COMPACT_KEEP_TURNS": (settings.AGENT_COMPACT_KEEP_TURNS, 1),
        "AGENT_COMPACT_MAX_MESSAGES": (settings.AGENT_COMPACT_MAX_MESSAGES, 0),
        "AGENT_MCP_SESSION_IDLE": (settings.AGENT_MCP_SESSION_IDLE, 1),
    }
    for name, (value, minimum) in numbers.items():
        if value < minimum:
            errors.append(checks.Error(f"{name} must be at least {minimum}, not {value}.", id="agentsite.E003"))
    if not 0 <= settings.AGENT_COMPACT_AT <= 1:
        errors.append(
            checks.Error(f"AGENT_COMPACT_AT must be from 0 to 1, not {settings.AGENT_COMPACT_AT}.", id="agentsite.E003")
        )
    for name in ("AGENT_TEMPERATURE", "AGENT_MAX_TOKENS", "AGENT_TOP_P"):
        value = getattr(settings, name)
        try:
            if value is not None:
                float(value)
        except (TypeError, ValueError):
            errors.append(checks.Error(f"{name} must be a number, not {value!r}.", id="agentsite.E004"))
    errors += [
        checks.Error(
            f"AGENT_MODEL_PRICES: {problem}.",
            hint='For example {"gpt-4o-mini": {"input": 0.15, "output": 0.6}} ($ per million tokens).',
            id="agentsite.E005",
        )
        for problem in price_problems(settings.AGENT_MODEL_PRICES)
    ]
    try:
        ZoneInfo(settings.TIME_ZONE)
    except (ValueError, ZoneInfoNotFoundError):
        errors.append(checks.Error(f"TIME_ZONE: unknown zone {settings.TIME_ZONE!r}.", id="agentsite.E007"))
    try:
        reserve_setting(settings.AGENT_RUN_TOKEN_RESERVE)
    except ValueError as exc:
        errors.append(
            checks.Error(
                f"AGENT_RUN_TOKEN_RESERVE {exc}.",
                hint="Tokens each run reserves against its budgets, e.g. AGENT_RUN_TOKEN_RESERVE=4096; "
                "unset it to reserve the run's max_tokens.",
                id="agentsite.E008",
            )
        )
    try:
        parse_box(settings.AGENT_IMAGE_MAX_PIXELS)
    except ValueError as exc:
        errors.append(checks.Error(f"AGENT_IMAGE_MAX_PIXELS: {exc}.", id="agentsite.E006"))
    return errors


@checks.register()
def check_skills(app_configs, **kwargs):
    """Invalid skills are skipped at run time; here they are reported."""
    if "load_skill" not in settings.AGENT_TOOLS:
        return []
    _skills, problems = discover(settings.AGENT_SKILLS_DIR)
    return [
        checks.Warning(
            f"Skill skipped: {problem.path}: {problem.message}",
            hint="See the Agent Skills format: SKILL.md starts with YAML front matter holding name and description.",
            id="agentsite.W010",
        )
        for problem in problems
    ]


@checks.register()
def check_tool_prerequisites(app_configs, **kwargs):
    warnings = []
    if "web_search" in settings.AGENT_TOOLS and not settings.TAVILY_API_KEY:
        warnings.append(
            checks.Warning(
                "AGENT_TOOLS enables web_search but TAVILY_API_KEY is not set; the tool is not offered.",
                id="agentsite.W011",
            )
        )
    if "bash" in settings.AGENT_TOOLS:
        try:
            check_available(tool_settings().bash)  # the very limits a run gets
        except SandboxUnavailable as exc:
            warnings.append(
                checks.Warning(
                    f"AGENT_TOOLS enables bash, but {exc}.",
                    hint="Install bubblewrap (apt-get install bubblewrap) and allow user namespaces.",
                    id="agentsite.W012",
                )
            )
    return warnings


@checks.register()
def check_mcp_config(app_configs, **kwargs):
    """AGENT_MCP_CONFIG: the file, its shape, each server's command or URL (chat/mcp/config.py)."""
    errors = []
    if settings.AGENT_MCP_TIMEOUT <= 0:
        errors.append(checks.Error(f"AGENT_MCP_TIMEOUT must be positive, not {settings.AGENT_MCP_TIMEOUT}.",
                                   id="agentsite.E003"))  # fmt: skip
    if not settings.AGENT_MCP_CONFIG:
        return errors
    servers, problems = read(settings.AGENT_MCP_CONFIG)
    if any(server.name == RESERVED_MCP_SERVER for server in servers):
        errors.append(
            checks.Error(
                f"AGENT_MCP_CONFIG {settings.AGENT_MCP_CONFIG}: a server may not be named {RESERVED_MCP_SERVER!r}.",
                hint='Tools named agent__<slug> are the agents\' delegates (docs/protocol.md, "Sub-agents"): '
                "rename the server.",
                id="agentsite.E043",
            )
        )
    return errors + [
        checks.Warning(
            f"AGENT_MCP_CONFIG {settings.AGENT_MCP_CONFIG}: {problem.message}.",
            hint="The server's tools give tool errors until its command can be run; the other servers serve.",
            id=problem.id,
        )
        if problem.warning
        else checks.Error(
            f"AGENT_MCP_CONFIG {settings.AGENT_MCP_CONFIG}: {problem.message}.",
            hint='The file holds {"mcpServers": {"<name>": {"command", "args"?, "env"?} | {"url", "headers"?}}}.',
            id=problem.id,
        )
        for problem in problems
    ]


# What a tool name can hold (chat/mcp names and built-ins), plus fnmatch's own characters.
_APPROVAL_PATTERN = re.compile(r"[A-Za-z0-9_\-*?\[\]!]+")


@checks.register()
def check_approvals(app_configs, **kwargs):
    """AGENT_APPROVAL_TOOLS / AGENT_APPROVAL_TIMEOUT (docs/protocol.md, "Approvals")."""
    errors = []
    if settings.AGENT_APPROVAL_TIMEOUT <= 0:
        errors.append(
            checks.Error(
                f"AGENT_APPROVAL_TIMEOUT must be positive, not {settings.AGENT_APPROVAL_TIMEOUT}.",
                hint="Seconds an approval request waits for the user before it expires as denied (default 600).",
                id="agentsite.E003",
            )
        )
    errors += [
        checks.Warning(
            f"AGENT_APPROVAL_TOOLS: {pattern!r} can match no tool name, so no call waits for it.",
            hint="Tool names and fnmatch patterns, comma separated: bash,github__*",
            id="agentsite.W013",
        )
        for pattern in settings.AGENT_APPROVAL_TOOLS
        if not _APPROVAL_PATTERN.fullmatch(pattern)
    ]
    return errors


@checks.register()
def check_oidc(app_configs, **kwargs):
    """OIDC_* and ALLOW_PASSWORD_LOGIN (docs/configuration.md, "Sign-in with OpenID Connect")."""
    errors = []
    given = {"OIDC_ISSUER": settings.OIDC_ISSUER, "OIDC_CLIENT_ID": settings.OIDC_CLIENT_ID}
    given["OIDC_CLIENT_SECRET"] = settings.OIDC_CLIENT_SECRET
    missing = [name for name, value in given.items() if not value]
    if len(missing) < len(given) and missing:
        errors.append(
            checks.Error(
                f"OpenID Connect sign-in is half configured: {', '.join(missing)} not set.",
                hint="Set OIDC_ISSUER, OIDC_CLIENT_ID and OIDC_CLIENT_SECRET together (or none of them).",
                id="agentsite.E040",
            )
        )
    if settings.OIDC_ISSUER and http_url_problem(settings.OIDC_ISSUER):
        errors.append(
            checks.Error(
                f"OIDC_ISSUER must be an http(s) URL, not {settings.OIDC_ISSUER!r}.",
                hint="The issuer's URL, e.g. https://keycloak.example.com/realms/acme.",
                id="agentsite.E041",
            )
        )
    if not settings.ALLOW_PASSWORD_LOGIN and not settings.OIDC_ENABLED:
        errors.append(
            checks.Error(
                "ALLOW_PASSWORD_LOGIN is false and OpenID Connect is not configured: nobody could sign in.",
                hint="Configure OIDC_ISSUER, OIDC_CLIENT_ID and OIDC_CLIENT_SECRET, or allow password sign-in.",
                id="agentsite.E042",
            )
        )
    return errors


# Django's deployment checks of its security, session, CSRF and X-Frame-Options middleware find
# that middleware by its dotted name in MIDDLEWARE, and pass without it; the chain runs subclasses
# of those classes (serving.loop_middleware) under names of their own. So the checks that depend
# on the middleware run again here, Django's own code and warnings, with MIDDLEWARE naming the
# Django classes that the chain runs. Django's own run of them then says nothing, but for the
# middleware it cannot find by name: W001, W002, W003 and W010, W013 (the sessions app without
# the middleware), silenced in settings for that reason only.
DEPLOY_CHECKS_BY_MIDDLEWARE = (
    security_checks.check_sts,
    security_checks.check_sts_include_subdomains,
    security_checks.check_sts_preload,
    security_checks.check_content_type_nosniff,
    security_checks.check_ssl_redirect,
    security_checks.check_xframe_deny,
    security_checks.check_referrer_policy,
    security_checks.check_cross_origin_opener_policy,
    csrf_checks.check_csrf_cookie_secure,
    session_checks.check_session_cookie_secure,
    session_checks.check_session_cookie_httponly,
)


@checks.register(checks.Tags.security, deploy=True)
def check_deployment_with_loop_middleware(app_configs, **kwargs):
    with override_settings(MIDDLEWARE=django_names(list(settings.MIDDLEWARE))):
        return [problem for check in DEPLOY_CHECKS_BY_MIDDLEWARE for problem in check(app_configs)]
