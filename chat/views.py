"""HTML pages: the chat page and sign-up. The JSON API and the WebSocket live elsewhere."""

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.translation import gettext, gettext_noop
from django.views.decorators.http import require_http_methods

from .accounts import signup_allowed
from .forms import SignupForm

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
    gettext_noop("Delete “%s”"),
    gettext_noop("Delete “%s”? Its messages cannot be recovered."),
    gettext_noop("Denied"),
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
    gettext_noop("Interrupted: the server stopped during this run."),
    gettext_noop("Live"),
    gettext_noop("Loading the conversation…"),
    gettext_noop("New conversation"),
    gettext_noop("New title"),
    gettext_noop("Next version"),
    gettext_noop("Not answered"),
    gettext_noop("Not connected. Your message can be sent when the connection is back."),
    gettext_noop("Not connected. Your message was not sent."),
    gettext_noop("Previous version"),
    gettext_noop("Reason (optional)"),
    gettext_noop("Reconnecting…"),
    gettext_noop("Regenerate"),
    gettext_noop("Recovered after %s retries"),
    gettext_noop("Recovered after 1 retry"),
    gettext_noop("Rename"),
    gettext_noop("Rename “%s”"),
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
    gettext_noop("Stopping…"),
    gettext_noop("Thanks for the feedback."),
    gettext_noop("That request was already answered."),
    gettext_noop("The agent is still working on the previous message."),
    gettext_noop("The agent is working on an answer. Wait for it, or press Stop."),
    gettext_noop("The answer is complete."),
    gettext_noop("The message is too long."),
    gettext_noop("The run failed."),
    gettext_noop("The server did not accept that message."),
    gettext_noop("Thinking"),
    gettext_noop("Thinking…"),
    gettext_noop("This conversation no longer exists."),
    gettext_noop("This conversation's agent is no longer available to you; pick another."),
    gettext_noop("Thought process"),
    gettext_noop("Too many messages. Please wait a moment."),
    gettext_noop("Versions of this message"),
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
    # files (static/chat/attachments.js, files-panel.js)
    gettext_noop("Uploading %s"),
    gettext_noop("Remove %s"),
    gettext_noop("Remove"),
    gettext_noop("Could not upload %s: %s"),
    gettext_noop("Attached files"),
    gettext_noop("Could not list the files: %s"),
    gettext_noop("Delete %s"),
    gettext_noop("Download %s"),
    gettext_noop("Download"),
    gettext_noop("Delete the file “%s”?"),
    gettext_noop("Delete file"),
    gettext_noop("Wait a moment and try again."),
)


def js_strings() -> dict[str, str]:
    return {message: gettext(message) for message in JS_STRINGS}


@login_required
def chat_page(request):
    return render(
        request, "chat/index.html", {"js_strings": js_strings(), "max_message_chars": settings.AGENT_MAX_MESSAGE_CHARS}
    )


@require_http_methods(["GET", "HEAD", "POST"])
def signup(request):
    if not settings.ALLOW_SIGNUP:
        raise Http404("sign-up is closed")
    if request.user.is_authenticated:
        return redirect("chat")
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        if not signup_allowed(request):
            form.add_error(None, gettext("Too many accounts were created from your network. Please try again later."))
            return render(request, "registration/signup.html", {"form": form}, status=429)
        user = form.save()
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect("chat")
    return render(request, "registration/signup.html", {"form": form})
