"""Stores written by earlier versions: real files of schema 1 to 4 are read as they
are (reading never changes them), and upgraded to the current schema, in place and in
one transaction, by the first process that writes to them; their runs are still
there, and an unfinished one resumes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest

from honeycomb import Decision
from honeycomb.store import RunStore
from honeycomb.store.schema import (
    APPLICATION_ID,
    EVAL_RUNS,
    EVAL_RUNS_BEFORE,
    SCHEMA_VERSION,
    upgrade_statements,
)
from tests.support import approvals
from tests.support.durable import TASK, Setup, plan
from tests.support.old_stores import digest, write_old_store


def tables(db: Path) -> dict[str, list[tuple[str, str]]]:
    raw = sqlite3.connect(db)
    try:
        names = [n for (n,) in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {
            name: sorted((row[1], row[2]) for row in raw.execute(f"PRAGMA table_info({name})"))
            for name in sorted(names)
        }
    finally:
        raw.close()


def pragmas(db: Path) -> tuple[int, int]:
    raw = sqlite3.connect(db)
    try:
        return (
            raw.execute("PRAGMA application_id").fetchone()[0],
            raw.execute("PRAGMA user_version").fetchone()[0],
        )
    finally:
        raw.close()


@pytest.fixture
def today(tmp_path: Path) -> Path:
    """A store of today's schema holding one finished run of two workers."""
    db = tmp_path / "today.db"
    executor = Setup(tmp_path / "e0", tmp_path / "c0").executor(db)
    result = anyio.run(lambda: executor.run(TASK, subtasks=plan(2), run_id="old"))
    assert result.status == "ok"
    executor.store.close()  # type: ignore[union-attr]
    return db


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_an_old_store_is_read_as_it_is_without_being_changed(
    tmp_path: Path, today: Path, version: int
) -> None:
    db = tmp_path / f"schema{version}.db"
    write_old_store(db, version, today)
    before = digest(db)
    store = RunStore(db)
    (summary,) = store.runs()
    assert (summary.run_id, summary.status, summary.cached_input_tokens) == ("old", "ok", 0)
    assert summary.model_calls > 0
    stored = anyio.run(store.load, "old")
    assert stored is not None
    assert set(stored.workers) == {"w0", "w1"}
    assert stored.planned_by == (None if version < 4 else "given")  # not known before 4
    assert digest(db) == before
    assert pragmas(db)[1] == version


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_an_old_store_is_upgraded_by_its_first_write_and_keeps_its_runs(
    tmp_path: Path, today: Path, version: int
) -> None:
    db = tmp_path / f"schema{version}.db"
    write_old_store(db, version, today)
    new = tmp_path / "new.db"
    anyio.run(RunStore(new).open)

    executor = Setup(tmp_path / "e", tmp_path / "c").executor(db)
    result = anyio.run(lambda: executor.run(TASK, subtasks=plan(1), run_id="next"))
    executor.store.close()  # type: ignore[union-attr]

    assert result.status == "ok"
    assert tables(db) == tables(new)  # the very tables a new store has
    assert pragmas(db) == (APPLICATION_ID, SCHEMA_VERSION)
    assert {r.run_id for r in RunStore(db).runs()} == {"old", "next"}


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_an_unfinished_run_of_an_old_store_resumes_from_its_saved_turns(
    tmp_path: Path, today: Path, version: int
) -> None:
    db = tmp_path / f"schema{version}.db"
    write_old_store(db, version, today, unfinished=True)
    setup = Setup(tmp_path / "e", tmp_path / "c", life="2")
    executor = setup.executor(db)
    result = anyio.run(lambda: executor.resume("old"))
    executor.store.close()  # type: ignore[union-attr]
    assert result.status == "ok"
    # Each worker continued from its last saved turn: only its final call was made again.
    lives = [line.split() for line in (tmp_path / "c").read_text().splitlines()]
    assert sorted((worker, turn) for worker, turn, _ in lives) == [("w0", "3"), ("w1", "3")]
    assert not (tmp_path / "e").exists()  # no side effect ran again
    assert pragmas(db)[1] == SCHEMA_VERSION


def test_each_version_after_two_adds_its_columns_with_alter_table() -> None:
    """``CREATE TABLE IF NOT EXISTS`` adds no column to a table that exists: a version
    makes its new tables (if they are not there), then adds its columns."""
    steps = upgrade_statements(2)
    assert steps[-1] == f"PRAGMA user_version = {SCHEMA_VERSION}"
    kinds = ("ALTER TABLE", "CREATE TABLE IF NOT EXISTS", "CREATE INDEX IF NOT EXISTS")
    carried = ("INSERT INTO eval_runs",)  # schema 9: the evals' runs an earlier one knew
    assert all(s.startswith((*kinds, *carried)) for s in steps[:-1])
    assert steps.index(EVAL_RUNS.strip()) < steps.index(EVAL_RUNS_BEFORE)
    assert any("EXISTS session_turns" in s for s in steps)  # schema 6: a table of its own
    assert any("summary" in s for s in steps)
    assert any("runs ADD COLUMN cached_input_tokens" in s for s in steps)
    # The approvals table (which a store of schema 4 may have) is there before its column.
    made = next(i for i, s in enumerate(steps) if "EXISTS approvals" in s)
    assert made < steps.index("ALTER TABLE approvals ADD COLUMN decided_by TEXT")
    assert upgrade_statements(SCHEMA_VERSION) == [f"PRAGMA user_version = {SCHEMA_VERSION}"]


def test_a_waiting_run_of_a_store_of_schema_4_is_decided_and_resumed(tmp_path: Path) -> None:
    """Its approvals table, made without ``decided_by``, reads as it is (nobody named);
    the first decision upgrades the store, and names who decided."""
    today, effects = tmp_path / "today.db", tmp_path / "effects.txt"
    first = approvals.executor(today, effects)
    anyio.run(lambda: first.run(approvals.TASK, subtasks=approvals.plan(1), run_id="r1"))
    first.store.close()  # type: ignore[union-attr]
    db = tmp_path / "schema4.db"
    write_old_store(db, 4, today)
    before = digest(db)
    (asked,) = RunStore(db).approvals("r1")
    assert (asked.decision, asked.decided_by, asked.pending.call_id) == (None, None, "pay_1")
    assert digest(db) == before

    later = approvals.executor(db, effects)
    anyio.run(lambda: later.decide("r1", "pay_1", approve=True, by="ann"))
    (decided,) = RunStore(db).approvals("r1")
    assert (decided.decision, decided.decided_by) == (Decision.approved(), "ann")
    done = anyio.run(lambda: later.resume("r1"))
    later.store.close()  # type: ignore[union-attr]
    assert approvals.payer_saw(done) == "payer saw: ok: paid 120 to ann"
    assert pragmas(db) == (APPLICATION_ID, SCHEMA_VERSION)


def test_a_crash_in_the_middle_of_an_upgrade_leaves_the_store_as_it_was(
    tmp_path: Path, today: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from honeycomb.store import schema

    db = tmp_path / "schema2.db"
    write_old_store(db, 2, today)
    before = tables(db)
    real = schema.upgrade_statements

    def broken(version: int) -> list[str]:
        steps = real(version)
        return [*steps[:2], "ALTER TABLE no_such_table ADD COLUMN x INTEGER", *steps[2:]]

    monkeypatch.setattr(schema, "upgrade_statements", broken)
    with pytest.raises(Exception, match="no_such_table"):
        anyio.run(RunStore(db).open)
    assert tables(db) == before
    assert pragmas(db)[1] == 2
