"""The agent cards (docs/protocol.md, "A2A agent"): the public card of the server at
`/.well-known/agent-card.json` (the `default` agent, its skills the agents open to everyone),
each agent's card at `/a2a/<slug>/.well-known/agent-card.json`, and the extended card
(GetExtendedAgentCard), whose skills are every agent the token's user may use. Built as the SDK's
AgentCard and written as the SDK's own card route writes it."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_1_0, TransportProtocol
from django.conf import settings
from django.http import JsonResponse
from django.views.decorators.http import require_http_methods

from chat.agents.selectors import agent_profiles_for_user
from chat.doors.http.run_answers import request_user
from chat.models import DEFAULT_AGENT_NAME, DEFAULT_AGENT_SLUG, AgentProfile
from serving.loop_middleware import request_db

try:
    SERVER_VERSION = version("agentsite")
except PackageNotFoundError:  # a checkout run without being installed
    SERVER_VERSION = "0"
TEXT = "text/plain"
SCHEME = "bearer"


def endpoint_path(slug: str) -> str:
    return f"/a2a/{slug}/"


def _skill(profile: AgentProfile | None) -> AgentSkill:
    name = profile.name if profile is not None else DEFAULT_AGENT_NAME
    slug = profile.slug if profile is not None else DEFAULT_AGENT_SLUG
    return AgentSkill(id=slug, name=name, description=_description(profile), tags=["agent"])


def _description(profile: AgentProfile | None) -> str:
    if profile is not None and profile.description:
        return profile.description
    return f"Ask the agent {profile.name if profile is not None else DEFAULT_AGENT_NAME}."


def card(*, origin: str, profile: AgentProfile | None, skills: list[AgentProfile | None], public: bool) -> AgentCard:
    """The card of the agent `profile` (None: `default`; `public`: the server's own card, named
    after AGENT_SITE_NAME), listing `skills`."""
    slug = profile.slug if profile is not None else DEFAULT_AGENT_SLUG
    name = settings.AGENT_SITE_NAME if public else (profile.name if profile is not None else DEFAULT_AGENT_NAME)
    description = (
        f"The agents of {settings.AGENT_SITE_NAME}: each skill is an agent, answering at /a2a/<skill id>/."
        if public
        else _description(profile)
    )
    return AgentCard(
        name=name,
        description=description,
        version=SERVER_VERSION,
        supported_interfaces=[
            AgentInterface(
                url=f"{origin}{endpoint_path(slug)}",
                protocol_binding=TransportProtocol.JSONRPC,
                protocol_version=PROTOCOL_VERSION_1_0,
            )
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False, extended_agent_card=True),
        security_schemes={
            SCHEME: SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer", bearer_format="agentsite API token")
            )
        },
        security_requirements=[SecurityRequirement(schemes={SCHEME: StringList(list=[])})],
        default_input_modes=[TEXT],
        default_output_modes=[TEXT],
        skills=[_skill(skill) for skill in skills],
    )


def origin_of(request) -> str:
    """The scheme, host and port the request reached (forwarded ones behind TRUSTED_PROXIES)."""
    return f"{request.scheme}://{request.get_host()}"


def _open_to_everyone() -> list[AgentProfile]:
    return list(AgentProfile.objects.filter(enabled=True, everyone=True).order_by("name", "slug"))


def users_agents(*, user) -> list[AgentProfile | None]:
    """The agents of GET /api/agents/: `default` first, then the profiles open to the user."""
    return [None, *agent_profiles_for_user(user=user)]


def _agent_card_json(request, slug: str, user) -> dict | None:
    """The card of the agent `slug` for whoever asks (`user` None: nobody signed in): `default`
    and the agents open to everyone for anyone, the others only for a user who may use them."""
    if slug == DEFAULT_AGENT_SLUG:
        profile = None
    else:
        found = agent_profiles_for_user(user=user) if user is not None else AgentProfile.objects.filter(everyone=True)
        profile = found.filter(enabled=True, slug=slug).first() if "\x00" not in slug else None
        if profile is None:
            return None
    return agent_card_to_dict(card(origin=origin_of(request), profile=profile, skills=[profile], public=False))


def _public_card_json(request) -> dict:
    skills: list[AgentProfile | None] = [None, *_open_to_everyone()]
    return agent_card_to_dict(card(origin=origin_of(request), profile=None, skills=skills, public=True))


def not_served() -> JsonResponse:
    """Every A2A route while AGENT_A2A is off."""
    return JsonResponse({"error": "not_found", "message": "A2A is not served here."}, status=404)


@require_http_methods(["GET"])
async def public_card(request):
    """GET /.well-known/agent-card.json: no token needed."""
    if not settings.AGENT_A2A:
        return not_served()
    return JsonResponse(await request_db(_public_card_json)(request))


@require_http_methods(["GET"])
async def agent_card(request, slug: str):
    """GET /a2a/<slug>/.well-known/agent-card.json: a private agent's only with the token of a
    user who may use it (404 otherwise, as an unknown slug)."""
    if not settings.AGENT_A2A:
        return not_served()
    token = getattr(request, "api_token", None)
    user = await request_user(request) if token is not None else None
    found = await request_db(_agent_card_json)(request, slug, user)
    if found is None:
        return JsonResponse({"error": "not_found", "message": "No such agent."}, status=404)
    return JsonResponse(found)
