"""Budgets (docs/protocol.md, "Budgets"): what model calls may use in a calendar period of
TIME_ZONE, per user, group (an allowance per member), agent profile (one pool) or API token.
At most one per scope, target and period; its two limits together. None: that limit not set;
0: unlimited. A group's day tokens limit is its GroupLimits.daily_token_quota: one value."""

from __future__ import annotations

from django.apps import apps
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

# The target field of each scope.
TARGETS = {"user": "user", "group": "group", "agent": "agent", "token": "token"}


class Budget(models.Model):
    class Scope(models.TextChoices):
        USER = "user"
        GROUP = "group"
        AGENT = "agent"
        TOKEN = "token"

    class Period(models.TextChoices):
        DAY = "day"
        WEEK = "week"
        MONTH = "month"

    scope = models.CharField(max_length=8, choices=Scope.choices)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="budgets"
    )
    group = models.ForeignKey("auth.Group", null=True, blank=True, on_delete=models.CASCADE, related_name="budgets")
    # Scope agent with no profile: the environment's agent (slug `default`).
    agent = models.ForeignKey(
        "chat.AgentProfile", null=True, blank=True, on_delete=models.CASCADE, related_name="budgets"
    )
    token = models.ForeignKey("chat.ApiToken", null=True, blank=True, on_delete=models.CASCADE, related_name="budgets")
    period = models.CharField(max_length=8, choices=Period.choices, default=Period.DAY)
    tokens = models.PositiveBigIntegerField(null=True, blank=True, help_text="Blank: no token limit. 0: unlimited.")
    cost = models.FloatField(null=True, blank=True, help_text="US dollars. Blank: no cost limit. 0: unlimited.")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["scope", "period", "id"]
        indexes = [models.Index(fields=["scope", "period"], name="budget_scope_period")]

    def __str__(self) -> str:
        return f"{self.scope} budget ({self.period}) #{self.pk}"

    def clean(self) -> None:
        wrong = [name for name in TARGETS.values() if name != TARGETS.get(self.scope) and getattr(self, f"{name}_id")]
        if wrong:
            raise ValidationError(f"a {self.scope} budget names no {', '.join(wrong)}")
        if self.scope in ("user", "group", "token") and not getattr(self, f"{TARGETS[self.scope]}_id"):
            raise ValidationError(f"a {self.scope} budget names its {self.scope}")
        if self.tokens is None and self.cost is None:
            raise ValidationError("a budget sets a tokens limit, a cost limit or both")
        if self.cost is not None and self.cost < 0:
            raise ValidationError("cost must be >= 0")
        twins = Budget.objects.filter(
            scope=self.scope,
            period=self.period,
            user_id=self.user_id,
            group_id=self.group_id,
            agent_id=self.agent_id,
            token_id=self.token_id,
        ).exclude(pk=self.pk)
        if twins.exists():
            raise ValidationError("there is already a budget of this scope, target and period")

    def save(self, *args, **kwargs) -> None:
        super().save(*args, **kwargs)
        if self.scope == "group" and self.period == "day":
            # A group's day tokens budget is its daily token quota: one value, set from either side.
            limits, _ = apps.get_model("chat", "GroupLimits").objects.get_or_create(group_id=self.group_id)
            if limits.daily_token_quota != self.tokens:
                type(limits).objects.filter(pk=limits.pk).update(daily_token_quota=self.tokens)

    def delete(self, *args, **kwargs):
        if self.scope == "group" and self.period == "day":
            apps.get_model("chat", "GroupLimits").objects.filter(group_id=self.group_id).update(daily_token_quota=None)
        return super().delete(*args, **kwargs)
