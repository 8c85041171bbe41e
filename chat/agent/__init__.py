"""The framework-free agent core: a streaming ReAct loop that yields AgentStreamEvents.

Nothing in this package imports Django, nor the rest of the project; the server persists and
broadcasts what it yields. See docs/architecture.md, "chat/agent/" (and "The agent core as a
library").
"""

from .events import (
    AgentEvent,
    CompleteEvent,
    ErrorEvent,
    ReferenceEvent,
    TextEvent,
    ThinkingEvent,
    ToolEndEvent,
    ToolStartEvent,
    UserMessageEvent,
    event_from_dict,
)
from .hooks import AgentHook, ModelInterceptor, ToolInterceptor
from .llm import ChatModel
from .loop import Agent, AgentResult, AgentRun
from .steering import Steer, SteeringSource
from .tools import ToolContext, ToolRecord, ToolRegistry
from .trace import ModelCallObserver, ModelCallRecord
from .turns import ModelOptions

__all__ = [
    "Agent",
    "AgentEvent",
    "AgentHook",
    "AgentResult",
    "AgentRun",
    "ChatModel",
    "CompleteEvent",
    "ErrorEvent",
    "ModelCallObserver",
    "ModelCallRecord",
    "ModelInterceptor",
    "ModelOptions",
    "ReferenceEvent",
    "Steer",
    "SteeringSource",
    "TextEvent",
    "ThinkingEvent",
    "ToolContext",
    "ToolEndEvent",
    "ToolInterceptor",
    "ToolRecord",
    "ToolRegistry",
    "ToolStartEvent",
    "UserMessageEvent",
    "event_from_dict",
]
