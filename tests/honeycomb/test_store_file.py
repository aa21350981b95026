"""The run store's file: only a Honeycomb store (or a new, empty file) is written to;
reading never creates or changes a file; a copy of the ``.db`` alone holds every run
that ended."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import anyio
import pytest

from honeycomb import RunStore, StoreError
from honeycomb.cli.main import main
from tests.support.durable import TASK, Setup, plan


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def foreign_file(path: Path) -> Path:
    """Another application's SQLite file (rollback journal, its own tables)."""
    with sqlite3.connect(path) as raw:
        raw.executescript(
            "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT);"
            "INSERT INTO notes (text) VALUES ('keep me');"
        )
    raw.close()
    return path


def test_another_applications_file_is_refused_and_left_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = foreign_file(tmp_path / "app.db")
    before = digest(db)
    store = RunStore(db)
    with pytest.raises(StoreError, match="is not a Honeycomb run store") as caught:
        anyio.run(store.open)
    assert str(db) in str(caught.value)
    with pytest.raises(StoreError, match="is not a Honeycomb run store"):
        store.runs()
    with pytest.raises(StoreError, match="is not a Honeycomb run store"):
        anyio.run(store.load, "r1")
    executor = Setup(tmp_path / "e", tmp_path / "c").executor(db)
    with pytest.raises(StoreError, match="is not a Honeycomb run store"):
        anyio.run(lambda: executor.run(TASK, subtasks=plan(1), run_id="r1"))
    assert main(["runs", "--store", str(db)]) == 2
    assert "is not a Honeycomb run store" in capsys.readouterr().err
    assert main(["trace", "r1", "--store", str(db)]) == 2
    assert digest(db) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]  # no -wal, no -shm
    with sqlite3.connect(db) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert raw.execute("PRAGMA user_version").fetchone()[0] == 0


def test_a_file_of_another_honeycomb_version_is_refused_unchanged(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    anyio.run(RunStore(db).open)
    with sqlite3.connect(db) as raw:
        raw.execute("PRAGMA user_version = 99")
    raw.close()
    before = digest(db)
    with pytest.raises(StoreError, match="newer Honeycomb"):
        anyio.run(RunStore(db).open)
    with pytest.raises(StoreError, match="newer Honeycomb"):
        RunStore(db).runs()
    assert digest(db) == before


def test_reading_a_missing_store_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "no" / "runs.db"
    store = RunStore(db)
    assert store.runs() == []
    assert store.find("r1") is None
    assert store.spans("r1") == []
    assert anyio.run(store.load, "r1") is None
    assert main(["runs", "--store", str(db)]) == 0
    assert not (tmp_path / "no").exists()


def test_an_empty_file_becomes_a_store(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    db.touch()
    assert RunStore(db).runs() == []  # read as a store with no runs, and left empty
    assert db.stat().st_size == 0
    executor = Setup(tmp_path / "e", tmp_path / "c").executor(db)
    result = anyio.run(lambda: executor.run(TASK, subtasks=plan(1), run_id="r1"))
    assert result.status == "ok"
    assert [r.run_id for r in RunStore(db).runs()] == ["r1"]


def test_a_store_of_the_first_schema_without_an_application_id_is_accepted(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    executor = Setup(tmp_path / "e", tmp_path / "c").executor(db)
    anyio.run(lambda: executor.run(TASK, subtasks=plan(1), run_id="old"))
    executor.store.close()  # type: ignore[union-attr]
    with sqlite3.connect(db) as raw:  # as Honeycomb wrote it before leases existed
        raw.executescript("DROP TABLE leases; PRAGMA application_id = 0; PRAGMA user_version = 1;")
    raw.close()
    assert [r.run_id for r in RunStore(db).runs()] == ["old"]
    again = Setup(tmp_path / "e", tmp_path / "c").executor(db)
    anyio.run(lambda: again.run(TASK, subtasks=plan(1), run_id="new"))
    assert {r.run_id for r in RunStore(db).runs()} == {"old", "new"}


async def test_a_copy_of_the_db_file_alone_holds_the_runs_that_ended(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    store = RunStore(db)  # left open, as a service keeps it
    executor = Setup(tmp_path / "e", tmp_path / "c").executor(store)
    await executor.run(TASK, subtasks=plan(3), run_id="r1")
    copy = tmp_path / "copy.db"
    shutil.copyfile(db, copy)  # what people do: the -wal file stays behind
    [summary] = RunStore(copy).runs()
    assert (summary.run_id, summary.status, summary.workers) == ("r1", "ok", 3)
    stored = await RunStore(copy).load("r1")
    assert stored is not None
    assert len(stored.workers) == 3
    assert main(["runs", "--store", str(copy)]) == 0
    assert "r1" in capsys.readouterr().out
    store.close()
    assert not (tmp_path / "runs.db-wal").exists() or (tmp_path / "runs.db-wal").stat().st_size == 0
