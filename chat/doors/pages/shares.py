"""Shared links over HTTP (docs/protocol.md, "Shared links"): the owner's `/api/` routes (session
and CSRF, or an API token, like the rest of /api/), and the link's own routes under `/s/<token>/`,
which need no sign-in and show the snapshot only: never the conversation's API, files or socket.

Every refusal of a link is the same 404, at once, whether the token is malformed, unknown,
revoked, expired, its conversation deleted or sharing turned off."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from chat.accounts.account import account_settings_of
from chat.conversations.importing import ImportRefused
from chat.conversations.selectors import conversation_for_user
from chat.doors.http.json_api import api_login_required, expiry_days, iso_time, json_body, json_error
from chat.exceptions import NotAUserMessage
from chat.models import ShareLink
from chat.script_strings import js_strings
from chat.sharing.links import (
    ACTIVE_MAX,
    EXPIRY_DAYS_MAX,
    NothingToShare,
    TooManyLinks,
    is_open,
    link_for_token,
    share_copy,
    share_create,
    share_revoke,
    shared_frames,
    shares_of_conversation,
)

OFF = ("not_found", "Sharing is turned off on this server.")


def share_json(link: ShareLink, *, token: str | None = None) -> dict:
    """A link as its owner sees it; its `url` only when it was just made (the token is not stored)."""
    return {
        "id": link.pk,
        "url": f"/s/{token}/" if token else None,
        "hint": link.hint,
        "createdAt": iso_time(link.created_at),
        "expiresAt": iso_time(link.expires_at),
        "upToSeq": link.up_to_seq,
        "leafSeq": link.leaf_seq,
        "title": link.title,
        "active": is_open(link),
    }


@require_http_methods(["GET", "POST"])
@api_login_required
def conversation_shares(request, conversation_id: uuid.UUID):
    if not settings.AGENT_SHARING:
        return json_error(404, *OFF)
    conversation = conversation_for_user(user=request.user, conversation_id=conversation_id)
    if conversation is None:
        return json_error(404, "not_found", "No such conversation.")
    if request.method == "GET":
        return JsonResponse(
            {"shares": [share_json(link) for link in shares_of_conversation(conversation=conversation)]}
        )
    try:
        body = json_body(request)
        extra = set(body) - {"expiresInDays", "leafSeq"}
        if extra:
            raise ValueError(f"unknown field {sorted(extra)[0][:40]!r}")
        days = expiry_days(body.get("expiresInDays"), EXPIRY_DAYS_MAX)
        leaf_seq = _leaf_seq(body)
        link, token = share_create(conversation=conversation, expires_in_days=days, leaf_seq=leaf_seq)
    except (ValueError, NotAUserMessage) as exc:
        return json_error(400, "bad_request", str(exc))
    except NothingToShare:
        return json_error(409, "nothing_to_share", "The conversation has no finished answer to share yet.")
    except TooManyLinks:
        return json_error(409, "too_many_shares", f"A conversation has at most {ACTIVE_MAX} open links; revoke one.")
    return JsonResponse(share_json(link, token=token), status=201)


def _leaf_seq(body: dict) -> int | None:
    """`leafSeq`: the last turn of the branch the owner looks at (a seq), or absent or null."""
    seq = body.get("leafSeq")
    if seq is not None and (not isinstance(seq, int) or isinstance(seq, bool) or not 1 <= seq < 2**63):
        raise ValueError("leafSeq must be the seq of a user_message of this conversation, or null")
    return seq


@require_http_methods(["DELETE"])
@api_login_required
def share(request, share_id: int):
    if not settings.AGENT_SHARING:
        return json_error(404, *OFF)
    if not share_revoke(user=request.user, share_id=share_id):
        return json_error(404, "not_found", "No such link.")
    return HttpResponse(status=204)


def _link(token: str) -> ShareLink:
    link = link_for_token(token)
    if link is None:
        raise Http404("no such link")
    return link


def _owner_name(link: ShareLink) -> str:
    owner = link.conversation.owner
    return account_settings_of(user_id=owner.pk).display_name or owner.get_username()


@never_cache
@require_http_methods(["GET", "HEAD"])
def shared_page(request, token: str):
    """The read-only page; its script reads the snapshot from shared_events."""
    link = _link(token)
    context = {
        "title": link.title,
        "owner_name": _owner_name(link),
        "shared_at": link.created_at,
        "events_url": f"/s/{token}/events/",
        "copy_url": f"/s/{token}/copy/",
        "js_strings": js_strings(),
    }
    response = render(request, "chat/shared.html", context)
    # The token is in the address: no other site learns it from a link followed off the page.
    response["Referrer-Policy"] = "no-referrer"
    return response


@never_cache
@require_http_methods(["GET"])
def shared_events(request, token: str):
    link = _link(token)
    return JsonResponse({"conversation": {"title": link.title}, "events": shared_frames(link)})


@require_http_methods(["POST"])
@api_login_required
def shared_copy(request, token: str):
    """A signed-in visitor's own copy of the snapshot (CSRF-checked: it is a page's form or fetch)."""
    link = _link(token)
    try:
        conversation = share_copy(link=link, owner=request.user)
    except ImportRefused as exc:
        return json_error(409, "cannot_copy", f"This conversation cannot be copied: {exc}")
    return JsonResponse({"id": str(conversation.pk)}, status=201)
