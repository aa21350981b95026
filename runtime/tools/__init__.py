"""Tools and their calls: ``@tool`` and the registry (:mod:`~runtime.tools.define`),
dispatching one model turn's calls (:mod:`~runtime.tools.dispatch`), approvals, the
journal of side effects, tools from MCP servers, and a result as observation text."""

from runtime.tools.approvals import (
    ApprovalEntry,
    ApprovalGate,
    ApprovalLog,
    ApprovalNeeded,
    ApprovalRequest,
    ApprovalRule,
    Approver,
    Decision,
    MemoryApprovalLog,
    PendingApproval,
)
from runtime.tools.define import (
    ArgumentsError,
    Tool,
    ToolContext,
    ToolRegistry,
    idempotency_key,
    tool,
)
from runtime.tools.dispatch import CallGuard, Dispatcher, DispatchPolicy, LockTable, check_cancelled
from runtime.tools.journal import Journal, JournalEntry, MemoryJournal, OnUnknown
from runtime.tools.mcp import McpServer, McpServers, McpToolSettings

__all__ = [
    "ApprovalEntry",
    "ApprovalGate",
    "ApprovalLog",
    "ApprovalNeeded",
    "ApprovalRequest",
    "ApprovalRule",
    "Approver",
    "ArgumentsError",
    "CallGuard",
    "Decision",
    "DispatchPolicy",
    "Dispatcher",
    "Journal",
    "JournalEntry",
    "LockTable",
    "McpServer",
    "McpServers",
    "McpToolSettings",
    "MemoryApprovalLog",
    "MemoryJournal",
    "OnUnknown",
    "PendingApproval",
    "Tool",
    "ToolContext",
    "ToolRegistry",
    "check_cancelled",
    "idempotency_key",
    "tool",
]
