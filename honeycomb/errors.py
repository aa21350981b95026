"""Every error Honeycomb raises: :class:`HoneycombError` and the whole tree below it
(drawn in ``runtime/errors.py``), the Ray backend's :class:`WorkerLost` and
:class:`RemoteFailure`, and the two
signals that are not failures: :class:`ModelRetry`, which a tool raises to send the
model a message, and :class:`ArgumentsError`, a model's tool arguments that are not
JSON or fail validation.

    from honeycomb.errors import ModelHTTPError, StoreError

The errors most programs catch are in ``honeycomb`` too.
"""

from honeycomb.backends import RemoteFailure, WorkerLost
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
    ServerGone,
    StoreError,
    StreamInterrupted,
    ToolDefinitionError,
    ToolError,
    UnknownToolError,
    UnsupportedEventLoop,
)
from runtime.tools import ArgumentsError

__all__ = [
    "AgentError",
    "AlreadyDecided",
    "ApprovalError",
    "ArgumentsError",
    "BudgetExceeded",
    "ConfigError",
    "ConfigErrors",
    "DuplicateToolError",
    "EmptyResponse",
    "GuardrailTripped",
    "HoneycombError",
    "MaxTurnsExceeded",
    "McpServerError",
    "MemoryFeatureMissing",
    "MemoryStoreError",
    "ModelCallError",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelResponseError",
    "ModelRetry",
    "ModelServerError",
    "ModelTimeout",
    "OutcomeUnknown",
    "OutputCutOff",
    "OutputValidationError",
    "PlanError",
    "RemoteFailure",
    "RetryAfterPastDeadline",
    "RunBusy",
    "RunFailed",
    "RunawayLoop",
    "ScriptExhausted",
    "ServerGone",
    "StoreError",
    "StreamInterrupted",
    "ToolDefinitionError",
    "ToolError",
    "UnknownToolError",
    "UnsupportedEventLoop",
    "WorkerLost",
]
