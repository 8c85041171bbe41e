"""Who an OIDC sign-in is (chat.accounts.oidc_users), in-process: the claims it reads, usernames made
unique, a superuser kept staff, nothing written for a refused user; and the Group admin's column and
filter of the groups the provider manages. The flow itself: tests/e2e/test_oidc.py."""

from __future__ import annotations

import hashlib

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client

from chat.accounts.oidc_users import OidcBackend, SignInRefused, claimed_groups, oidc_user_sign_in
from chat.models import OidcIdentity, ProviderGroup

ISSUER = "https://id.example.test"


@pytest.fixture
def oidc_settings(settings):
    settings.OIDC_GROUPS_CLAIM = "groups"
    settings.OIDC_ALLOWED_GROUPS = []
    settings.OIDC_STAFF_GROUPS = ["admins"]
    return settings


def test_the_groups_claim_is_read_strictly(oidc_settings):
    assert claimed_groups({"groups": ["b", " a ", "b", "", 7, None, "x" * 151]}) == ["a", "b"]
    assert claimed_groups({"groups": "solo"}) == ["solo"]
    assert claimed_groups({"groups": {"a": 1}}) == [] and claimed_groups({}) == []
    oidc_settings.OIDC_GROUPS_CLAIM = "roles"
    assert claimed_groups({"roles": ["r"], "groups": ["g"]}) == ["r"]


def test_the_same_subject_is_the_same_user_and_email_never_matches(db, oidc_settings):
    get_user_model().objects.create_user(username="ada", email="ada@corp.test", password="pw-long-enough-1")
    first = oidc_user_sign_in(issuer=ISSUER, claims={"sub": "1", "preferred_username": "ada", "email": "ada@corp.test"})
    assert first.username == "ada-2" and not first.has_usable_password()
    again = oidc_user_sign_in(issuer=ISSUER, claims={"sub": "1", "preferred_username": "renamed", "email": "n@x.test"})
    assert again.pk == first.pk and again.username == "ada-2" and again.email == "n@x.test"
    other_issuer = oidc_user_sign_in(issuer="https://other.test", claims={"sub": "1", "preferred_username": "ada"})
    assert other_issuer.pk != first.pk and other_issuer.username == "ada-3"
    odd = oidc_user_sign_in(issuer=ISSUER, claims={"sub": "2", "preferred_username": "<script> x y"})
    assert odd.username == "scriptxy"
    assert OidcIdentity.objects.count() == 3


def test_staff_follows_the_groups_but_a_superuser_stays_staff(db, oidc_settings):
    user = oidc_user_sign_in(issuer=ISSUER, claims={"sub": "s", "groups": ["admins"]})
    assert user.is_staff
    user = oidc_user_sign_in(issuer=ISSUER, claims={"sub": "s", "groups": []})
    assert not user.is_staff
    get_user_model().objects.filter(pk=user.pk).update(is_superuser=True)
    assert oidc_user_sign_in(issuer=ISSUER, claims={"sub": "s", "groups": []}).is_staff


def test_a_refused_user_writes_nothing(db, oidc_settings):
    oidc_settings.OIDC_ALLOWED_GROUPS = ["members"]
    with pytest.raises(SignInRefused):
        oidc_user_sign_in(issuer=ISSUER, claims={"sub": "out", "groups": ["strangers"]})
    assert not get_user_model().objects.exists() and not Group.objects.exists()
    user = oidc_user_sign_in(issuer=ISSUER, claims={"sub": "in", "groups": ["members"]})
    assert user.username == "user-" + hashlib.sha256(b"in").hexdigest()[:8]  # no name claimed: a neutral one


def test_look_alike_usernames_are_normalized_or_replaced_by_a_neutral_name(db, oidc_settings):
    get_user_model().objects.create_user(username="admin", password="pw-long-enough-1")

    def username(sub: str, **claims) -> str:
        return oidc_user_sign_in(issuer=ISSUER, claims={"sub": sub, **claims}).username

    neutral = "user-" + hashlib.sha256(b"cyr").hexdigest()[:8]
    assert username("cyr", preferred_username="\u0430dmin") == neutral  # a Cyrillic а among Latin letters
    assert username("cyr-mail", preferred_username="adm\u0456n", email="admin@corp.test") == "admin-2"
    assert username("fullwidth", preferred_username="\uff41\uff44\uff4d\uff49\uff4e") == "admin-3"  # NFKC
    assert username("greek", preferred_username="\u0391dmin") == "user-" + hashlib.sha256(b"greek").hexdigest()[:8]
    assert username("ligature", preferred_username="\ufb01le") == "file"  # ﬁ is f and i
    # One script, or the scripts written together in Japanese, are names of their own.
    assert username("ru", preferred_username="\u0438\u0432\u0430\u043d") == "\u0438\u0432\u0430\u043d"
    assert username("ja", preferred_username="\u5c71\u7530\u305f\u308d\u3046") == "\u5c71\u7530\u305f\u308d\u3046"
    assert (
        username("mixed-ja", preferred_username="\u5c71\u7530-\u0430")
        == "user-" + hashlib.sha256(b"mixed-ja").hexdigest()[:8]
    )
    assert username("accent", preferred_username="Jose\u0301") == "Jos\u00e9"  # composed
    assert get_user_model().objects.filter(username__startswith="user-").count() == 3


def test_the_backend_checks_no_credentials(db):
    get_user_model().objects.create_user(username="bob", password="pw-long-enough-1")
    assert OidcBackend().authenticate(None, username="bob", password="pw-long-enough-1") is None


def test_the_group_admin_shows_and_filters_the_provider_groups(db, oidc_settings):
    oidc_user_sign_in(issuer=ISSUER, claims={"sub": "g", "groups": ["from-idp"]})
    Group.objects.create(name="by-hand")
    assert ProviderGroup.objects.get().group.name == "from-idp"
    admin = get_user_model().objects.create_superuser(username="root", password="pw-long-enough-1")
    client = Client()
    client.force_login(admin)
    page = client.get("/admin/auth/group/").content.decode()
    assert "managed by the identity provider" in page and "from-idp" in page and "by-hand" in page
    managed = client.get("/admin/auth/group/?provider=yes").content.decode()
    assert "from-idp" in managed and "by-hand" not in managed
    by_hand = client.get("/admin/auth/group/?provider=no").content.decode()
    assert "by-hand" in by_hand and "from-idp" not in by_hand
