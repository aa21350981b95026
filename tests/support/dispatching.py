"""A dispatcher with the tool-call layers a test names (workers.calls.tool_calls)."""

from __future__ import annotations

from runtime.events import NO_TRACE, Caller, Tracer
from runtime.limits import Slots
from runtime.tools.approval_gate import ApprovalGate
from runtime.tools.define import ToolRegistry
from runtime.tools.dispatch import Dispatcher, DispatchPolicy
from runtime.tools.journal import Journal
from runtime.tools.layers import CallGuard, LockTable
from workers.calls import tool_calls


def layered(
    tools: ToolRegistry,
    *,
    policy: DispatchPolicy | None = None,
    tracer: Tracer = NO_TRACE,
    worker: str | None = None,
    run_id: str | None = None,
    guard: CallGuard | None = None,
    approvals: ApprovalGate | None = None,
    locks: LockTable | None = None,
    limiter: Slots | None = None,
    journal: Journal | None = None,
) -> Dispatcher:
    """A dispatcher of ``tools`` whose calls go through the layers given."""
    policy = policy or DispatchPolicy()
    caller = Caller(worker=worker, run_id=run_id, tracer=tracer)
    calls = tool_calls(
        policy, caller, guard=guard, gate=approvals, locks=locks, slots=limiter, journal=journal
    )
    return Dispatcher(tools, policy=policy, calls=calls, caller=caller, journal=journal)
