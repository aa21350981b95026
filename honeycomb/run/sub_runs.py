"""What a sub-run (a hive called as a tool, :meth:`honeycomb.Executor.as_tool`) does
with its calls that need a person's approval: it keeps no store for them to wait in,
so they go to the calling run's approver, told of them as the calling run names their
workers, or are denied saying why."""

from __future__ import annotations

from typing import TYPE_CHECKING

from msgspec.structs import replace

from runtime.tools.approvals import (
    CALLER_BY,
    ApprovalRequest,
    Approver,
    Decision,
    NoApprover,
)

if TYPE_CHECKING:
    from honeycomb.run.crew import Crew

__all__ = ["CANNOT_WAIT", "NO_WAIT", "asked_as", "may_ask", "nobody_decides"]


def asked_as(approver: Approver, run_id: str, prefix: str) -> Approver:
    """``approver``, told of each call as the run ``run_id`` names the worker that
    makes it: ``prefix`` and the worker's name in its own run."""

    async def ask(request: ApprovalRequest) -> Decision:
        worker = f"{prefix}{request.worker}" if request.worker else prefix.rstrip("/")
        decision = await approver(replace(request, run_id=run_id, worker=worker))
        if isinstance(decision, Decision) and decision.by is None:
            # Kept as the calling run's approver's: the sub-run has none of its own.
            return replace(decision, by=CALLER_BY)
        return decision

    return ask


CANNOT_WAIT = (
    "no approver is attached, and a call of a hive called as a tool cannot wait for a "
    "decision: that hive's run keeps no store (the calling run's store keeps the calling "
    "run's calls only). Attach an approver to the calling run (Executor(approver=...), or "
    "run it on a terminal: honeycomb run asks there) or to the hive's own Executor"
)
"""Why a call of a sub-run (a hive called as a tool) is denied when nobody can decide it."""


def may_ask(crew: Crew) -> bool:
    """Whether a call of a worker of ``crew``'s roles may need a person's approval: a
    tool of a role is one its rule asks about, or the role has MCP tools (known once
    its servers list them) and its rule names tools or asks for every side-effecting
    one, or a server of its marks a tool ``approval: true``."""
    for role in crew.roles.values():
        setup = crew.setup_for(role, None)
        rule = setup.approvals
        if any(rule.why(t) is not None for t in setup.tools):
            return True
        if crew.mcp.refs(role) and (rule.tools or rule.side_effects or crew.mcp.asks(role)):
            return True
    return False


def nobody_decides(tool: str, file: str) -> str:
    """Why a run with no approver cannot call the hive tool ``tool`` (of the hive
    ``file``), whose calls may need approval."""
    return (
        f"the hive {file} asks for approval of some calls, and nobody can decide them: "
        "this run has no approver, and a call of a hive called as a tool cannot wait in "
        "the run store (the sub-run keeps none), so each would be denied. Run it on a "
        "terminal (honeycomb run asks there) or attach an approver "
        f"(Executor(approver=...)); or take {tool!r} out of the role's tools"
    )


NO_WAIT = NoApprover(CANNOT_WAIT)
"""The approver of a sub-run whose caller has none: a call of it cannot wait."""
