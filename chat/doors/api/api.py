"""The JSON API (docs/protocol.md, "The JSON API"): session-authenticated, CSRF-checked, owner-only.

Another user's conversation answers 404 exactly like a missing one, so ids leak nothing.
"""

from __future__ import annotations

import asyncio
import uuid

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.http import HttpResponse, JsonResponse
from django.utils import timezone
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_http_methods
from prometheus_client import CONTENT_TYPE_LATEST

from chat.agent.text import invalid_reason
from chat.agents.profiles import default_config, profile_config
from chat.agents.selectors import agent_chosen, agent_profiles_for_user
from chat.conversations import importing
from chat.conversations.export import export_filename, export_markdown
from chat.conversations.importing import ImportRefused, parse_import_file
from chat.conversations.selectors import (
    CONVERSATION_PAGE,
    conversation_for_user,
    conversations_page,
    feedback_of_conversation,
    run_for_user,
    usage_for_user,
)
from chat.conversations.services import (
    FEEDBACK_COMMENT_MAX,
    TITLE_MAX,
    conversation_create,
    conversation_delete,
    conversation_organize,
    conversation_rename,
    conversation_set_agent,
    conversation_view_version,
    feedback_set,
)
from chat.conversations.usage import MAX_DAYS, usage_window
from chat.doors.api.event_pages import events_response
from chat.doors.api.export_streams import conversation_body, export_response
from chat.doors.http.json_api import BodyTooLarge, api_login_required, json_body, json_error, limited_body, text_field
from chat.eventlog.reads import events_for_export
from chat.inspector import trace as run_traces
from chat.models import DEFAULT_AGENT_NAME, DEFAULT_AGENT_SLUG, AgentProfile, Conversation, TitleSource
from chat.ops import metrics as metrics_series
from chat.realtime.ending import end_channel
from chat.runtime.writer import get_writer

MAX_QUERY_CHARS = 200
NOT_FOUND = {"error": "not_found", "message": "No such conversation."}
RUN_NOT_FOUND = {"error": "not_found", "message": "No such run."}
AGENT_NOT_FOUND = {"error": "not_found", "message": "No such agent."}
PATCHABLE = {"title", "agent", "viewed_seq", "pinned", "archived"}
ARCHIVED_VALUES = {"0": False, "1": True, "false": False, "true": True}


def _title(body: dict, *, required: bool) -> str | None:
    if "title" not in body:
        if required:
            raise ValueError("title is required")
        return None
    return text_field(body["title"], "title", TITLE_MAX)


UNCHANGED = object()


def _flag(body: dict, name: str) -> bool | None:
    """`pinned` or `archived` of a PATCH: a JSON boolean, None when the body has none."""
    if name not in body:
        return None
    if not isinstance(body[name], bool):
        raise ValueError(f"{name} must be true or false")
    return body[name]


def _viewed_seq(body: dict):
    """`viewed_seq` of a PATCH: a seq (checked by the service), None for the newest branch, or
    UNCHANGED when the body has none."""
    if "viewed_seq" not in body:
        return UNCHANGED
    seq = body["viewed_seq"]
    # Bounded as the column is: a larger number would be a database error, not a 400.
    if seq is not None and (not isinstance(seq, int) or isinstance(seq, bool) or not 1 <= seq < 2**63):
        raise ValueError("viewed_seq must be the seq of a user_message of this conversation, or null")
    return seq


def agent_json(profile: AgentProfile | None, *, usable: frozenset[int] = frozenset()) -> dict:
    """An agent as GET /api/agents/ lists it; `vision`: its model is shown attached images (the
    demo model always is), so the page can say beforehand when an image will not be;
    `delegates`: the slugs of its delegates among `usable` (the profiles the user may use)."""
    if profile is None:
        return {
            "slug": DEFAULT_AGENT_SLUG,
            "name": DEFAULT_AGENT_NAME,
            "description": "",
            "model": settings.AGENT_MODEL,
            "vision": default_config().sees_images,
            "delegates": [],
        }
    return {
        "slug": profile.slug,
        "name": profile.name,
        "description": profile.description,
        "model": profile.model,
        "vision": profile_config(profile).sees_images,
        "delegates": sorted(d.slug for d in profile.delegates.all() if d.pk in usable and d.pk != profile.pk),
    }


def conversation_json(conversation: Conversation, *, running: bool | None = None) -> dict:
    out = {
        "id": str(conversation.pk),
        "title": conversation.title,
        "titleSource": conversation.title_source,
        "pinned": conversation.pinned,
        "archived": conversation.archived,
        "agent": conversation.agent.slug if conversation.agent_id else DEFAULT_AGENT_SLUG,
        "created_at": conversation.created_at.isoformat(),
        "updated_at": conversation.updated_at.isoformat(),
        "running": bool(getattr(conversation, "running", False) if running is None else running),
        **({"source": conversation.source} if conversation.source else {}),
        **({"scheduleId": str(conversation.schedule_id)} if conversation.schedule_id else {}),
        **({"triggerId": str(conversation.trigger_id)} if conversation.trigger_id else {}),
        "viewed_seq": conversation.viewed_seq,
    }
    if hasattr(conversation, "snippet"):  # a search hit
        out["snippet"] = conversation.snippet
    return out


@require_http_methods(["GET", "POST"])
@api_login_required
def conversations(request):
    if request.method == "GET":
        return _conversation_list(request)
    try:
        body = json_body(request)
        title = _title(body, required=False) or ""
        agent = agent_chosen(user=request.user, slug=body["agent"]) if "agent" in body else None
    except ValueError as exc:
        return json_error(400, "bad_request", str(exc))
    except LookupError:
        return JsonResponse(AGENT_NOT_FOUND, status=404)
    # A title given is the user's; without one the first message stands in until one is generated.
    source = TitleSource.USER if title.strip() else TitleSource.DEFAULT
    conversation = conversation_create(owner=request.user, title=title, agent=agent, title_source=source)
    return JsonResponse(conversation_json(conversation, running=False), status=201)


def _conversation_list(request) -> JsonResponse:
    """A page (docs/protocol.md, "Conversations"): `limit` (default 50, at most 200) and `before`, the `next`
    cursor of the previous page; `q` keeps the conversations that match it, each with a `snippet`;
    `archived=1` lists the archived ones alone, which the list leaves out otherwise."""
    limit = request.GET.get("limit", "")
    if limit and not (limit.isascii() and limit.isdigit() and len(limit) <= 9 and int(limit) >= 1):
        return json_error(400, "bad_request", "limit must be a whole number from 1 (at most 200 are sent)")
    q = request.GET.get("q", "")
    if len(q) > MAX_QUERY_CHARS:
        return json_error(400, "bad_request", f"q is longer than {MAX_QUERY_CHARS} characters")
    if invalid_reason(q):
        return json_error(400, "bad_request", f"q contains text that cannot be searched: {invalid_reason(q)}")
    archived = request.GET.get("archived", "0")
    if archived not in ARCHIVED_VALUES:
        return json_error(400, "bad_request", "archived must be 1 (the archived conversations alone) or 0")
    try:
        page, cursor = conversations_page(
            user=request.user,
            limit=int(limit) if limit else CONVERSATION_PAGE,
            before=request.GET.get("before") or None,
            q=q,
            archived=ARCHIVED_VALUES[archived],
        )
    except ValueError as exc:
        return json_error(400, "bad_request", str(exc))
    return JsonResponse({"conversations": [conversation_json(c) for c in page], "next": cursor})


@require_http_methods(["GET", "PATCH", "DELETE"])
@api_login_required
def conversation_detail(request, conversation_id: uuid.UUID):
    conversation = conversation_for_user(user=request.user, conversation_id=conversation_id)
    if conversation is None:
        return JsonResponse(NOT_FOUND, status=404)
    if request.method == "GET":
        return JsonResponse(conversation_json(conversation))
    if request.method == "PATCH":
        try:
            body = json_body(request)
            if not PATCHABLE & body.keys():
                raise ValueError("title, agent, viewed_seq, pinned or archived is required")
            title = _title(body, required=False)
            changes_agent = "agent" in body
            agent = agent_chosen(user=request.user, slug=body["agent"]) if changes_agent else None
            pinned, archived = _flag(body, "pinned"), _flag(body, "archived")
            viewed_seq = _viewed_seq(body)
            if viewed_seq is not UNCHANGED:
                conversation_view_version(conversation=conversation, seq=viewed_seq)
        except ValueError as exc:  # NotAUserMessage among them
            return json_error(400, "bad_request", str(exc))
        except LookupError:
            return JsonResponse(AGENT_NOT_FOUND, status=404)
        if title is not None:
            conversation_rename(conversation=conversation, title=title)
        if changes_agent:
            conversation_set_agent(conversation=conversation, agent=agent)
        conversation_organize(conversation=conversation, pinned=pinned, archived=archived)
        return JsonResponse(conversation_json(conversation))
    conversation_delete(conversation=conversation)
    return HttpResponse(status=204)


@require_http_methods(["GET"])
@api_login_required
def conversation_events(request, conversation_id: uuid.UUID):
    conversation = conversation_for_user(user=request.user, conversation_id=conversation_id)
    if conversation is None:
        return JsonResponse(NOT_FOUND, status=404)
    try:
        after = int(request.GET.get("after", "0"))
    except ValueError:
        return json_error(400, "bad_request", "after must be an integer")
    return events_response(conversation_id=conversation.pk, after=max(0, after))


def feedback_json(feedback) -> dict:
    return {
        "runId": str(feedback.run_id),
        "rating": feedback.rating,
        "comment": feedback.comment,
        "updatedAt": feedback.updated_at.isoformat(),
    }


def _feedback_fields(body: dict) -> tuple[int, str]:
    rating = body.get("rating")
    # bool is an int in Python: `true` is not a rating.
    if type(rating) is not int or rating not in (1, -1):
        raise ValueError("rating must be 1 or -1")
    comment = body.get("comment", "")
    return rating, text_field("" if comment is None else comment, "comment", FEEDBACK_COMMENT_MAX)


@require_http_methods(["POST"])
@api_login_required
def run_feedback(request, run_id: uuid.UUID):
    """The owner rates a finished run's answer; posting again replaces the rating (docs/protocol.md, "Feedback")."""
    run = run_for_user(user=request.user, run_id=run_id)
    if run is None:
        return JsonResponse(RUN_NOT_FOUND, status=404)
    try:
        rating, comment = _feedback_fields(json_body(request))
    except ValueError as exc:
        return json_error(400, "bad_request", str(exc))
    if run.status == run.Status.RUNNING:
        return json_error(409, "run_in_progress", "The answer is not finished yet.")
    feedback = feedback_set(run=run, user=request.user, rating=rating, comment=comment)
    return JsonResponse(feedback_json(feedback))


@require_http_methods(["GET"])
@api_login_required
def conversation_feedback(request, conversation_id: uuid.UUID):
    """The ratings given in a conversation, so that a page shows them after a reload."""
    conversation = conversation_for_user(user=request.user, conversation_id=conversation_id)
    if conversation is None:
        return JsonResponse(NOT_FOUND, status=404)
    feedback = feedback_of_conversation(conversation_id=conversation.pk)
    return JsonResponse({"feedback": [feedback_json(f) for f in feedback]})


@require_http_methods(["GET"])
def run_trace(request, run_id: uuid.UUID):
    """The run inspector's data (docs/protocol.md, "Run trace"): staff only; for anyone else, signed in
    or not, the run does not exist, so ids leak nothing."""
    trace = run_traces.run_trace(run_id=run_id) if request.user.is_active and request.user.is_staff else None
    if trace is None:
        return json_error(404, "not_found", "No such run.")
    return JsonResponse(trace)


@require_http_methods(["GET"])
@api_login_required
def agents(request):
    """The agents this user may pick (docs/protocol.md, "Agents"): the default (the environment's
    configuration) first, then the enabled profiles open to the user."""
    profiles = list(agent_profiles_for_user(user=request.user).prefetch_related("delegates"))
    usable = frozenset(p.pk for p in profiles)
    return JsonResponse({"agents": [agent_json(None), *(agent_json(p, usable=usable) for p in profiles)]})


@require_http_methods(["GET"])
@api_login_required
def usage(request):
    """The requesting user's own use (docs/protocol.md, "Usage"): today and this month per model,
    `?days=N` calendar days per agent with cost, and their budgets; staff may ask `?user=`."""
    raw = request.GET.get("days", "30")
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_DAYS:
        return json_error(400, "bad_request", f"days must be an integer from 1 to {MAX_DAYS}")
    user = request.user
    if "user" in request.GET:
        user = get_user_model().objects.filter(username=request.GET["user"]).first() if user.is_staff else None
        if user is None:
            return json_error(404, "not_found", "No such user.")
    now = timezone.now()
    token = getattr(request, "api_token", None) if user == request.user else None
    window = usage_window(user=user, days=int(raw), now=now, token_id=token.pk if token is not None else None)
    return JsonResponse({**usage_for_user(user=user, now=now), **window})


@require_http_methods(["GET"])
@api_login_required
def conversation_export(request, conversation_id: uuid.UUID):
    conversation = conversation_for_user(user=request.user, conversation_id=conversation_id)
    if conversation is None:
        return JsonResponse(NOT_FOUND, status=404)
    kind = request.GET.get("format", "json")
    if kind not in ("json", "markdown"):
        return json_error(400, "bad_request", "format must be json or markdown")
    if kind == "json":
        filename = export_filename(conversation=conversation, suffix="json")
        return export_response(conversation_body(conversation), filename=filename)
    body = export_markdown(conversation=conversation, frames=events_for_export(conversation_id=conversation.pk))
    response = HttpResponse(body.encode(), content_type="text/markdown; charset=utf-8")
    # Django's header: a quoted ASCII name, or RFC 5987 `filename*` (UTF-8) for any other.
    filename = export_filename(conversation=conversation, suffix="md")
    response["Content-Disposition"] = content_disposition_header(True, filename)
    return response


@require_http_methods(["POST"])
@api_login_required
def conversation_import(request):
    """The JSON of an export, as the body: a new conversation of this user (201); the export of
    all conversations: as many new ones (201, `{"conversations": [...]}`), all or none; or
    400/413 with nothing created."""
    limit = settings.AGENT_MAX_IMPORT_BYTES
    try:
        raw = limited_body(request, limit=limit)
    except BodyTooLarge:
        return json_error(413, "too_large", f"the file is larger than {limit} bytes")
    try:
        imported = parse_import_file(raw)
    except ImportRefused as exc:
        return json_error(exc.status, "bad_request", str(exc))
    if isinstance(imported, list):
        made = importing.conversations_import(owner=request.user, imported=imported)
        return JsonResponse({"conversations": [conversation_json(c, running=False) for c in made]}, status=201)
    conversation = importing.conversation_import(owner=request.user, imported=imported)
    return JsonResponse(conversation_json(conversation, running=False), status=201)


@require_http_methods(["GET"])
def healthz(request):
    checks = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:
        checks["database"] = f"error: {type(exc).__name__}"
    try:
        # The runtime's own connection, kept by the event writer's thread, can break while a
        # request's fresh one works (the database restarted): what the runs will write with.
        async_to_sync(_writer_check)()
        checks["event_writer"] = "ok"
    except Exception as exc:
        checks["event_writer"] = f"error: {type(exc).__name__}"
    try:
        async_to_sync(_layer_roundtrip)()
        checks["channel_layer"] = "ok"
    except Exception as exc:
        checks["channel_layer"] = f"error: {type(exc).__name__}"
    healthy = all(value == "ok" for value in checks.values())
    return JsonResponse({"status": "ok" if healthy else "error", **checks}, status=200 if healthy else 503)


@require_http_methods(["GET"])
def metrics(request):
    # Anyone else gets the 404 of a page that does not exist: the endpoint is not advertised.
    if not metrics_series.may_scrape(request):
        return HttpResponse(status=404)
    return HttpResponse(metrics_series.exposition(), content_type=CONTENT_TYPE_LATEST)


async def _writer_check() -> None:
    await get_writer().check()


async def _layer_roundtrip() -> None:
    layer = get_channel_layer()
    channel = await layer.new_channel("healthz.")
    try:
        async with asyncio.timeout(2):
            await layer.send(channel, {"type": "healthz"})
            await layer.receive(channel)
    finally:
        await end_channel(layer, channel)  # else each probe left a subscription behind (Redis)
