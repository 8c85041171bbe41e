from django.templatetags.static import static
from django.urls import path
from django.views.generic import RedirectView

from chat.doors.a2a import cards as a2a_cards
from chat.doors.a2a import endpoint as a2a_endpoint
from chat.doors.agui import agui_api
from chat.doors.api import account_api, api, api_budgets, api_tokens, hooks, runs_api, schedules_api, triggers_api
from chat.doors.api import files as files_api
from chat.doors.openai import openai_api, responses_api
from chat.doors.openapi import openapi
from chat.doors.pages import pages, schedules, shares, theme, triggers
from chat.doors.sse import streams
from chat.inspector import views as inspect_views

urlpatterns = [
    path("", pages.chat_page, name="chat"),
    path("accounts/signup/", pages.signup, name="signup"),
    path("account/", pages.account_page, name="account"),
    path("account/theme/", theme.theme_save, name="account-theme"),
    path("account/usage/", pages.account_usage, name="account-usage"),
    path("account/sign-out-others/", pages.account_sign_out_others, name="account-sign-out-others"),
    path("account/tokens/", pages.account_token_create, name="account-token-create"),
    path("account/tokens/<int:token_id>/revoke/", pages.account_token_revoke, name="account-token-revoke"),
    path("schedules/", schedules.schedules_page, name="schedules"),
    path("schedules/<uuid:schedule_id>/toggle/", schedules.schedule_toggle, name="schedule-toggle"),
    path("schedules/<uuid:schedule_id>/delete/", schedules.schedule_delete, name="schedule-delete"),
    path("schedules/triggers/", triggers.triggers_page, name="triggers"),
    path("schedules/triggers/<uuid:trigger_id>/toggle/", triggers.trigger_toggle, name="trigger-toggle"),
    path("schedules/triggers/<uuid:trigger_id>/delete/", triggers.trigger_delete, name="trigger-delete"),
    path("i18n/setlang/", pages.set_language, name="set_language"),
    # Browsers ask for it on every page that names no icon (the admin's): the app's icon.
    path("favicon.ico", RedirectView.as_view(url=static("chat/icon.svg"), permanent=True)),
    path("healthz", api.healthz, name="healthz"),
    path("metrics", api.metrics, name="metrics"),
    path("api/schema/", openapi.schema, name="api-schema"),
    path("api/conversations/", api.conversations, name="api-conversations"),
    path("api/conversations/import/", api.conversation_import, name="api-conversation-import"),
    path("api/conversations/export/", account_api.conversations_export_all, name="api-export-all"),
    path("api/account/delete/", account_api.account_delete_view, name="api-account-delete"),
    path("api/conversations/<uuid:conversation_id>/", api.conversation_detail, name="api-conversation"),
    path("api/conversations/<uuid:conversation_id>/events/", api.conversation_events, name="api-events"),
    path("api/conversations/<uuid:conversation_id>/files/", files_api.conversation_files, name="api-files"),
    path("api/conversations/<uuid:conversation_id>/files/<path:path>", files_api.conversation_file, name="api-file"),
    path("api/conversations/<uuid:conversation_id>/messages/", runs_api.conversation_messages, name="api-messages"),
    path("api/conversations/<uuid:conversation_id>/cancel/", runs_api.conversation_cancel, name="api-cancel"),
    path("api/conversations/<uuid:conversation_id>/compact/", runs_api.conversation_compact, name="api-compact"),
    path("api/conversations/<uuid:conversation_id>/queue/", runs_api.conversation_queue, name="api-queue"),
    path(
        "api/conversations/<uuid:conversation_id>/queue/<str:queue_id>/",
        runs_api.conversation_unqueue,
        name="api-unqueue",
    ),
    path("api/conversations/<uuid:conversation_id>/stream/", streams.conversation_stream, name="api-stream"),
    path("api/runs/<uuid:run_id>/approval/", runs_api.run_approval, name="api-run-approval"),
    path("api/runs/<uuid:run_id>/trace/", api.run_trace, name="api-run-trace"),
    path("api/usage/", api.usage, name="api-usage"),
    path("api/agents/", api.agents, name="api-agents"),
    path("api/schedules/", schedules_api.schedules, name="api-schedules"),
    path("api/schedules/<uuid:schedule_id>/", schedules_api.schedule, name="api-schedule"),
    path("api/schedules/<uuid:schedule_id>/runs/", schedules_api.schedule_run_list, name="api-schedule-runs"),
    path("api/triggers/", triggers_api.triggers, name="api-triggers"),
    path("api/triggers/<uuid:trigger_id>/", triggers_api.trigger, name="api-trigger"),
    path("api/triggers/<uuid:trigger_id>/runs/", triggers_api.trigger_run_list, name="api-trigger-runs"),
    path("hooks/<uuid:trigger_id>/", hooks.hook, name="hook"),
    path("api/tokens/", api_tokens.tokens, name="api-tokens"),
    path("api/tokens/<int:token_id>/", api_tokens.token, name="api-token"),
    path("api/budgets/", api_budgets.budgets, name="api-budgets"),
    path("api/budgets/<int:budget_id>/", api_budgets.budget, name="api-budget"),
    path("api/conversations/<uuid:conversation_id>/export/", api.conversation_export, name="api-export"),
    path("api/conversations/<uuid:conversation_id>/feedback/", api.conversation_feedback, name="api-feedback"),
    path("api/runs/<uuid:run_id>/feedback/", api.run_feedback, name="api-run-feedback"),
    path("api/conversations/<uuid:conversation_id>/shares/", shares.conversation_shares, name="api-shares"),
    path("api/shares/<int:share_id>/", shares.share, name="api-share"),
    path("s/<str:token>/", shares.shared_page, name="shared"),
    path("s/<str:token>/events/", shares.shared_events, name="shared-events"),
    path("s/<str:token>/copy/", shares.shared_copy, name="shared-copy"),
    path("api/agui/<str:slug>/", agui_api.agent, name="api-agui"),
    path("api/agui/<str:slug>/connect/", agui_api.connect, name="api-agui-connect"),
    path("v1/models", openai_api.models, name="v1-models"),
    path("v1/chat/completions", openai_api.chat_completions, name="v1-chat-completions"),
    path("v1/responses", responses_api.create, name="v1-responses"),
    path("v1/responses/<str:response_id>", responses_api.retrieve, name="v1-response"),
    path("v1/responses/<str:response_id>/cancel", responses_api.cancel, name="v1-response-cancel"),
    path("v1/responses/<str:response_id>/input_items", responses_api.list_input_items, name="v1-response-input-items"),
    path(".well-known/agent-card.json", a2a_cards.public_card, name="a2a-card"),
    path("a2a/<slug:slug>/", a2a_endpoint.endpoint, name="a2a-endpoint"),
    path("a2a/<slug:slug>/.well-known/agent-card.json", a2a_cards.agent_card, name="a2a-agent-card"),
    path("inspect/", inspect_views.run_list, name="inspect-runs"),
    path("inspect/runs/<uuid:run_id>/", inspect_views.run_page, name="inspect-run"),
    path("inspect/dashboard/", inspect_views.dashboard, name="inspect-dashboard"),
    path("inspect/usage/", inspect_views.usage, name="inspect-usage"),
]
