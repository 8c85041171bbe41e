"""The project's models, a module per domain, all named here (Django finds an app's models in
`<app>.models`, and the rest of the project imports them from it).

The event log is the single source of truth: what a user saw, what the admin inspects and what
the model is sent as memory all come from `Event` rows (chat.models.events). `ToolRecord` is a
queryable index of the tool calls, written from the same tool_end events; `ModelCall` records
each model call attempt (the run inspector's timings and tokens). Relations between the modules
are named by string ("chat.Run"), so that none imports another.
"""

from chat.models.agents import DEFAULT_AGENT_NAME, DEFAULT_AGENT_SLUG, AgentProfile
from chat.models.budgets import Budget
from chat.models.conversations import (
    A2A_SOURCE,
    AGUI_SOURCE,
    API_SOURCE,
    SCHEDULE_SOURCE,
    TRIGGER_SOURCE,
    Conversation,
    Feedback,
    SearchDocument,
    TitleSource,
)
from chat.models.events import RAW_PAYLOAD, Event, Utf8JSONEncoder, payload_of
from chat.models.identity import AccountSettings, ApiToken, GroupLimits, OidcIdentity, ProviderGroup, UserSession
from chat.models.metrics import MetricTally, ProcessGauge
from chat.models.queue import QueuedMessage
from chat.models.runs import RUNNING_RUN_CONSTRAINT, ModelCall, Run, RunMemory, ToolRecord
from chat.models.schedules import Schedule
from chat.models.sharing import ShareLink
from chat.models.triggers import Trigger

__all__ = [
    "A2A_SOURCE",
    "AGUI_SOURCE",
    "API_SOURCE",
    "DEFAULT_AGENT_NAME",
    "DEFAULT_AGENT_SLUG",
    "RAW_PAYLOAD",
    "RUNNING_RUN_CONSTRAINT",
    "SCHEDULE_SOURCE",
    "TRIGGER_SOURCE",
    "AccountSettings",
    "AgentProfile",
    "ApiToken",
    "Budget",
    "Conversation",
    "Event",
    "Feedback",
    "GroupLimits",
    "MetricTally",
    "ModelCall",
    "OidcIdentity",
    "ProcessGauge",
    "ProviderGroup",
    "QueuedMessage",
    "Run",
    "RunMemory",
    "Schedule",
    "SearchDocument",
    "ShareLink",
    "TitleSource",
    "ToolRecord",
    "Trigger",
    "UserSession",
    "Utf8JSONEncoder",
    "payload_of",
]
