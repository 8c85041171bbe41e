"""HTML pages: the chat page, sign-up and the account page. The JSON API and the WebSocket live elsewhere."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils import translation
from django.utils.translation import check_for_language, gettext, gettext_noop, ngettext
from django.views import i18n
from django.views.decorators.http import require_http_methods, require_POST

from chat.web.account import (
    account_language_save,
    account_settings_of,
    account_update,
    confirms_with_username,
    sessions_end_others,
    sessions_other_count,
)
from chat.web.forms import AccountForm, SignupForm, TokenForm
from chat.web.next_url import safe_next
from chat.web.signin import signup_allowed
from chat.web.tokens import token_create, token_revoke, tokens_for_user

# Every message the page's scripts show (static/chat/*.js: t("...") and tf("...")), by
# English id. They are translated per request and handed to the scripts as JSON, so the
# page needs no JavaScript catalogue view. tests/ui/test_strings.py keeps this list whole.
JS_STRINGS = (
    gettext_noop("%s (unavailable)"),
    gettext_noop("%s errors"),
    gettext_noop("%s s"),
    gettext_noop("%s tokens"),
    gettext_noop("%s tokens today · %s this month"),
    gettext_noop("%s of %s tokens today · %s this month"),
    gettext_noop("%s tool calls"),
    gettext_noop("1 error"),
    gettext_noop("1 token"),
    gettext_noop("%s retries"),
    gettext_noop("1 retry"),
    gettext_noop("1 tool call"),
    gettext_noop("Answer this message again"),
    gettext_noop("Approval for"),
    gettext_noop("Approval needed to run"),
    gettext_noop("Approve"),
    gettext_noop("Approved"),
    gettext_noop("Arguments"),
    gettext_noop("Cancel"),
    gettext_noop("Bad answer"),
    gettext_noop("Comment on the answer"),
    gettext_noop("Connecting…"),
    gettext_noop("Connecting… You can approve or deny once connected."),
    gettext_noop("Connection lost. Reconnecting in %s s…"),
    gettext_noop("Continue"),
    gettext_noop("Continue the answer where it was cut off"),
    gettext_noop("Copied"),
    gettext_noop("Copy"),
    gettext_noop("Copy code"),
    gettext_noop("Copy failed"),
    gettext_noop("Copy the answer as Markdown"),
    gettext_noop("Could not change the agent: %s"),
    gettext_noop("Could not delete: %s"),
    gettext_noop("Could not import: %s"),
    gettext_noop("Could not save the feedback."),
    gettext_noop("Could not start the conversation: %s"),
    gettext_noop("Cut off by the token limit."),
    gettext_noop("Delete"),
    gettext_noop("Delete “%s”? Its messages cannot be recovered."),
    gettext_noop("Denied"),
    gettext_noop("Default"),
    gettext_noop("Deny"),
    gettext_noop("Discarded partial answer"),
    gettext_noop("Disconnected"),
    gettext_noop("Done"),
    gettext_noop("Edit"),
    gettext_noop("Edit this message"),
    gettext_noop("Edit your message"),
    gettext_noop("Error"),
    gettext_noop("Expired: nobody answered in time"),
    gettext_noop("Finished with errors"),
    gettext_noop("Good answer"),
    gettext_noop("Image not loaded"),
    gettext_noop("Image not loaded: %s"),
    gettext_noop("Imported “%s”."),
    gettext_noop("Imported %s conversations."),
    gettext_noop("Interrupted: the server stopped during this run."),
    gettext_noop("Live"),
    gettext_noop("Loading the conversation…"),
    gettext_noop("New conversation"),
    gettext_noop("New title"),
    gettext_noop("Next version"),
    gettext_noop("Next answer"),
    gettext_noop("Not answered"),
    gettext_noop("Not connected: you can approve or deny once the connection is back."),
    gettext_noop("Not connected. Your message can be sent when the connection is back."),
    gettext_noop("Not connected. Your message was not sent."),
    gettext_noop("Not run: the server restarted while the request waited for your decision"),
    gettext_noop("Previous version"),
    gettext_noop("Previous answer"),
    gettext_noop("Reason (optional)"),
    gettext_noop("Reconnecting…"),
    gettext_noop("Regenerate"),
    gettext_noop("Recovered after %s retries"),
    gettext_noop("Recovered after 1 retry"),
    gettext_noop("Rename"),
    gettext_noop("Result"),
    gettext_noop("Retrying…"),
    gettext_noop("Running"),
    gettext_noop("Running %s…"),
    gettext_noop("Send"),
    gettext_noop("Sending…"),
    gettext_noop("Show all (%s characters)"),
    gettext_noop("Something went wrong."),
    gettext_noop("Sources"),
    gettext_noop("Stopped."),
    gettext_noop("Stopped at your request"),
    gettext_noop("Stopped: the agent reached its limit of model calls without a final answer"),
    gettext_noop("Stopping…"),
    gettext_noop("Thanks for the feedback."),
    gettext_noop("That request was already answered."),
    gettext_noop("The agent is still working on the previous message."),
    gettext_noop("An answer is in progress. Keep writing; Stop or Esc ends it."),
    gettext_noop("An answer is in progress"),
    gettext_noop("The agent is waiting for your decision: approve or deny its request above, or press Stop."),
    gettext_noop("The agent failed"),
    gettext_noop("The answer is complete."),
    gettext_noop("The answer did not have the form that was asked for"),
    gettext_noop("The message is too long."),
    gettext_noop("The model did not answer"),
    gettext_noop("The model did not answer; trying again"),
    gettext_noop("The run failed."),
    gettext_noop("The server did not accept that message."),
    gettext_noop("The server restarted; the run went on where it was"),
    gettext_noop("The server stopped during this run"),
    gettext_noop("Thinking"),
    gettext_noop("Thinking…"),
    gettext_noop("This conversation no longer exists."),
    gettext_noop("This conversation's agent is no longer available to you; pick another."),
    gettext_noop("Thought process"),
    gettext_noop("Too many messages. Please wait a moment."),
    gettext_noop("Versions of this message"),
    gettext_noop("Versions of this answer"),
    gettext_noop("Wait for the current answer."),
    gettext_noop("Waiting for the result…"),
    gettext_noop("Waiting for your approval…"),
    gettext_noop("What was good or bad? (optional)"),
    gettext_noop("Working…"),
    gettext_noop("Writing the answer…"),
    gettext_noop("You said:"),
    gettext_noop("code"),
    gettext_noop("done"),
    gettext_noop("failed"),
    gettext_noop("not finished"),
    gettext_noop("not run"),
    gettext_noop("retry %s of %s"),
    gettext_noop("running"),
    gettext_noop("running…"),
    gettext_noop("Started through the OpenAI-compatible API"),
    # files (static/chat/attachments.js, files-panel.js)
    gettext_noop("Uploading %s"),
    gettext_noop("Remove %s"),
    gettext_noop("Image: %s"),
    gettext_noop("Remove"),
    gettext_noop("Could not upload %s: %s"),
    gettext_noop("%s does not accept images: it will get the file's name, not the picture."),
    gettext_noop("Attached files"),
    gettext_noop("Could not list the files: %s"),
    gettext_noop("Delete %s"),
    gettext_noop("Download %s"),
    gettext_noop("Download"),
    gettext_noop("Delete the file “%s”?"),
    gettext_noop("Delete file"),
    gettext_noop("Wait a moment and try again."),
    # shared links (static/chat/share-dialog.js, shared.js)
    gettext_noop("made %s"),
    gettext_noop("expired"),
    gettext_noop("expires %s"),
    gettext_noop("does not expire"),
    gettext_noop("Could not list the links: %s"),
    gettext_noop("Revoke"),
    gettext_noop("Revoke the link %s…"),
    gettext_noop("Could not revoke: %s"),
    gettext_noop("Could not create the link: %s"),
    gettext_noop("Copy link"),
    gettext_noop("This link is no longer shared."),
    gettext_noop("Could not load the conversation: %s"),
    gettext_noop("Nothing was shared."),
    gettext_noop("Could not copy: %s"),
    # the conversation list's date groups (static/chat/date-groups.js)
    gettext_noop("Today"),
    gettext_noop("Yesterday"),
    gettext_noop("Previous 7 days"),
    gettext_noop("Previous 30 days"),
    gettext_noop("Pinned"),
    gettext_noop("Unpin"),
    gettext_noop("Archived “%s”."),
    gettext_noop("Unarchive"),
    gettext_noop("pinned"),
    gettext_noop("Pin"),
    gettext_noop("Actions for “%s”"),
    gettext_noop("Actions"),
    gettext_noop("Archive"),
    gettext_noop("Could not change the conversation: %s"),
    gettext_noop("“%s” is back in the list."),
)


def js_strings() -> dict[str, str]:
    return {message: gettext(message) for message in JS_STRINGS}


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
    user's account, so that their other browsers follow (chat/web/language.py)."""
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
