"""Honeycomb: run LLM agents in parallel on asyncio.

One import gives the public API::

    from honeycomb import Executor, Role, tool, OpenAIModel
"""

from typing import TYPE_CHECKING

from honeycomb.executor import Executor
from honeycomb.run.aggregator import (
    Aggregator,
    ConcatAggregator,
    FunctionAggregator,
    RoleAggregator,
)
from honeycomb.run.context import RunContext
from honeycomb.run.events import (
    AggregationFinished,
    AggregationStarted,
    PlanReady,
    RunFinished,
    RunStarted,
    WorkerFinished,
    WorkerStarted,
)
from honeycomb.run.plan import Plan, Subtask
from honeycomb.run.planner import FunctionPlanner, Planner, RolePlanner, StaticPlanner
from honeycomb.run.policy import Budgets, Policy
from honeycomb.run.result import RunResult, RunTimings, SubtaskResult
from honeycomb.run.stream import RunStream
from honeycomb.trace.logs import configure_logging
from runtime import (
    AdaptiveLimiter,
    BudgetExceeded,
    ConfigError,
    ConfigErrors,
    Event,
    HoneycombError,
    Limits,
    Model,
    ModelCallFinished,
    ModelCallRetrying,
    ModelCallStarted,
    ModelError,
    ModelRetry,
    PlanError,
    RunBusy,
    RunFailed,
    StoreError,
    Tool,
    ToolCallFinished,
    ToolCallStarted,
    ToolContext,
    ToolRegistry,
    check_cancelled,
    tool,
)
from runtime._lazy import lazy_attributes
from runtime.testing import FunctionModel, ScriptedModel
from workers import Role, Worker, WorkerResult, load_roles

__all__ = [
    "AdaptiveLimiter",
    "AggregationFinished",
    "AggregationStarted",
    "Aggregator",
    "BudgetExceeded",
    "Budgets",
    "ConcatAggregator",
    "ConfigError",
    "ConfigErrors",
    "Event",
    "Executor",
    "FunctionAggregator",
    "FunctionModel",
    "FunctionPlanner",
    "HoneycombError",
    "Limits",
    "Model",
    "ModelCallFinished",
    "ModelCallRetrying",
    "ModelCallStarted",
    "ModelError",
    "ModelRetry",
    "OfflineModel",
    "OpenAIModel",
    "Plan",
    "PlanError",
    "PlanReady",
    "Planner",
    "Policy",
    "RetryPolicy",
    "Role",
    "RoleAggregator",
    "RolePlanner",
    "RunBusy",
    "RunContext",
    "RunFailed",
    "RunFinished",
    "RunResult",
    "RunStarted",
    "RunStore",
    "RunStream",
    "RunSummary",
    "RunTimings",
    "ScriptedModel",
    "StaticPlanner",
    "StoreError",
    "Subtask",
    "SubtaskResult",
    "Tool",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolContext",
    "ToolRegistry",
    "Worker",
    "WorkerFinished",
    "WorkerResult",
    "WorkerStarted",
    "check_cancelled",
    "configure_logging",
    "load_roles",
    "tool",
]

if TYPE_CHECKING:
    from honeycomb.offline import OfflineModel
    from honeycomb.store import RunStore, RunSummary
    from runtime import OpenAIModel, RetryPolicy

# Models and the run store load on first use: their modules (and ``openai``,
# ``tenacity``, ``sqlite3``) take time and memory to import, and most programs need at
# most one model and many no store.
_LAZY = {
    "OfflineModel": "honeycomb.offline.model",
    "OpenAIModel": "runtime.openai_model",
    "RetryPolicy": "runtime.retry",
    "RunStore": "honeycomb.store.store",
    "RunSummary": "honeycomb.store.store",
}


__getattr__ = lazy_attributes("honeycomb", _LAZY, globals())
