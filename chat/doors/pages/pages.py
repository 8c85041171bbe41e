"""HTML pages: the chat page, sign-up and the account page. The JSON API and the WebSocket live elsewhere."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils import timezone, translation
from django.utils.translation import check_for_language, gettext, ngettext
from django.views import i18n
from django.views.decorators.http import require_http_methods, require_POST

from chat.accounts.account import (
    account_language_save,
    account_settings_of,
    account_update,
    confirms_with_username,
    sessions_end_others,
    sessions_other_count,
)
from chat.accounts.signin import signup_allowed
from chat.accounts.tokens import token_create, token_revoke, tokens_for_user
from chat.conversations.usage import usage_window
from chat.doors.pages.forms import AccountForm, SignupForm, TokenForm
from chat.doors.pages.next_url import safe_next
from chat.inspector.charts import stacked_columns
from chat.script_strings import js_strings

# The days the usage page draws.
USAGE_PAGE_DAYS = 30


@login_required
def chat_page(request):
    context = {
        "js_strings": js_strings(),
        "max_message_chars": settings.AGENT_MAX_MESSAGE_CHARS,
        "sharing": settings.AGENT_SHARING,
        "display_name": account_settings_of(user_id=request.user.pk).display_name or request.user.get_username(),
    }
    return render(request, "chat/index.html", context)


# The account page's sections, in order, each a template included with the page's context. A
# feature with settings of its own adds its template here, and what it shows to account_page's
# context.
ACCOUNT_SECTIONS = (
    "account/_profile.html",
    "account/_theme.html",
    "account/_password.html",
    "account/_sessions.html",
    "account/_tokens.html",
    "account/_usage.html",
    "account/_data.html",
    "account/_delete.html",
)


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def account_page(request):
    saved = account_settings_of(user_id=request.user.pk)
    form = AccountForm(request.POST if request.method == "POST" else None, initial=_account_initial(request, saved))
    if form.is_bound and form.is_valid():
        account_update(user=request.user, **form.cleaned_data)
        # Said in the language the next page is in.
        translation.activate(form.cleaned_data["language"] or translation.get_language_from_request(request))
        messages.success(request, gettext("Your account is saved."))
        return redirect("account")
    return _account_render(request, form, saved, status=400 if form.is_bound else 200)


def _account_initial(request, saved) -> dict:
    return {"display_name": saved.display_name, "email": request.user.email, "language": saved.language}


def _account_render(request, form, saved, *, new_token: str | None = None, status: int = 200):
    context = {
        "form": form,
        "sections": ACCOUNT_SECTIONS,
        "display_name": saved.display_name or request.user.get_username(),
        "other_sessions": sessions_other_count(user_id=request.user.pk, session_key=request.session.session_key),
        "tokens": tokens_for_user(user=request.user),
        "token_form": TokenForm(),
        "new_token": new_token,
        "confirm_with_username": confirms_with_username(request.user),
    }
    return render(request, "account/index.html", context, status=status)


@login_required
@require_http_methods(["GET", "HEAD"])
def account_usage(request):
    """The user's own use per day (a chart drawn on the page), per agent, and each budget with
    used, limit and reset (docs/protocol.md, "Usage")."""
    usage = usage_window(user=request.user, days=USAGE_PAGE_DAYS, now=timezone.now())
    days = [(day["date"][5:], {"bar": day["totalTokens"]}) for day in usage["days"]]
    chart = stacked_columns(days, ["bar"], label=gettext("tokens per day"))
    return render(request, "account/usage.html", {"usage": usage, "chart": chart})


@login_required
@require_POST
def account_sign_out_others(request):
    ended = sessions_end_others(user_id=request.user.pk, session_key=request.session.session_key)
    messages.success(
        request,
        ngettext("Signed out of %(count)s other session.", "Signed out of %(count)s other sessions.", ended)
        % {"count": ended},
    )
    return redirect("account")


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def account_token_create(request):
    """POST: a new token, its value shown once in this very answer. It is never kept to be shown
    by a later page (a session row would hold it until then), so nothing at rest has it; the
    page's script puts /account/ in the address bar, and a reload makes no second token."""
    if request.method != "POST":  # the address bar's URL after a creation
        return redirect("account")
    form = TokenForm(request.POST)
    if not form.is_valid():
        messages.error(request, gettext("Give the token a name of at most 100 characters."))
        return redirect("account")
    _token, value = token_create(
        user=request.user, name=form.cleaned_data["name"], expires_in_days=form.cleaned_data["expires_in_days"]
    )
    saved = account_settings_of(user_id=request.user.pk)
    form = AccountForm(initial=_account_initial(request, saved))
    response = _account_render(request, form, saved, new_token=value, status=201)
    response["Cache-Control"] = "no-store"  # the value stays out of the browser's cache too
    return response


@login_required
@require_POST
def account_token_revoke(request, token_id: int):
    if token_revoke(user=request.user, token_id=token_id):
        messages.success(request, gettext("The token is revoked: programs using it are signed out."))
    return redirect("account")


def set_language(request):
    """Django's set_language (the language menus), which also saves the choice on a signed-in
    user's account, so that their other browsers follow (chat/doors/pages/language.py)."""
    response = i18n.set_language(request)
    language = request.POST.get("language", "") if request.method == "POST" else ""
    if request.user.is_authenticated and language in dict(settings.LANGUAGES) and check_for_language(language):
        account_language_save(user_id=request.user.pk, language=language)
    return response


@require_http_methods(["GET", "HEAD", "POST"])
def signup(request):
    if not (settings.ALLOW_SIGNUP and settings.ALLOW_PASSWORD_LOGIN):
        raise Http404("sign-up is closed")
    # Back to where the visitor came from (a shared link's page, through the sign-in page's
    # "Create one"), when that is a place on this site.
    target = safe_next(request, request.POST.get("next") or request.GET.get("next") or "")
    if request.user.is_authenticated:
        return redirect(target or "chat")
    form = SignupForm(request.POST or None)
    context = {"form": form, "next": target or ""}
    if request.method == "POST" and form.is_valid():
        if not signup_allowed(request):
            form.add_error(None, gettext("Too many accounts were created from your network. Please try again later."))
            return render(request, "registration/signup.html", context, status=429)
        user = form.save()
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect(target or "chat")
    return render(request, "registration/signup.html", context)
