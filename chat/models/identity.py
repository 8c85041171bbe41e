"""Who a user or program is: OpenID Connect identities, provider groups, API tokens, account settings, sessions, and the limits of a group."""

from __future__ import annotations

from django.apps import apps
from django.conf import settings
from django.contrib.auth.models import Group
from django.contrib.sessions.base_session import AbstractBaseSession
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


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


class ApiToken(models.Model):
    """A personal API token (docs/protocol.md, "API tokens"): its user, a name to tell it by,
    and the SHA-256 of its value, never the value (shown once, at creation). A token is 256
    random bits, so a fast hash is enough: nothing short enough to guess is stored."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    digest = models.CharField(max_length=64, unique=True)  # sha256 hex of the value
    # The value's first characters, to tell tokens apart; indexed: a failed attempt under a real
    # token's prefix is counted against that prefix (chat.accounts.token_lockout).
    hint = models.CharField(max_length=12, db_index=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.hint}…) of user {self.user_id}"


class AccountSettings(models.Model):
    """What a user sets on their account page: the name the app shows for them, the interface
    language, which follows the account to every browser (chat.doors.pages.language), and the theme that
    every page of theirs is rendered in (chat.doors.pages.theme). No row: the username, the language the
    browser asks for, and the system's theme."""

    class Theme(models.TextChoices):
        LIGHT = "light", _("Light")
        DARK = "dark", _("Dark")
        SYSTEM = "system", _("System")  # the browser's prefers-color-scheme

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="account_settings"
    )
    display_name = models.CharField(max_length=150, blank=True, default="")
    language = models.CharField(max_length=16, blank=True, default="", choices=settings.LANGUAGES)
    theme = models.CharField(max_length=8, choices=Theme.choices, default=Theme.SYSTEM)

    def __str__(self) -> str:
        return f"Settings of user {self.user_id}"


class GroupLimits(models.Model):
    """A group's limits (docs/configuration.md, "Limits per group"), read at each run start. Blank:
    the group sets none; 0: unlimited, as the settings' 0. A user gets their most generous group's."""

    group = models.OneToOneField("auth.Group", on_delete=models.CASCADE, primary_key=True, related_name="limits")
    daily_token_quota = models.PositiveIntegerField(null=True, blank=True, help_text="Blank: not set. 0: no quota.")
    messages_per_minute = models.PositiveIntegerField(null=True, blank=True, help_text="Blank: not set. 0: no limit.")

    class Meta:
        verbose_name_plural = "group limits"

    def save(self, *args, **kwargs) -> None:
        super().save(*args, **kwargs)
        # Its daily token quota is the group's day tokens budget (chat.models.budgets): one value.
        budgets = apps.get_model("chat", "Budget").objects.filter(scope="group", group_id=self.group_id, period="day")
        budgets.exclude(tokens=self.daily_token_quota).update(tokens=self.daily_token_quota)

    def __str__(self) -> str:
        return f"Limits of {self.group.name}"


class UserSession(AbstractBaseSession):
    """A session that names its user (chat.accounts.sessions, the SESSION_ENGINE), so that "sign out of all
    other sessions" finds them without decoding every session of the site."""

    # No database constraint: a request may save its session just after its user was deleted, and
    # that save must not fail; deleting a user still deletes their sessions (the ORM's cascade).
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        db_constraint=False,
        related_name="+",
    )

    class Meta(AbstractBaseSession.Meta):
        db_table = "chat_user_session"
