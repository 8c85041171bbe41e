"""chat.accounts.held_credentials: the credential a socket or stream holds for its life, re-checked
once per window, ended by a revocation pushed for it and by nothing pushed for another."""

from __future__ import annotations

import pytest

from chat.accounts import held_credentials
from chat.accounts.held_credentials import HeldCredential
from chat.accounts.tokens import token_create, token_revoke

pytestmark = pytest.mark.django_db


def test_a_check_opens_a_window_and_a_failed_one_does_not(monkeypatch):
    held = HeldCredential(user_id=1, token_id=None, session_key="k")
    assert not held.due()  # made when the handshake has just checked
    monkeypatch.setattr(held_credentials, "SESSION_RECHECK_SECONDS", 0.0)
    assert held.due()
    before = held.checked_at
    assert held.checked(False) is False and held.checked_at == before
    assert held.checked(True) is True and held.checked_at > before


def test_a_token_is_current_until_it_is_revoked(make_user):
    alice = make_user("alice")
    token, _ = token_create(user=alice, name="cli")
    held = HeldCredential(user_id=alice.pk, token_id=token.pk, session_key=None)
    assert held.is_current()
    assert not HeldCredential(user_id=make_user("bob").pk, token_id=token.pk, session_key=None).is_current()
    token_revoke(user=alice, token_id=token.pk)
    assert not held.is_current()


def test_a_session_that_does_not_exist_is_not_current(make_user):
    assert not HeldCredential(user_id=make_user("alice").pk, token_id=None, session_key="nope").is_current()


def test_a_push_ends_the_credential_it_names_and_no_other():
    session = HeldCredential(user_id=1, token_id=None, session_key="mine")
    token = HeldCredential(user_id=1, token_id=7, session_key=None)
    assert session.revoked_by({"session_key": "mine"}) and not session.revoked_by({"session_key": "theirs"})
    assert session.revoked_by({})  # every session of the user
    assert token.revoked_by({"token_id": 7}) and not token.revoked_by({"token_id": 8})
    assert not token.revoked_by({}) and token.revoked_by({"tokens": True})
