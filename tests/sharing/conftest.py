"""The owner of the conversations to share, signed in with CSRF enforced as a browser is."""

from __future__ import annotations

import pytest
from django.test import Client


@pytest.fixture
def alice(make_user):
    return make_user("alice")


@pytest.fixture
def owner(alice):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    client.get("/")  # the CSRF cookie
    return client
