"""Tools and their calls: ``@tool`` and the registry (:mod:`~runtime.tools.define`),
dispatching one model turn's calls (:mod:`~runtime.tools.dispatch`), the layers a
call goes through (:mod:`~runtime.tools.layers`: argument guards, approval, locks,
the journal of side effects, tracing, time limits), approvals and the journal's
values, tools from MCP servers, and a result as observation text."""

from runtime.tools.approval_gate import ApprovalGate
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
from runtime.tools.define import (
    ArgumentsError,
    Tool,
    ToolContext,
    ToolRegistry,
    idempotency_key,
    tool,
)
from runtime.tools.dispatch import Dispatcher, DispatchPolicy, LockTable, check_cancelled
from runtime.tools.journal import Journal, JournalEntry, MemoryJournal, OnUnknown
from runtime.tools.layers import CallGuard
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
