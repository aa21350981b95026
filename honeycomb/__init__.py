"""Honeycomb: run LLM agents in parallel on asyncio.

What ordinary code writes is here: the Executor, its policy and results, roles and
workers, tools, models, messages, the hive, approvals, guards, memory, events, and
the errors a program catches::

    from honeycomb import Executor, OpenAIModel, Role, tool

Everything else is in a namespace of its own, each one a whole family:
:mod:`honeycomb.events`, :mod:`honeycomb.errors`, :mod:`honeycomb.testing` (the test
models), :mod:`honeycomb.models`, :mod:`honeycomb.messages`, :mod:`honeycomb.tools`,
:mod:`honeycomb.agents`, :mod:`honeycomb.planning`, :mod:`honeycomb.approvals`,
:mod:`honeycomb.guards`, :mod:`honeycomb.limits`, :mod:`honeycomb.memory`,
:mod:`honeycomb.tracing`, :mod:`honeycomb.store`,
:mod:`honeycomb.hive` and :mod:`honeycomb.backends` (``docs/api.md`` lists them all).

``OpenAIModel``, ``OfflineModel``, ``SQLiteMemory``, ``load_hive`` and ``Session`` load on
first use: they (and ``openai``, ``sqlite3`` and ``yaml``) take time or memory to import
(a session's code is 0.1 MB of every process: benchmark E), and many programs need
none of them.
"""

import typing

from honeycomb.executor import Executor
from honeycomb.run.conversation import SessionPolicy, Turn
from honeycomb.run.plan import Plan, Subtask
from honeycomb.run.policy import Budgets, Policy
from honeycomb.run.result import PlanRound, RunResult, RunTimings, SubtaskResult
from honeycomb.run.stream import RunStream
from runtime import lazy
from runtime.errors import (
    BudgetExceeded,
    ConfigError,
    ConfigErrors,
    GuardrailTripped,
    HoneycombError,
    ModelError,
    ModelRetry,
    RunFailed,
    ToolError,
)
from runtime.events import Event, EventHandler
from runtime.limits.retry_policy import RetryPolicy
from runtime.memory import Memory
from runtime.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from runtime.model import Model, ModelRequest, ModelResponse, WrapperModel
from runtime.secrets import SecretsFilter, add_secret
from runtime.tools import Tool, ToolContext, ToolRegistry, tool
from runtime.tools.approvals import ApprovalRequest, Approver, Decision
from runtime.tools.dispatch import check_cancelled
from runtime.tools.mcp import McpServer
from workers.context import Compaction
from workers.guards import GuardCheck, Guards
from workers.memory import RoleMemory
from workers.role import Approvals, Role
from workers.worker import Worker, WorkerResult

if typing.TYPE_CHECKING:
    from honeycomb.hive import load_hive
    from honeycomb.offline import OfflineModel
    from honeycomb.run.session import Session
    from runtime.memory.sqlite import SQLiteMemory
    from runtime.models.openai.chat import OpenAIModel

__all__ = [
    "ApprovalRequest",
    "Approvals",
    "Approver",
    "AssistantMessage",
    "BudgetExceeded",
    "Budgets",
    "Compaction",
    "ConfigError",
    "ConfigErrors",
    "Decision",
    "Event",
    "EventHandler",
    "Executor",
    "GuardCheck",
    "GuardrailTripped",
    "Guards",
    "HoneycombError",
    "McpServer",
    "Memory",
    "Message",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "ModelRetry",
    "OfflineModel",
    "OpenAIModel",
    "Plan",
    "PlanRound",
    "Policy",
    "RetryPolicy",
    "Role",
    "RoleMemory",
    "RunFailed",
    "RunResult",
    "RunStream",
    "RunTimings",
    "SQLiteMemory",
    "SecretsFilter",
    "Session",
    "SessionPolicy",
    "Subtask",
    "SubtaskResult",
    "SystemMessage",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolMessage",
    "ToolRegistry",
    "Turn",
    "Usage",
    "UserMessage",
    "Worker",
    "WorkerResult",
    "WrapperModel",
    "add_secret",
    "check_cancelled",
    "load_hive",
    "tool",
]

if not typing.TYPE_CHECKING:  # type checkers see the imports above, and no other name
    __getattr__ = lazy.lazy_names(
        __name__,
        globals(),
        (
            "runtime.models",
            "runtime.memory",
            "honeycomb.offline",
            "honeycomb.hive",
            "honeycomb.run.session",
        ),
    )
