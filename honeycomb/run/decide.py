"""Deciding on a stored run's calls that wait for approval: what
:meth:`honeycomb.Executor.decide` and ``honeycomb approve`` record.

A decision is one row of the run store's ``approvals`` table; the run's workers read
it when the run is resumed (in this process or another), and a call decided once is
never asked about again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from honeycomb.run.record import approval_rows
from honeycomb.store import RunStore
from runtime import ArgumentsError, Tool
from runtime.approvals import ApprovalEntry, Decision, PendingApproval
from runtime.errors import ApprovalError
from runtime.journal import arguments_text

__all__ = ["decide", "pending_of"]

ToolFinder = Callable[[PendingApproval], Tool[Any, Any] | None]
"""The tool a pending call is to, to validate edited arguments (None: unknown here)."""


async def pending_of(store: RunStore, run_id: str) -> list[PendingApproval]:
    """The calls of run ``run_id`` that wait for a decision, in the order they asked."""
    return [e.pending for e in await store.approvals_of(run_id) if e.decision is None]


async def decide(
    store: RunStore,
    run_id: str,
    call_id: str,
    *,
    approve: bool,
    reason: str | None = None,
    arguments: dict[str, Any] | None = None,
    worker: str | None = None,
    tool_for: ToolFinder | None = None,
) -> PendingApproval:
    """Record a decision on a call waiting for approval; return the call.

    Raises:
        ApprovalError: when the run has no such call waiting, the call id is the
            waiting call of several workers and ``worker`` is not given, it was
            decided already, its time to decide ran out, arguments come with a
            denial, or the edited arguments fail the tool's validation.
        StoreError: when the store cannot be read or written.
    """
    if arguments is not None and not approve:
        raise ApprovalError(run_id, call_id, "edited arguments go with an approval, not a denial")
    entries = [
        e
        for e in await store.approvals_of(run_id)
        if e.pending.call_id == call_id and (worker is None or e.pending.worker == worker)
    ]
    if not entries:
        raise ApprovalError(
            run_id, call_id, f"run {run_id!r} has no call {call_id!r} that asked for approval"
        )
    undecided = [e for e in entries if e.decision is None]
    if not undecided:
        raise ApprovalError(run_id, call_id, "it was decided already")
    if len(undecided) > 1:
        workers = ", ".join(sorted(e.pending.worker for e in undecided))
        raise ApprovalError(
            run_id, call_id, f"workers {workers} each wait on a call of this id: name the worker"
        )
    pending = undecided[0].pending
    now = time.time()
    if pending.deadline is not None and now >= pending.deadline:
        raise ApprovalError(
            run_id, call_id,
            "its time to decide ran out; the resumed run denies it (approval_timeout_s)",
        )  # fmt: skip
    if arguments is not None:
        _check(pending, arguments, tool_for, run_id)
    decision = Decision(
        approve=approve,
        reason=reason if reason or approve else "denied by a person",
        arguments=arguments,
    )
    entry = ApprovalEntry(pending=pending, decision=decision, decided_at=now)
    await store.commit(*approval_rows(run_id, entry))
    return pending


def _check(
    pending: PendingApproval, arguments: dict[str, Any], tool_for: ToolFinder | None, run_id: str
) -> None:
    """Edited arguments validate against the tool's schema (again, when it runs)."""
    if not isinstance(arguments, dict):
        raise ApprovalError(
            run_id,
            pending.call_id,
            f"arguments must be a JSON object, got {type(arguments).__name__}",
        )
    found = tool_for(pending) if tool_for is not None else None
    if found is None:
        return
    try:
        found.parse_arguments(arguments_text(arguments))
    except ArgumentsError as exc:
        raise ApprovalError(run_id, pending.call_id, f"the edited arguments: {exc}") from exc
