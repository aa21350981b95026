"""What a run store keeps of evals (``honeycomb eval``): one row each, its report as
JSON; each case's run is a run of the store like any other, and those whose calls may
wait for a person are kept as the eval's (``eval_runs``). The report's shape is the
eval package's; the store keeps its text and a few columns to list evals by."""

from __future__ import annotations

import os
import re

import msgspec

from honeycomb.store.database import Connection
from honeycomb.store.schema import columns
from runtime.text import valid_text
from runtime.value import Value

__all__ = [
    "EVAL_RUN",
    "KEEP_EVAL",
    "KEEP_EVAL_RUN",
    "EvalSummary",
    "eval_of",
    "eval_run_id",
    "read_eval",
    "read_evals",
    "runs_of_eval",
]

EVAL_RUN = "eval:"
"""How the id of an eval's run begins (``eval:ev-3f9c20aa:5d1c0e9a2b47``), for people to
read: the store knows a run is an eval's by its row in ``eval_runs``
(:data:`KEEP_EVAL_RUN`), so a run a user names ``eval:...`` is a run like any other."""

KEEP_EVAL_RUN = "INSERT INTO eval_runs (run_id, eval_id) VALUES (?, ?)"
"""Keep a run as eval's ``eval_id``, before it starts: in any process that reads the
store, nobody decides on its calls (the eval denies those its run leaves waiting), nor
on those of the runs it calls as tools (whose ids begin with its own and a ``/``)."""

_MOST_CHARS = 100  # of the eval's id in its runs': within the 512 bytes of an id, in UTF-8


def eval_run_id(eval_id: str) -> str:
    """A new id for a run of eval ``eval_id``: ``eval:EVAL_ID:`` and 12 hex digits, new
    each run (a run of an eval gone on with is made anew, not resumed). No ``/``, which
    parts a run's id from its workers' names (``RUN_ID/planner``), and a sub-run's from
    its caller's: its eval's id (the CLI's may hold one) has each as a ``:``."""
    named = valid_text(eval_id[:_MOST_CHARS]).replace("/", ":")
    return f"{EVAL_RUN}{named}:{os.urandom(6).hex()}"


def eval_of(db: Connection, run_id: str) -> str | None:
    """The id of the eval whose run ``run_id`` is (or whose run calls it as a tool: a
    sub-run's id is its caller's, a ``/`` and more), or None: a run of no eval. A store
    of an earlier schema, read as it is, knew its evals' runs by their ids alone."""
    root = run_id.split("/", 1)[0]
    if not db.columns("eval_runs"):
        return _named(root)
    found = db.execute("SELECT eval_id FROM eval_runs WHERE run_id = ?", (root,)).fetchone()
    return str(found[0]) if found is not None else None


_NAMED = re.compile(rf"{re.escape(EVAL_RUN)}([^/]+):[0-9a-f]{{12}}")
"""An id of :func:`eval_run_id`'s shape, told as the store upgrading to schema 9 tells
it (``EVAL_RUNS_BEFORE``): case by case, and no ``/``."""


def _named(run_id: str) -> str | None:
    """The eval an id of :func:`eval_run_id`'s shape names, as a store of schema 8 or
    before told an eval's run."""
    found = _NAMED.fullmatch(run_id)
    return found[1] if found is not None else None


def runs_of_eval(db: Connection, eval_id: str) -> list[str]:
    """The runs eval ``eval_id`` kept as its own (:data:`KEEP_EVAL_RUN`)."""
    if not db.columns("eval_runs"):
        return []
    rows = db.execute("SELECT run_id FROM eval_runs WHERE eval_id = ?", (eval_id,))
    return sorted(run_id for (run_id,) in rows)


KEEP_EVAL = (
    "INSERT INTO evals (eval_id, name, started_at, passed, report, interrupted) "
    "VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (eval_id) DO UPDATE SET name = excluded.name, "
    "started_at = excluded.started_at, passed = excluded.passed, report = excluded.report, "
    "interrupted = excluded.interrupted"
)


class EvalSummary(Value, frozen=True, kw_only=True):
    """One line of the evals a store keeps: its id, its cases file's name, when it
    started, whether every case passed, and whether it was interrupted (Ctrl-C) before
    every run was made."""

    eval_id: str
    name: str
    started_at: float
    passed: bool
    interrupted: bool = False


class _Interrupted(msgspec.Struct):
    interrupted: bool = False


def _has_table(db: Connection) -> bool:
    """Whether the store has the evals table (a store of schema 5 or before has none
    until a run opens it to write)."""
    return bool(db.columns("evals"))


def read_evals(db: Connection, limit: int) -> list[EvalSummary]:
    """The latest evals, newest first."""
    if not _has_table(db):
        return []
    selected = columns(db, "evals", ("eval_id", "name", "started_at", "passed", "interrupted"))
    rows = db.execute(
        f"SELECT {selected} FROM evals ORDER BY started_at DESC LIMIT ?", (limit,)
    ).fetchall()
    return [
        EvalSummary(
            eval_id=i,
            name=n,
            started_at=s,
            passed=bool(p),
            interrupted=bool(c) if c is not None else _kept_interrupted(db, i, passed=bool(p)),
        )
        for i, n, s, p, c in rows
    ]


def _kept_interrupted(db: Connection, eval_id: str, *, passed: bool) -> bool:
    """Whether an eval kept by an earlier version, which kept it in its report alone,
    was interrupted (one that passed was not)."""
    report = None if passed else read_eval(db, eval_id)
    if report is None:
        return False
    try:
        return msgspec.json.decode(report, type=_Interrupted).interrupted
    except msgspec.DecodeError:  # not JSON, or an interrupted that is no bool
        return False


def read_eval(db: Connection, eval_id: str) -> str | None:
    """The report of eval ``eval_id`` as JSON, or None."""
    if not _has_table(db):
        return None
    found = db.execute("SELECT report FROM evals WHERE eval_id = ?", (eval_id,)).fetchone()
    return str(found[0]) if found is not None else None
