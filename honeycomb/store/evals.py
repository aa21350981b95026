"""What a run store keeps of evals (``honeycomb eval``): one row each, its report as
JSON; each case's run is a run of the store like any other. The report's shape is the
eval package's; the store keeps its text and a few columns to list evals by."""

from __future__ import annotations

from honeycomb.store.database import Connection
from runtime.value import Value

__all__ = ["KEEP_EVAL", "EvalSummary", "read_eval", "read_evals"]

KEEP_EVAL = (
    "INSERT INTO evals (eval_id, name, started_at, passed, report) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (eval_id) DO UPDATE SET name = excluded.name, "
    "started_at = excluded.started_at, passed = excluded.passed, report = excluded.report"
)


class EvalSummary(Value, frozen=True, kw_only=True):
    """One line of the evals a store keeps: its id, its cases file's name, when it
    started and whether every case passed."""

    eval_id: str
    name: str
    started_at: float
    passed: bool


def _has_table(db: Connection) -> bool:
    """Whether the store has the evals table (a store of schema 5 or before has none
    until a run opens it to write)."""
    return bool(db.columns("evals"))


def read_evals(db: Connection, limit: int) -> list[EvalSummary]:
    """The latest evals, newest first."""
    if not _has_table(db):
        return []
    rows = db.execute(
        "SELECT eval_id, name, started_at, passed FROM evals ORDER BY started_at DESC LIMIT ?",
        (limit,),
    )
    return [EvalSummary(eval_id=i, name=n, started_at=s, passed=bool(p)) for i, n, s, p in rows]


def read_eval(db: Connection, eval_id: str) -> str | None:
    """The report of eval ``eval_id`` as JSON, or None."""
    if not _has_table(db):
        return None
    found = db.execute("SELECT report FROM evals WHERE eval_id = ?", (eval_id,)).fetchone()
    return str(found[0]) if found is not None else None
