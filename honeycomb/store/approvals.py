"""The run store's ``approvals`` table: the calls that asked for a person's approval,
and the decisions (see :mod:`runtime.tools.approvals`).

A decision is final: :func:`keep_decision` records one only on a call not decided yet,
in the writer's transaction, with one statement that writes it only where the call has
none (SQLite: one writer at a time, across processes; PostgreSQL: the row is locked, and
a second decider reads it again once the first committed), so of several made at once
the first stands and the others are told.
"""

from __future__ import annotations

import msgspec

from honeycomb.store.database import Connection
from honeycomb.store.schema import columns
from runtime.errors import AlreadyDecided
from runtime.tools.approvals import ApprovalEntry, Decision, PendingApproval
from runtime.tools.define import arguments_text

__all__ = ["ASK", "asked_row", "keep_decision", "read_approvals"]


_APPROVAL_COLUMNS = (
    "worker",
    "turn",
    "call_id",
    "role",
    "tool",
    "arguments",
    "why",
    "asked_at",
    "deadline",
    "approved",
    "reason",
    "edited",
    "decided_at",
    "decided_by",
)

ASK = (
    "INSERT INTO approvals (run_id, worker, turn, call_id, role, tool, arguments, why, "
    "asked_at, deadline) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run_id, worker, turn, call_id) DO NOTHING"
)
"""A call that waits for a decision (asked again, it is left as it is)."""

_DECIDE = (
    "INSERT INTO approvals (run_id, worker, turn, call_id, role, tool, arguments, why, "
    "asked_at, deadline, approved, reason, edited, decided_at, decided_by) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run_id, worker, turn, call_id) DO UPDATE SET "
    "approved = excluded.approved, reason = excluded.reason, edited = excluded.edited, "
    "decided_at = excluded.decided_at, decided_by = excluded.decided_by "
    "WHERE approvals.approved IS NULL"
)
"""A decision, on a call asked about or not yet (an approver's): only if undecided."""


def asked_row(run_id: str, pending: PendingApproval) -> tuple[object, ...]:
    """The parameters of :data:`ASK` for ``pending``."""
    p = pending
    return (
        run_id,
        p.worker,
        p.turn,
        p.call_id,
        p.role,
        p.tool,
        arguments_text(p.arguments),
        p.why,
        p.asked_at,
        p.deadline,
    )


def keep_decision(db: Connection, run_id: str, entry: ApprovalEntry) -> None:
    """Record ``entry``'s decision, unless the call was decided already (in ``db``'s
    transaction, which writes nothing then).

    Raises:
        AlreadyDecided: naming the decision that stands, who made it and when.
    """
    d = entry.decision
    assert d is not None, "a decision to keep"
    edited = None if d.arguments is None else arguments_text(d.arguments)
    row = (
        *asked_row(run_id, entry.pending),
        int(d.approve),
        d.reason,
        edited,
        entry.decided_at,
        entry.decided_by,
    )
    if db.execute(_DECIDE, row).rowcount:
        return
    p = entry.pending
    approved, by, at = db.execute(
        "SELECT approved, decided_by, decided_at FROM approvals "
        "WHERE run_id = ? AND worker = ? AND turn = ? AND call_id = ?",
        (run_id, p.worker, p.turn, p.call_id),
    ).fetchone()
    raise AlreadyDecided(run_id, p.call_id, approved=bool(approved), decided_by=by, decided_at=at)


def read_approvals(db: Connection, run_id: str) -> list[ApprovalEntry]:
    """The approvals table's rows of a run (none in a store made before it had one)."""
    if not db.columns("approvals"):
        return []
    entries: list[ApprovalEntry] = []
    selected = columns(db, "approvals", _APPROVAL_COLUMNS)
    for row in db.execute(
        f"SELECT {selected} FROM approvals WHERE run_id = ? ORDER BY asked_at", (run_id,)
    ):
        worker, turn, call_id, role, tool, arguments, why, asked, deadline, *decided = row
        approved, reason, edited, decided_at, decided_by = decided
        pending = PendingApproval(
            call_id=call_id,
            worker=worker,
            role=role,
            turn=turn,
            tool=tool,
            arguments=msgspec.json.decode(arguments),
            why=why,
            asked_at=asked,
            deadline=deadline,
        )
        decision = None
        if approved is not None:
            decision = Decision(
                approve=bool(approved),
                reason=reason,
                arguments=msgspec.json.decode(edited) if edited is not None else None,
            )
        entries.append(
            ApprovalEntry(
                pending=pending, decision=decision, decided_at=decided_at, decided_by=decided_by
            )
        )
    return entries
