"""What a run store keeps of evals (``honeycomb eval``): one row each, its report as
JSON; each case's run is a run of the store like any other. The report's shape is the
eval package's; the store keeps its text and a few columns to list evals by."""

from __future__ import annotations

import os

from honeycomb.store.database import Connection
from runtime.text import valid_text
from runtime.value import Value

__all__ = [
    "EVAL_RUN",
    "KEEP_EVAL",
    "EvalSummary",
    "eval_run_id",
    "of_an_eval",
    "read_eval",
    "read_evals",
]

EVAL_RUN = "eval:"
"""How the id of an eval's run begins (``eval:ev-3f9c20aa:5d1c0e9a2b47``): the store
knows by it, in any process, that nobody decides on the run's calls (the eval denies
those its run leaves waiting), nor on those of the runs it calls as tools (whose ids
begin with its own)."""

_MOST_CHARS = 100  # of the eval's id in its runs': within the 512 bytes of an id, in UTF-8


def eval_run_id(eval_id: str) -> str:
    """A new id for a run of eval ``eval_id``: ``eval:EVAL_ID:`` and 12 hex digits, new
    each run (a run of an eval gone on with is made anew, not resumed). No ``/``, which
    parts a run's id from its workers' names (``RUN_ID/planner``), and a sub-run's from
    its caller's: its eval's id (the CLI's may hold one) has each as a ``:``."""
    named = valid_text(eval_id[:_MOST_CHARS]).replace("/", ":")
    return f"{EVAL_RUN}{named}:{os.urandom(6).hex()}"


def of_an_eval(run_id: str) -> bool:
    """Whether ``run_id`` is the id of an eval's run (:func:`eval_run_id`), or of a run
    one calls as a tool."""
    return run_id.startswith(EVAL_RUN)


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
