"""Who an OpenID Connect sign-in is: the user of the pair (issuer, `sub`), created at the first
sign-in, and their groups and staff flag set from the claims at every sign-in
(docs/protocol.md, "Sign-in with OpenID Connect"). The flow itself is chat.accounts.oidc."""

from __future__ import annotations

import hashlib
import re
import unicodedata

from confusable_homoglyphs import categories
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction
from django.utils import timezone

from chat.models import OidcIdentity, ProviderGroup

_USERNAME_CHARS = re.compile(r"[^\w.@+-]")
# The scripts a username may mix, as Unicode TS #39's "highly restrictive" level allows: one
# script, or Latin with the scripts Chinese, Japanese and Korean write together. Digits and
# punctuation are no script's (Common), combining marks their letter's (Inherited).
_SCRIPT_SETS = ({"LATIN", "HAN", "HIRAGANA", "KATAKANA"}, {"LATIN", "HAN", "BOPOMOFO"}, {"LATIN", "HAN", "HANGUL"})
_NO_SCRIPT = {"COMMON", "INHERITED"}
_GROUP_NAME_MAX = Group._meta.get_field("name").max_length


class OidcBackend(ModelBackend):
    """The backend named in the sessions that OIDC sign-in opens, so that they load their user
    (and are checked by chat.accounts.revocation) like password sessions. It checks no
    credentials: only chat.accounts.oidc signs a user in with it, after the ID token verified."""

    def authenticate(self, request, **credentials):
        return None


class SignInRefused(Exception):
    """The provider vouched for the user, but this site does not let them in; `str()` says why."""


def claimed_groups(claims: dict) -> list[str]:
    """The group names of OIDC_GROUPS_CLAIM: a list of strings (or one string), anything else
    none. Names longer than a Django group's are left out rather than cut into another name."""
    value = claims.get(settings.OIDC_GROUPS_CLAIM)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    names = {item.strip() for item in value if isinstance(item, str)}
    return sorted(name for name in names if name and len(name) <= _GROUP_NAME_MAX)


def check_allowed(groups: list[str]) -> None:
    allowed = settings.OIDC_ALLOWED_GROUPS
    if allowed and not set(groups) & set(allowed):
        raise SignInRefused("not in OIDC_ALLOWED_GROUPS")


def oidc_user_sign_in(*, issuer: str, claims: dict):
    """The user the verified claims name, created or brought up to date; SignInRefused (and
    nothing written) when OIDC_ALLOWED_GROUPS leaves them out."""
    subject = claims["sub"]
    groups = claimed_groups(claims)
    check_allowed(groups)
    with transaction.atomic():
        identity = OidcIdentity.objects.select_related("user").filter(issuer=issuer, subject=subject).first()
        if identity is None:
            user = _create_user(claims)
            identity = OidcIdentity.objects.create(user=user, issuer=issuer, subject=subject)
        else:
            user = identity.user
            identity.last_sign_in_at = timezone.now()
            identity.save(update_fields=["last_sign_in_at"])
        _update_profile(user, claims, groups)
        _sync_groups(user, issuer, groups)
    return user


def username_from(claim) -> str:
    """The username a claim makes: NFKC-normalized (a fullwidth ｂｏｂ is bob), kept to the
    characters of a username, and "" when it mixes scripts as a look-alike does (a Cyrillic а
    in "аdmin")."""
    if not isinstance(claim, str):
        return ""
    name = _USERNAME_CHARS.sub("", unicodedata.normalize("NFKC", claim))[:140]
    scripts = set(categories.unique_aliases(name)) - _NO_SCRIPT
    if len(scripts) > 1 and not any(scripts <= allowed for allowed in _SCRIPT_SETS):
        return ""
    return name


def _create_user(claims: dict):
    base = (
        username_from(claims.get("preferred_username"))
        or username_from(str(claims.get("email") or "").split("@")[0])
        # A neutral name that says nothing of the claims it could not use.
        or "user-" + hashlib.sha256(str(claims["sub"]).encode()).hexdigest()[:8]
    )
    users = get_user_model()
    for n in range(1, 1000):
        username = base if n == 1 else f"{base}-{n}"
        if users.objects.filter(username__iexact=username).exists():
            continue
        try:
            with transaction.atomic():
                user = users(username=username)
                user.set_unusable_password()  # signs in through the provider only
                user.save()
            return user
        except IntegrityError:  # taken between the check and the insert: the next one
            continue
    raise SignInRefused(f"no free username for {base!r}")


def _update_profile(user, claims: dict, groups: list[str]) -> None:
    """E-mail, name and staff flag as the provider says now: the provider is their source."""
    email = claims.get("email")
    user.email = email[:254] if isinstance(email, str) else user.email
    given, family = claims.get("given_name"), claims.get("family_name")
    if not (isinstance(given, str) or isinstance(family, str)) and isinstance(claims.get("name"), str):
        given, _, family = claims["name"].partition(" ")
    user.first_name = (given if isinstance(given, str) else user.first_name)[:150]
    user.last_name = (family if isinstance(family, str) else user.last_name)[:150]
    if settings.OIDC_STAFF_GROUPS:
        # A superuser keeps the admin even outside the staff groups: the operator made them so.
        user.is_staff = bool(set(groups) & set(settings.OIDC_STAFF_GROUPS)) or user.is_superuser
    user.save(update_fields=["email", "first_name", "last_name", "is_staff"])


def _sync_groups(user, issuer: str, names: list[str]) -> None:
    wanted = []
    for name in names:
        group, created = Group.objects.get_or_create(name=name)
        if created:
            ProviderGroup.objects.create(group=group, issuer=issuer)
        wanted.append(group)
    user.groups.add(*wanted)
    stale = user.groups.filter(provider__isnull=False).exclude(name__in=names)
    user.groups.remove(*stale)
