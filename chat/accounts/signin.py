"""Sign-in and sign-up protection: the lockout page (django-axes) and the sign-up rate limit."""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.shortcuts import redirect, render
from django.utils.translation import gettext

from chat.accounts.oidc import ID_TOKEN_KEY, provider_logout_url
from chat.accounts.process_cache import cache
from chat.redis_errors import REDIS_AWAY
from serving.proxy import client_address

logger = logging.getLogger(__name__)


def login_locked_out(request, original_response=None, credentials=None):
    """AXES_LOCKOUT_CALLABLE: the sign-in page again, with why and for how long, as 429."""
    minutes = max(1, round(settings.AXES_COOLOFF_TIME.total_seconds() / 60))
    # Unbound: a bound form would authenticate again while rendering its errors.
    form = AuthenticationForm(request, initial={"username": request.POST.get("username", "")})
    message = gettext(
        "Too many failed sign-in attempts for this account or from your network. Try again in %(minutes)s minutes."
    ) % {"minutes": minutes}
    return render(
        request,
        "registration/login.html",
        {"form": form, "lockout_message": message, "next": request.POST.get("next", "")},
        status=429,
    )


def signup_allowed(request) -> bool:
    """Counts one account creation for the client's address; False once the address is over
    SIGNUP_RATE_LIMIT in the current window (fixed windows: at most twice the limit across a
    window's edge). Atomic in the cache (Redis with REDIS_URL), so concurrent sign-ups cannot
    all slip under the limit."""
    limit, window = settings.SIGNUP_RATE_LIMIT, settings.SIGNUP_RATE_WINDOW
    if limit <= 0:
        return True
    key = f"signup:{client_address(request)}:{int(time.time() // window)}"
    try:
        cache.add(key, 0, timeout=window)
        try:
            return cache.incr(key) <= limit
        except ValueError:  # the window's key expired between add and incr: a new window
            cache.set(key, 1, timeout=window)
            return True
    except REDIS_AWAY:
        # Counted in Redis: while it is away sign-ups go uncounted rather than failing with a 500.
        logger.warning("a sign-up is not counted: the cache does not answer")
        return True


class LoginView(auth_views.LoginView):
    """Django's sign-in page; with ALLOW_PASSWORD_LOGIN=false it refuses a posted password
    outright (the form is hidden, and the password backend is off, settings.py), saying why."""

    def post(self, request, *args, **kwargs):
        if settings.ALLOW_PASSWORD_LOGIN:
            return super().post(request, *args, **kwargs)
        context = self.get_context_data(form=AuthenticationForm(request))
        context["oidc_error"] = gettext("Signing in with a password is turned off on this site.")
        return render(request, self.template_name, context, status=403)


class LogoutView(auth_views.LogoutView):
    """Django's logout, then the provider's end of session when the user signed in through it."""

    def post(self, request, *args, **kwargs):
        id_token = request.session.get(ID_TOKEN_KEY)
        response = super().post(request, *args, **kwargs)
        end_session = provider_logout_url(request, id_token) if id_token and settings.OIDC_ENABLED else None
        return redirect(end_session) if end_session else response
