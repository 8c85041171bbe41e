"""Sign-in with an OpenID Connect provider (docs/protocol.md, "Sign-in with OpenID Connect").

Authlib's Django client does the protocol (docs/deployment.md, "Sign-in with OpenID Connect", says
why that library): discovery, the authorization code flow with PKCE (S256), `state` and `nonce`
kept in the session, the code exchange, and the ID token's checks (signature against the
issuer's JWKS, issuer, audience, expiry, nonce). This module adds what is the site's own: the
issuer the discovery document names must be the configured one, the user is chosen by
(issuer, `sub`) only (chat.accounts.oidc_users), and every failure is the login page with a message,
one log line and nothing created.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

import requests
from authlib.integrations.base_client import MismatchingStateError, OAuthError
from authlib.integrations.django_client import OAuth
from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth.forms import AuthenticationForm
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext
from joserfc.errors import JoseError

from chat.accounts.oidc_users import SignInRefused, oidc_user_sign_in

logger = logging.getLogger(__name__)

BACKEND = "chat.accounts.oidc_users.OidcBackend"
ID_TOKEN_KEY = "oidc_id_token"  # the session's copy of the ID token: the id_token_hint of the logout
_NEXT_KEY = "oidc_next"
# Sign-ins a session keeps pending (started, not yet back from the provider): a page that starts
# them over and over must not grow the session row without end. Five covers a few tabs.
PENDING_MAX = 5
_clients: dict[tuple, object] = {}


class ProviderUnavailable(Exception):
    pass


def oidc_label() -> str:
    return settings.OIDC_LABEL or urlsplit(settings.OIDC_ISSUER).hostname or settings.OIDC_ISSUER


def provider():
    """Authlib's client for the configured provider, one per process (it keeps the discovery
    document and the JWKS it fetched), with its discovery document loaded and checked."""
    key = (settings.OIDC_ISSUER, settings.OIDC_CLIENT_ID, settings.OIDC_CLIENT_SECRET, settings.OIDC_SCOPES)
    client = _clients.get(key)
    if client is None:
        registry = OAuth()
        client = registry.register(
            name="oidc",
            client_id=settings.OIDC_CLIENT_ID,
            client_secret=settings.OIDC_CLIENT_SECRET,
            server_metadata_url=f"{settings.OIDC_ISSUER}/.well-known/openid-configuration",
            client_kwargs={
                "scope": settings.OIDC_SCOPES,
                "code_challenge_method": "S256",
                "default_timeout": settings.OIDC_TIMEOUT,
            },
        )
        _clients[key] = client
    try:
        metadata = client.load_server_metadata()
    except (requests.RequestException, ValueError) as exc:
        raise ProviderUnavailable(f"discovery failed: {type(exc).__name__}: {exc}") from exc
    if metadata.get("issuer") != settings.OIDC_ISSUER or not metadata.get("authorization_endpoint"):
        # OpenID Connect Discovery 1.0, section 4.3: a document naming another issuer is not used.
        client.server_metadata.clear()
        raise ProviderUnavailable(f"discovery document names issuer {metadata.get('issuer')!r}")
    return client


def _redirect_uri(request) -> str:
    return settings.OIDC_REDIRECT_URI or request.build_absolute_uri(reverse("oidc_callback"))


def _safe_next(request, value: str) -> str:
    if value and url_has_allowed_host_and_scheme(value, {request.get_host()}, require_https=request.is_secure()):
        return value
    return settings.LOGIN_REDIRECT_URL


def _failed(request, reason: str, message: str, status: int):
    """The login page with `message`; `reason` is the one log line of this failure."""
    logger.warning("oidc sign-in failed: %s", reason)
    response = render(
        request,
        "registration/login.html",
        {"form": AuthenticationForm(request), "oidc_error": message, "next": ""},
        status=status,
    )
    # Logged once above, with the reason; Django's request logger would add a second line.
    response._has_been_logged = True
    return response


def oidc_login(request):
    """GET /accounts/oidc/login/?next=: to the provider's authorization endpoint."""
    if not settings.OIDC_ENABLED:
        raise Http404("OpenID Connect sign-in is not configured")
    try:
        client = provider()
        target = client.create_authorization_url(_redirect_uri(request))
    except ProviderUnavailable as exc:
        return _unavailable(request, str(exc))
    except requests.RequestException as exc:
        return _unavailable(request, f"{type(exc).__name__}: {exc}")
    client.save_authorize_data(request, redirect_uri=_redirect_uri(request), **target)
    request.session[f"{_NEXT_KEY}_{target['state']}"] = _safe_next(request, request.GET.get("next", ""))
    _keep_last_pending(request.session, client.name)
    return redirect(target["url"])


def _keep_last_pending(session, name: str) -> None:
    """Only the PENDING_MAX newest pending sign-ins stay, each with its `next`: Authlib keeps one
    entry per state, `_state_<name>_<state>` with its expiry, and clears the expired ones only
    when a callback comes back."""
    prefix = f"_state_{name}_"
    pending = sorted((key for key in session.keys() if key.startswith(prefix)), key=lambda key: _expiry(session[key]))
    for key in pending[:-PENDING_MAX]:
        del session[key]
    kept = {key.removeprefix(prefix) for key in pending[-PENDING_MAX:]}
    for key in [key for key in session.keys() if key.startswith(f"{_NEXT_KEY}_")]:
        if key.removeprefix(f"{_NEXT_KEY}_") not in kept:
            del session[key]


def _expiry(entry) -> float:
    return (entry.get("exp") or 0) if isinstance(entry, dict) else 0


def _unavailable(request, reason: str):
    message = gettext("%(provider)s could not be reached. Please try again later.") % {"provider": oidc_label()}
    return _failed(request, f"provider unavailable: {reason}", message, 502)


def oidc_callback(request):
    """GET /accounts/oidc/callback/?code=&state=: the code exchanged, the ID token checked,
    the user signed in (or the login page with why not)."""
    if not settings.OIDC_ENABLED:
        raise Http404("OpenID Connect sign-in is not configured")
    label = oidc_label()
    state = request.GET.get("state", "")
    next_url = request.session.pop(f"{_NEXT_KEY}_{state}", None) if state else None
    try:
        client = provider()
        token = client.authorize_access_token(request)
        claims = dict(token.get("userinfo") or {})
        if not claims.get("sub"):
            raise ValueError("no verified ID token in the token response")
        claims = _with_userinfo(client, token, claims)
        user = oidc_user_sign_in(issuer=settings.OIDC_ISSUER, claims=claims)
    except ProviderUnavailable as exc:
        return _unavailable(request, str(exc))
    except MismatchingStateError:
        message = gettext("This sign-in expired or was started in another browser. Please try again.")
        return _failed(request, "missing or unknown state", message, 400)
    except OAuthError as exc:
        message = gettext("%(provider)s did not complete the sign-in (%(error)s). Please try again.")
        return _failed(
            request,
            f"provider error: {exc.error}: {exc.description}",
            message % {"provider": label, "error": exc.error or "error"},
            400,
        )
    except (JoseError, ValueError) as exc:
        message = gettext("The answer of %(provider)s did not verify. Please try again.") % {"provider": label}
        return _failed(request, f"ID token rejected: {type(exc).__name__}: {exc}", message, 400)
    except requests.RequestException as exc:
        return _unavailable(request, f"{type(exc).__name__}: {exc}")
    except SignInRefused as exc:
        message = gettext(
            "Your account at %(provider)s is not in a group that may use this site. Ask your administrator for access."
        ) % {"provider": label}
        return _failed(request, f"refused {claims.get('sub')!r}: {exc}", message, 403)
    login(request, user, backend=BACKEND)
    request.session[ID_TOKEN_KEY] = token.get("id_token", "")
    logger.info("oidc sign-in of user %s (%s)", user.pk, user.username)
    return redirect(next_url or settings.LOGIN_REDIRECT_URL)


def _with_userinfo(client, token: dict, claims: dict) -> dict:
    """The ID token's claims, completed by the UserInfo endpoint's: many providers (this one's
    default too) send the profile and groups claims only there. Its `sub` must be the ID token's
    (OpenID Connect Core 1.0, section 5.3.2)."""
    if not client.server_metadata.get("userinfo_endpoint") or not token.get("access_token"):
        return claims
    info = dict(client.userinfo(token=token))
    if info.get("sub") != claims["sub"]:
        raise ValueError("the UserInfo response names another subject")
    return {**info, **claims}


def provider_logout_url(request, id_token: str) -> str | None:
    """The provider's end_session_endpoint (RP-initiated logout), back to the login page after;
    None when the provider offers none or cannot be reached (the local logout stands)."""
    try:
        client = provider()
    except ProviderUnavailable as exc:
        logger.warning("oidc logout: provider session not ended: %s", exc)
        return None
    if not client.server_metadata.get("end_session_endpoint"):
        return None
    back = request.build_absolute_uri(settings.LOGOUT_REDIRECT_URL)
    if settings.OIDC_REDIRECT_URI:  # the public origin is the one the callback names, not the request's
        public = urlsplit(settings.OIDC_REDIRECT_URI)
        back = f"{public.scheme}://{public.netloc}{settings.LOGOUT_REDIRECT_URL}"
    return client.create_logout_url(post_logout_redirect_uri=back, id_token_hint=id_token)["url"]
