"""Read-mostly admin: operators inspect conversations, runs, events and tool calls; they don't forge
them. Agent profiles are the one thing staff write here."""

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.admin import GroupAdmin as AuthGroupAdmin
from django.contrib.auth.models import Group
from django.db import models
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from chat.agents.form import AgentProfileForm
from chat.conversations.workspaces import workspace_listing
from chat.models import (
    DEFAULT_AGENT_NAME,
    AgentProfile,
    ApiToken,
    Budget,
    Conversation,
    Event,
    Feedback,
    GroupLimits,
    ModelCall,
    Run,
    Schedule,
    ShareLink,
    ToolRecord,
    Trigger,
)

# The product's name, not Django's, on every admin page.
admin.site.site_header = "agentsite administration"
admin.site.site_title = "agentsite admin"
admin.site.index_title = "agentsite"


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    show_change_link = True
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


class RunInline(ReadOnlyInline):
    model = Run
    fields = ("id", "status", "agent", "model", "iterations", "total_tokens", "started_at", "finished_at")
    readonly_fields = fields


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdmin):
    # What fits a 1280 px window beside the filters; the created time and the last seq are on each page.
    list_display = ("__str__", "owner", "agent_name", "updated_at")
    list_filter = ("created_at", "agent")
    list_select_related = ("owner", "agent")
    search_fields = ("title", "owner__username", "id")
    readonly_fields = ("id", "owner", "title", "agent", "created_at", "updated_at", "last_seq", "workspace_files")
    date_hierarchy = "updated_at"
    inlines = [RunInline]

    @admin.display(description="agent", ordering="agent__name")
    def agent_name(self, obj):
        return obj.agent.name if obj.agent else DEFAULT_AGENT_NAME

    @admin.display(description="workspace files")
    def workspace_files(self, obj):
        files = workspace_listing(obj.pk)
        if not files:
            return "(empty)"
        # format_html_join escapes every value: file names are chosen by the model.
        rows = ((path, size, f"{modified:%Y-%m-%d %H:%M:%S}") for path, size, modified in files)
        return format_html_join("", "<div><code>{}</code> &middot; {} bytes &middot; {} UTC</div>", rows)


class ToolRecordInline(ReadOnlyInline):
    model = ToolRecord
    fields = ("tool_name", "tool_call_id", "is_error", "duration_ms", "started_at")
    readonly_fields = fields


class ModelCallInline(ReadOnlyInline):
    model = ModelCall
    show_change_link = False  # no admin page of its own: the run's is the place
    fields = (
        "iteration",
        "attempt",
        "started_at",
        "first_token_ms",
        "duration_ms",
        "message_count",
        "prompt_tokens",
        "completion_tokens",
        "finish_reason",
        "error",
    )
    readonly_fields = fields

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "conversation",
        "user",
        "status",
        "agent",
        "model",
        "iterations",
        "total_tokens",
        "started_at",
        "finished_at",
        "heartbeat_at",
    )
    list_filter = ("status", "agent", "model", "started_at")
    search_fields = ("id", "conversation__id", "conversation__title", "user__username", "error")
    readonly_fields = ["inspector", *(f.name for f in Run._meta.fields)]
    date_hierarchy = "started_at"
    inlines = [ModelCallInline, ToolRecordInline]

    @admin.display(description="run inspector")
    def inspector(self, obj):
        return format_html('<a href="{}">waterfall, tool calls and events</a>', reverse("inspect-run", args=[obj.pk]))


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ("seq", "type", "conversation", "run", "created_at")
    list_filter = ("type",)
    search_fields = ("conversation__id", "run__id")
    readonly_fields = ("conversation", "run", "seq", "type", "payload", "created_at")
    list_select_related = ("conversation", "run")


@admin.register(ToolRecord)
class ToolRecordAdmin(ReadOnlyAdmin):
    list_display = ("tool_name", "tool_call_id", "run", "is_error", "duration_ms", "started_at")
    list_filter = ("tool_name", "is_error")
    search_fields = ("tool_call_id", "tool_name", "run__id")
    readonly_fields = [f.name for f in ToolRecord._meta.fields]


@admin.register(Feedback)
class FeedbackAdmin(ReadOnlyAdmin):
    """What users thought of the answers: staff read it, nobody edits it in their name."""

    list_display = ("updated_at", "rating", "user", "run", "comment")
    list_filter = ("rating", "updated_at")
    search_fields = ("comment", "user__username", "run__id", "run__conversation__id")
    readonly_fields = [f.name for f in Feedback._meta.fields]
    list_select_related = ("user", "run")
    date_hierarchy = "updated_at"


@admin.register(AgentProfile)
class AgentProfileAdmin(admin.ModelAdmin):
    """The agents users pick from (docs/protocol.md, "Agents"). Read at each run's start: a change applies
    to the next run without a restart. A profile in use cannot be deleted (its conversations
    would move to another model silently): disable it instead."""

    form = AgentProfileForm
    list_display = ("name", "slug", "model", "base_url", "enabled", "everyone", "updated_at")
    list_filter = ("enabled", "everyone")
    search_fields = ("name", "slug", "model", "description")
    filter_horizontal = ("users", "groups", "delegates")
    readonly_fields = ("created_at", "updated_at")
    fieldsets = (
        (None, {"fields": ("name", "slug", "description", "enabled")}),
        ("Model endpoint", {"fields": ("base_url", "api_key_env", "model", "vision")}),
        ("Behaviour", {"fields": ("system_prompt", "tools", "skills", "approval_tools")}),
        (
            "Model options and limits",
            {
                "fields": (
                    "temperature",
                    "max_tokens",
                    "top_p",
                    "tool_choice",
                    "context_tokens",
                    "max_iterations",
                    "max_retries",
                    "retry_interval",
                )
            },
        ),
        ("Who may use it", {"fields": ("everyone", "users", "groups")}),
        # Each a tool agent__<slug> of its runs (docs/protocol.md, "Sub-agents").
        ("Delegates: agents it may hand a task to", {"fields": ("delegates",)}),
        (None, {"fields": ("created_at", "updated_at")}),
    )
    prepopulated_fields = {"slug": ("name",)}

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        # An empty Tools field is allowed (a plain chat model) but easy to leave by mistake: said.
        if not obj.tools:
            messages.warning(request, f"“{obj.name}” has no tools: its model will answer without calling any.")


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    """Every user's API tokens, without their values (never stored). Deleting one revokes it: the
    programs using it are signed out at once (chat.accounts.revocation)."""

    list_display = ("name", "user", "hint", "created_at", "expires_at", "last_used_at")
    list_filter = ("created_at", "expires_at")
    search_fields = ("name", "user__username", "hint")
    readonly_fields = ("user", "name", "hint", "created_at", "expires_at", "last_used_at")
    exclude = ("digest",)  # a token is made by its user, who alone ever sees its value


@admin.register(Schedule)
class ScheduleAdmin(ReadOnlyAdmin):
    """Every user's schedules (docs/protocol.md, "Schedules"): staff disable them (the action) or
    delete them; their runs and conversations stay."""

    list_display = ("name", "owner", "enabled", "cron", "every", "at", "timezone", "next_run_at", "last_status")
    list_filter = ("enabled", "last_status")
    search_fields = ("name", "owner__username")
    list_select_related = ("owner",)
    actions = ("disable",)

    @admin.action(description="Disable the selected schedules")
    def disable(self, request, queryset):
        count = queryset.update(enabled=False, next_run_at=None, updated_at=timezone.now())
        messages.success(request, f"{count} schedule(s) disabled.")


@admin.register(Trigger)
class TriggerAdmin(ReadOnlyAdmin):
    """Every user's triggers (docs/protocol.md, "Triggers"), without their secrets: staff disable
    them (the action; the URL answers 404 at once) or delete them; their runs and conversations stay."""

    list_display = ("name", "owner", "enabled", "created_at", "last_run_at", "last_status")
    list_filter = ("enabled", "last_status")
    search_fields = ("name", "owner__username")
    list_select_related = ("owner",)
    exclude = ("secret_digest", "secret_sealed")
    actions = ("disable",)

    @admin.action(description="Disable the selected triggers")
    def disable(self, request, queryset):
        count = queryset.update(enabled=False, updated_at=timezone.now())
        messages.success(request, f"{count} trigger(s) disabled.")


@admin.register(ShareLink)
class ShareLinkAdmin(ReadOnlyAdmin):
    """Every shared link (docs/protocol.md, "Shared links"), without its token (never stored). The
    action revokes: the link answers 404 at once; deleting one does the same."""

    list_display = ("hint", "conversation", "owner", "up_to_seq", "created_at", "expires_at", "revoked_at")
    list_filter = ("created_at", "expires_at", "revoked_at")
    search_fields = ("hint", "conversation__title", "conversation__owner__username")
    readonly_fields = (
        "conversation",
        "title",
        "hint",
        "up_to_seq",
        "leaf_seq",
        "created_at",
        "expires_at",
        "revoked_at",
    )
    exclude = ("digest",)
    list_select_related = ("conversation__owner",)
    actions = ("revoke",)

    @admin.display(description="owner")
    def owner(self, link):
        return link.conversation.owner

    @admin.action(description="Revoke the selected links")
    def revoke(self, request, queryset):
        revoked = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {revoked} link(s).")


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    """Budgets (docs/protocol.md, "Budgets"): a scope and its target, a period, a tokens and/or
    cost limit. The model's clean() refuses a second one of the same scope, target and period."""

    list_display = ("id", "scope", "target", "period", "tokens", "cost", "updated_at")
    list_filter = ("scope", "period")
    autocomplete_fields = ("user",)
    formfield_overrides = {models.PositiveBigIntegerField: {"widget": forms.NumberInput(attrs={"class": "vTextField"})}}

    @admin.display(description="target")
    def target(self, budget):
        if budget.scope == "agent":
            return budget.agent or DEFAULT_AGENT_NAME
        return getattr(budget, budget.scope)


class GroupLimitsInline(admin.StackedInline):
    """A group's daily token quota and messages-per-minute limit (docs/configuration.md, "Limits per
    group"): an inline, so that other additions to the group page live beside it."""

    model = GroupLimits
    can_delete = True
    extra = 1
    max_num = 1
    verbose_name = verbose_name_plural = "limits"
    # Wide enough for a quota in the millions (the admin's integer box shows about five digits).
    formfield_overrides = {models.PositiveIntegerField: {"widget": forms.NumberInput(attrs={"class": "vTextField"})}}


# -- groups: which ones the OpenID provider manages (docs/protocol.md, "Sign-in with OpenID Connect") --


class ProviderManagedFilter(admin.SimpleListFilter):
    title = "managed by the identity provider"
    parameter_name = "provider"

    def lookups(self, request, model_admin):
        return (("yes", "Yes"), ("no", "No"))

    def queryset(self, request, queryset):
        if self.value() in ("yes", "no"):
            return queryset.filter(provider__isnull=self.value() == "no")
        return queryset


admin.site.unregister(Group)


@admin.register(Group)
class GroupAdmin(AuthGroupAdmin):
    """Django's group admin, with the group's limits (an inline and two columns) and whether the
    OpenID provider manages it: a managed group is taken from a user whose groups claim stops
    naming it; one made here never is."""

    inlines = [*AuthGroupAdmin.inlines, GroupLimitsInline]
    list_display = ("name", "managed_by_provider", "daily_token_quota", "messages_per_minute")
    list_filter = (ProviderManagedFilter,)
    list_select_related = ("limits", "provider")

    @admin.display(boolean=True, description="managed by the identity provider")
    def managed_by_provider(self, group) -> bool:
        return hasattr(group, "provider")

    @admin.display(description="daily token quota")
    def daily_token_quota(self, obj):
        return _limit(getattr(obj, "limits", None), "daily_token_quota")

    @admin.display(description="messages per minute")
    def messages_per_minute(self, obj):
        return _limit(getattr(obj, "limits", None), "messages_per_minute")


def _limit(limits: GroupLimits | None, field: str) -> str:
    value = None if limits is None else getattr(limits, field)
    return "not set" if value is None else "unlimited" if value == 0 else f"{value:,}"
