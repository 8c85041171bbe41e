"""The theme every page is rendered in (docs/protocol.md, "Accounts and HTTP": `/account/theme/`):
light, dark, or the system's (the browser's `prefers-color-scheme`), saved on the account.

The server writes the choice into the page, so it is painted in it from the first frame, with no
flash of the other: the dark palette is a stylesheet of its own (static/chat/theme-dark.css), and
each page's theme sheets get their `media` from here, `all` or `not all` for a theme chosen, the
media query for the system's (templates/_theme_head.html). The page's switch
(static/chat/theme.js) changes the same `media` attributes, then saves the choice."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from chat.doors.pages.next_url import safe_next
from chat.models import AccountSettings

Theme = AccountSettings.Theme
SCHEMES = ("light", "dark")


def theme_of(user) -> str:
    """The theme saved on the user's account; the system's for anyone else."""
    if not getattr(user, "is_authenticated", False):
        return Theme.SYSTEM
    saved = AccountSettings.objects.filter(user_id=user.pk).values_list("theme", flat=True).first()
    return saved or Theme.SYSTEM


def sheet_media(theme: str, scheme: str) -> str:
    """The `media` of the stylesheet of `scheme` ("light" or "dark") under `theme`."""
    if theme == Theme.SYSTEM:
        return f"(prefers-color-scheme: {scheme})"
    return "all" if theme == scheme else "not all"


def theme_context(theme: str) -> dict:
    return {
        "theme": theme,
        "theme_media": {scheme: sheet_media(theme, scheme) for scheme in SCHEMES},
        "theme_color_scheme": "light dark" if theme == Theme.SYSTEM else theme,
        "theme_choices": Theme.choices,
    }


def theme(request) -> dict:
    """Context processor: the request's user's theme, for templates/_theme_head.html and the switches."""
    return theme_context(theme_of(getattr(request, "user", None)))


@login_required
@require_POST
def theme_save(request):
    """The switches' form: saved, then back to `next`, or 204 for the script that applied it already."""
    chosen = request.POST.get("theme", "")
    if chosen not in Theme.values:
        return HttpResponseBadRequest("theme must be light, dark or system", content_type="text/plain")
    AccountSettings.objects.update_or_create(user_id=request.user.pk, defaults={"theme": chosen})
    target = safe_next(request, request.POST.get("next", ""))
    return redirect(target) if target else HttpResponse(status=204)
