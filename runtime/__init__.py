"""Honeycomb's substrate, in families.

At the root: the values that flow through a worker (:mod:`~runtime.messages`, the
:mod:`~runtime.model` protocol with its requests and responses, :mod:`~runtime.events`,
:mod:`~runtime.errors`), the helpers every family uses, and the test models
(:mod:`runtime.testing`). The families: :mod:`runtime.models` (OpenAI adapters, tool
protocols, llama.cpp), :mod:`runtime.tools` (``@tool``, dispatch, approvals, the journal,
MCP), :mod:`runtime.limits` (budgets, rate limits, retries),
:mod:`runtime.memory` and :mod:`runtime.config` (YAML).

``runtime`` imports nothing from ``workers`` or ``honeycomb``. The OpenAI adapter, the
retry policy, the YAML reader, the text tool protocol and the models that add prices
and rate limits load on first use (they, ``openai``, ``tenacity`` and ``yaml`` take
time and memory to import, and many programs never need them).
"""

from typing import TYPE_CHECKING

from runtime.errors import (
    AgentError,
    AlreadyDecided,
    ApprovalError,
    BudgetExceeded,
    ConfigError,
    ConfigErrors,
    DuplicateToolError,
    EmptyResponse,
    GuardrailTripped,
    HoneycombError,
    MaxTurnsExceeded,
    McpServerError,
    MemoryFeatureMissing,
    MemoryStoreError,
    ModelCallError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelResponseError,
    ModelRetry,
    ModelServerError,
    ModelTimeout,
    OutcomeUnknown,
    OutputCutOff,
    OutputValidationError,
    PlanError,
    RetryAfterPastDeadline,
    RunawayLoop,
    RunBusy,
    RunFailed,
    ScriptExhausted,
    StoreError,
    StreamInterrupted,
    ToolDefinitionError,
    ToolError,
    UnknownToolError,
    UnsupportedEventLoop,
    did_you_mean,
)
from runtime.events import (
    CompactionFinished,
    CompactionStarted,
    Event,
    EventHandler,
    ModelCallFinished,
    ModelCallRetrying,
    ModelCallStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    Tracer,
)
from runtime.lazy import lazy_attributes
from runtime.limits import Budget, LimitedModel, Limits
from runtime.memory import Embeddings, Memory, MemoryHit, MemoryRecord
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
from runtime.model import (
    Model,
    ModelRequest,
    ModelResponse,
    OutputSchema,
    StreamingModel,
    ToolSchema,
    WrapperModel,
)
from runtime.secrets import add_secret
from runtime.tools import ArgumentsError, Tool, ToolContext, ToolRegistry, tool
from runtime.tools.approvals import (
    ApprovalEntry,
    ApprovalLog,
    ApprovalNeeded,
    ApprovalRequest,
    ApprovalRule,
    Approver,
    Decision,
    MemoryApprovalLog,
    PendingApproval,
)
from runtime.tools.dispatch import Dispatcher, DispatchPolicy, LockTable, check_cancelled
from runtime.tools.journal import Journal, JournalEntry, MemoryJournal, OnUnknown
from runtime.tools.mcp import McpServer, McpServers, McpToolSettings

__all__ = [
    "AdaptiveLimiter",
    "AgentError",
    "AlreadyDecided",
    "ApprovalEntry",
    "ApprovalError",
    "ApprovalLog",
    "ApprovalNeeded",
    "ApprovalRequest",
    "ApprovalRule",
    "Approver",
    "ArgumentsError",
    "AssistantMessage",
    "Budget",
    "BudgetExceeded",
    "CompactionFinished",
    "CompactionStarted",
    "ConfigError",
    "ConfigErrors",
    "Decision",
    "DispatchPolicy",
    "Dispatcher",
    "DuplicateToolError",
    "Embeddings",
    "EmptyResponse",
    "Event",
    "EventHandler",
    "GuardrailTripped",
    "HoneycombError",
    "Journal",
    "JournalEntry",
    "JsonToolModel",
    "LimitedModel",
    "Limits",
    "LlamaModel",
    "LockTable",
    "MaxTurnsExceeded",
    "McpServer",
    "McpServerError",
    "McpServers",
    "McpToolSettings",
    "Memory",
    "MemoryApprovalLog",
    "MemoryFeatureMissing",
    "MemoryHit",
    "MemoryJournal",
    "MemoryRecord",
    "MemoryStoreError",
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
    "ModelServerError",
    "ModelTimeout",
    "ObservationStatus",
    "OnUnknown",
    "OpenAIEmbeddings",
    "OpenAIModel",
    "OpenAIResponsesModel",
    "OutcomeUnknown",
    "OutputCutOff",
    "OutputSchema",
    "OutputValidationError",
    "PendingApproval",
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
    "SQLiteMemory",
    "ScriptExhausted",
    "StoreError",
    "StreamInterrupted",
    "StreamingModel",
    "SystemMessage",
    "TextDelta",
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
    "add_secret",
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
    from runtime.config.yaml_config import (
        YamlDocument,
        YamlPath,
        format_path,
        load_yaml,
        parse_yaml,
    )
    from runtime.limits.ratelimit import AdaptiveLimiter, RateLimitedModel
    from runtime.limits.retry import RetryingModel
    from runtime.limits.retry_policy import RetryPolicy
    from runtime.memory.sqlite import SQLiteMemory
    from runtime.models.llama import LlamaModel
    from runtime.models.openai.chat import OpenAIModel
    from runtime.models.openai.embeddings import OpenAIEmbeddings
    from runtime.models.openai.responses import OpenAIResponsesModel
    from runtime.models.pricing import Price, PricedModel
    from runtime.models.protocols.json_tools import JsonToolModel
    from runtime.models.protocols.text_tools import TextToolModel

_LAZY = {
    "JsonToolModel": "runtime.models.protocols.json_tools",
    "AdaptiveLimiter": "runtime.limits.ratelimit",
    "LlamaModel": "runtime.models.llama",
    "OpenAIEmbeddings": "runtime.models.openai.embeddings",
    "OpenAIModel": "runtime.models.openai.chat",
    "OpenAIResponsesModel": "runtime.models.openai.responses",
    "Price": "runtime.models.pricing",
    "PricedModel": "runtime.models.pricing",
    "RateLimitedModel": "runtime.limits.ratelimit",
    "RetryPolicy": "runtime.limits.retry_policy",
    "RetryingModel": "runtime.limits.retry",
    "SQLiteMemory": "runtime.memory.sqlite",
    "TextToolModel": "runtime.models.protocols.text_tools",
    "YamlDocument": "runtime.config.yaml_config",
    "YamlPath": "runtime.config.yaml_config",
    "format_path": "runtime.config.yaml_config",
    "load_yaml": "runtime.config.yaml_config",
    "parse_yaml": "runtime.config.yaml_config",
}


__getattr__ = lazy_attributes("runtime", _LAZY, globals())
