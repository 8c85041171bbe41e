"""The models of sign-in with OpenID Connect (docs/protocol.md, "Sign-in with OpenID Connect"),
in a module of their own so that chat/models.py stays within its size; chat.models imports them."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.utils import timezone


class OidcIdentity(models.Model):
    """A user as the provider knows them: the pair (issuer, `sub`), the only thing a sign-in is
    matched by. An e-mail address is never used to find a user: a provider may let anyone claim
    any address, and addresses get reused."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identity")
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(default=timezone.now)
    last_sign_in_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="oidc_identity_issuer_subject")]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class ProviderGroup(models.Model):
    """Marks a Django group as managed by the provider: created from the groups claim, it is
    taken away from a user whose claim no longer names it. Groups made by hand have no row and
    are never taken away by a sign-in."""

    group = models.OneToOneField(Group, on_delete=models.CASCADE, primary_key=True, related_name="provider")
    issuer = models.CharField(max_length=255)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.group.name} (from {self.issuer})"
