"""Honeycomb: run LLM agents in parallel on asyncio.

One import gives the public API: ``from honeycomb import Worker, Role, tool, OpenAIModel``.
"""

from runtime import (
    BudgetExceeded,
    ConfigError,
    HoneycombError,
    Limits,
    ModelRetry,
    OpenAIModel,
    RetryPolicy,
    Tool,
    ToolContext,
    ToolRegistry,
    tool,
)
from runtime.testing import FunctionModel, ScriptedModel
from workers import Role, Worker, WorkerResult, load_roles

__all__ = [
    "BudgetExceeded",
    "ConfigError",
    "FunctionModel",
    "HoneycombError",
    "Limits",
    "ModelRetry",
    "OpenAIModel",
    "RetryPolicy",
    "Role",
    "ScriptedModel",
    "Tool",
    "ToolContext",
    "ToolRegistry",
    "Worker",
    "WorkerResult",
    "load_roles",
    "tool",
]
