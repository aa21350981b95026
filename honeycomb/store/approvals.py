"""The run store's ``approvals`` table read back: the calls that asked for a person's
approval, and the decisions (see :mod:`runtime.approvals`)."""

from __future__ import annotations

import sqlite3

import msgspec

from runtime.approvals import ApprovalEntry, Decision, PendingApproval

__all__ = ["read_approvals"]


_APPROVAL_COLUMNS = (
    "worker, turn, call_id, role, tool, arguments, why, asked_at, deadline, approved, reason, "
    "edited, decided_at"
)


def read_approvals(db: sqlite3.Connection, run_id: str) -> list[ApprovalEntry]:
    """The approvals table's rows of a run (none in a store made before it had one)."""
    exists = db.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'approvals'"
    ).fetchone()
    if exists is None:
        return []
    entries: list[ApprovalEntry] = []
    for row in db.execute(
        f"SELECT {_APPROVAL_COLUMNS} FROM approvals WHERE run_id = ? ORDER BY asked_at",
        (run_id,),
    ):
        worker, turn, call_id, role, tool, arguments, why, asked, deadline, *decided = row
        approved, reason, edited, decided_at = decided
        pending = PendingApproval(
            call_id=call_id, worker=worker, role=role, turn=turn, tool=tool,
            arguments=msgspec.json.decode(arguments), why=why, asked_at=asked, deadline=deadline,
        )  # fmt: skip
        decision = None
        if approved is not None:
            decision = Decision(
                approve=bool(approved),
                reason=reason,
                arguments=msgspec.json.decode(edited) if edited is not None else None,
            )
        entries.append(ApprovalEntry(pending=pending, decision=decision, decided_at=decided_at))
    return entries
