"""Honeycomb's substrate: messages, models, tools, tool dispatch, limits, events, errors.

``runtime`` imports nothing from ``workers`` or ``honeycomb``. The OpenAI adapter, the
retry policy and the YAML reader load on first use (they, ``openai``, ``tenacity`` and
``yaml`` take time and memory to import, and many programs never need them).
"""

from typing import TYPE_CHECKING

from runtime._lazy import lazy_attributes
from runtime.dispatch import Dispatcher, DispatchPolicy, LockTable, check_cancelled
from runtime.errors import (
    AgentError,
    BudgetExceeded,
    ConfigError,
    ConfigErrors,
    DuplicateToolError,
    EmptyResponse,
    HoneycombError,
    MaxTurnsExceeded,
    ModelCallError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelResponseError,
    ModelRetry,
    ModelTimeout,
    OutcomeUnknown,
    OutputValidationError,
    PlanError,
    RetryAfterPastDeadline,
    RunawayLoop,
    RunBusy,
    RunFailed,
    ScriptExhausted,
    StoreError,
    ToolDefinitionError,
    ToolError,
    UnknownToolError,
    UnsupportedEventLoop,
    did_you_mean,
)
from runtime.events import (
    Event,
    EventHandler,
    ModelCallFinished,
    ModelCallRetrying,
    ModelCallStarted,
    ToolCallFinished,
    ToolCallStarted,
    Tracer,
)
from runtime.journal import Journal, JournalEntry, MemoryJournal, OnUnknown
from runtime.limits import Budget, LimitedModel, Limits
from runtime.messages import (
    AssistantMessage,
    Message,
    Messages,
    ObservationStatus,
    ReasoningItem,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Transcript,
    Usage,
    UserMessage,
    dump_messages,
    dump_messages_json,
    dump_value,
    dump_value_json,
    validate_messages,
    validate_value,
)
from runtime.model import Model, ModelRequest, ModelResponse, OutputSchema, ToolSchema, WrapperModel
from runtime.pricing import Price, PricedModel
from runtime.ratelimit import AdaptiveLimiter, RateLimitedModel
from runtime.text_tools import TextToolModel
from runtime.tools import ArgumentsError, Tool, ToolContext, ToolRegistry, tool

__all__ = [
    "AdaptiveLimiter",
    "AgentError",
    "ArgumentsError",
    "AssistantMessage",
    "Budget",
    "BudgetExceeded",
    "ConfigError",
    "ConfigErrors",
    "DispatchPolicy",
    "Dispatcher",
    "DuplicateToolError",
    "EmptyResponse",
    "Event",
    "EventHandler",
    "HoneycombError",
    "Journal",
    "JournalEntry",
    "LimitedModel",
    "Limits",
    "LockTable",
    "MaxTurnsExceeded",
    "MemoryJournal",
    "Message",
    "Messages",
    "Model",
    "ModelCallError",
    "ModelCallFinished",
    "ModelCallRetrying",
    "ModelCallStarted",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelRequest",
    "ModelResponse",
    "ModelResponseError",
    "ModelRetry",
    "ModelTimeout",
    "ObservationStatus",
    "OnUnknown",
    "OpenAIModel",
    "OpenAIResponsesModel",
    "OutcomeUnknown",
    "OutputSchema",
    "OutputValidationError",
    "PlanError",
    "Price",
    "PricedModel",
    "RateLimitedModel",
    "ReasoningItem",
    "RetryAfterPastDeadline",
    "RetryPolicy",
    "RetryingModel",
    "RunBusy",
    "RunFailed",
    "RunawayLoop",
    "ScriptExhausted",
    "StoreError",
    "SystemMessage",
    "TextToolModel",
    "Tool",
    "ToolCall",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolContext",
    "ToolDefinitionError",
    "ToolError",
    "ToolMessage",
    "ToolRegistry",
    "ToolSchema",
    "Tracer",
    "Transcript",
    "UnknownToolError",
    "UnsupportedEventLoop",
    "Usage",
    "UserMessage",
    "WrapperModel",
    "YamlDocument",
    "YamlPath",
    "check_cancelled",
    "did_you_mean",
    "dump_messages",
    "dump_messages_json",
    "dump_value",
    "dump_value_json",
    "format_path",
    "load_yaml",
    "parse_yaml",
    "tool",
    "validate_messages",
    "validate_value",
]

if TYPE_CHECKING:
    from runtime.openai_model import OpenAIModel
    from runtime.openai_responses import OpenAIResponsesModel
    from runtime.retry import RetryingModel, RetryPolicy
    from runtime.yaml_config import YamlDocument, YamlPath, format_path, load_yaml, parse_yaml

_LAZY = {
    "OpenAIModel": "runtime.openai_model",
    "OpenAIResponsesModel": "runtime.openai_responses",
    "RetryPolicy": "runtime.retry",
    "RetryingModel": "runtime.retry",
    "YamlDocument": "runtime.yaml_config",
    "YamlPath": "runtime.yaml_config",
    "format_path": "runtime.yaml_config",
    "load_yaml": "runtime.yaml_config",
    "parse_yaml": "runtime.yaml_config",
}


__getattr__ = lazy_attributes("runtime", _LAZY, globals())
