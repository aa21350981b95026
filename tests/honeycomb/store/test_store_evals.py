"""The evals a run store keeps: a report by its eval id (an eval kept again replaces
it), the latest listed first; a store made before there were evals reads none, is
left as it was by reading, and keeps them once a run opens it."""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path

from honeycomb import Executor
from honeycomb.hive import load_hive
from honeycomb.store import RunStore
from honeycomb.store.evals import eval_of, runs_of_eval
from tests.support.evals import tiny_hive
from tests.support.old_stores import digest, write_old_store
from tests.support.stores import Where, change, query


async def test_a_report_is_kept_by_its_id_and_the_latest_are_listed_first(
    store: Where,
) -> None:
    store = RunStore(store)  # either store
    await store.open()
    await store.keep_eval("ev-1", "trip", 100.0, True, b'{"one": 1}')
    await store.keep_eval("ev-2", "trip", 200.0, False, b'{"two": 2}')
    await store.keep_eval("ev-1", "trip", 300.0, False, b'{"one": "again"}')
    assert [(e.eval_id, e.passed) for e in store.evals()] == [("ev-1", False), ("ev-2", False)]
    assert [e.eval_id for e in store.evals(limit=1)] == ["ev-1"]
    assert store.eval_report("ev-1") == '{"one": "again"}'
    assert store.eval_report("ev-3") is None
    store.close()


async def test_a_store_of_before_evals_reads_none_and_keeps_them_once_opened(
    tmp_path: Path,
) -> None:
    today = tmp_path / "today.db"
    await Executor.from_hive(load_hive(tiny_hive(tmp_path)), store=today).run("Say hello")
    old = tmp_path / "old.db"
    write_old_store(old, 4, today)
    before = digest(old)
    store = RunStore(old)
    assert store.evals() == []
    assert store.eval_report("ev-1") is None
    assert digest(old) == before  # reading wrote nothing
    await store.open()  # upgraded, as a run opens it
    await store.keep_eval("ev-1", "tiny", 1.0, True, b"{}")
    assert [e.eval_id for e in store.evals()] == ["ev-1"]
    assert len(store.runs()) == 1  # its runs kept
    store.close()


def _as_schema_8(db: Path, *, eval_run: str, interrupted: str) -> None:
    """Make the store in ``db`` one schema 8 made: no ``eval_runs`` table (it knew an
    eval's run by its id alone), no ``interrupted`` column of its evals (its report
    said it), holding ``eval_run`` and an eval ``interrupted`` (Ctrl-C)."""
    raw = sqlite3.connect(db)
    try:
        raw.execute(
            "INSERT INTO runs (run_id, task, status, started_at) VALUES (?, 't', 'waiting', 1.0)",
            (eval_run,),
        )
        raw.execute(
            "INSERT INTO evals (eval_id, name, started_at, passed, report) VALUES (?, ?, ?, ?, ?)",
            (interrupted, "trip", 2.0, 0, '{"eval_id": "ev-cut", "interrupted": true}'),
        )
        raw.execute("DROP TABLE eval_runs")
        raw.execute("ALTER TABLE evals DROP COLUMN interrupted")
        raw.execute("PRAGMA user_version = 8")
        raw.commit()
    finally:
        raw.close()


async def test_a_store_of_schema_8_knows_its_evals_runs_and_interrupted_evals_read_and_upgraded(
    tmp_path: Path,
) -> None:
    """A store of schema 8 knew an eval's run by its id, and an interrupted eval by its
    report: both read so as it is, and carried over as it is brought up to date."""
    db = tmp_path / "runs.db"
    await Executor.from_hive(load_hive(tiny_hive(tmp_path)), store=db).run("Say hello")
    eval_run = "eval:ev-old:0123456789ab"
    _as_schema_8(db, eval_run=eval_run, interrupted="ev-cut")
    before = digest(db)
    store = RunStore(db)

    def known() -> None:
        def eval_of_run(run_id: str) -> str | None:
            return store.read_now(functools.partial(eval_of, run_id=run_id), None)

        assert eval_of_run(eval_run) == "ev-old"
        assert eval_of_run(f"{eval_run}/s1/call_1") == "ev-old"  # a run it calls as a tool
        assert eval_of_run("eval:mine") is None
        assert [(e.eval_id, e.passed, e.interrupted) for e in store.evals()] == [
            ("ev-cut", False, True)
        ]

    known()
    assert digest(db) == before  # read as it is
    await store.open()  # as a run opens it: brought up to date
    assert store.read_now(lambda db: bool(db.columns("eval_runs")), False)
    known()
    assert store.read_now(functools.partial(runs_of_eval, eval_id="ev-old"), []) == [eval_run]
    mine = "eval:my-own-run-id-and-not-an-evals"
    await store.commit(
        ("INSERT INTO runs (run_id, task, status, started_at) VALUES (?, 't', 'ok', 3.0)", (mine,))
    )
    assert store.read_now(functools.partial(eval_of, run_id=mine), None) is None
    store.close()


async def test_upgrading_a_store_keeps_as_evals_runs_only_ids_an_eval_made(
    store: Where,
) -> None:
    """A store of schema 8 knew an eval's run by its id alone: read as it is and brought
    up to date, only an id of the shape an eval gave its runs is an eval's, told case by
    case; a user's own run named ``eval:...`` (or ``EVAL:...``) is a run like any other."""
    evals = {
        "eval:ev-old:0123456789ab": "ev-old",
        "eval:ev:a:b:fedcba987654": "ev:a:b",
        "eval:my-nightly-check-run": None,
        "EVAL:Users-Own-Run-Name-1": None,
        "Eval:ev-old:0123456789ab": None,
        "eval:ev-old:0123456789AB": None,
        "eval:ev-old-0123456789ab": None,
        "eval:ev-old:0123456789ab/s1": None,  # a sub-run: its caller's is the eval's
    }
    opened = RunStore(store)
    await opened.open()
    await opened.commit(
        *(
            ("INSERT INTO runs (run_id, task, status, started_at) VALUES (?, 't', 'ok', 1.0)", (i,))
            for i in evals
        )
    )
    opened.close()
    version = (
        "PRAGMA user_version = 8"
        if isinstance(store, Path)
        else "UPDATE store_schema SET version = 8"
    )
    change(
        store,
        ("DROP TABLE eval_runs", ()),
        ("ALTER TABLE evals DROP COLUMN interrupted", ()),
        (version, ()),
    )
    eighth = RunStore(store)

    def eval_of_run(run_id: str) -> str | None:
        return eighth.read_now(functools.partial(eval_of, run_id=run_id), None)

    assert {i: eval_of_run(i) for i in evals} == {**evals, "eval:ev-old:0123456789ab/s1": "ev-old"}
    await eighth.open()  # brought up to date
    kept = {i: e for i, e in evals.items() if e is not None}
    assert dict(query(store, "SELECT run_id, eval_id FROM eval_runs")) == kept
    eighth.close()


async def test_an_interrupted_eval_is_listed_so(store: Where) -> None:
    store = RunStore(store)  # either store
    await store.open()
    await store.keep_eval("ev-1", "trip", 1.0, False, b"{}", interrupted=True)
    await store.keep_eval("ev-2", "trip", 2.0, False, b"{}")
    assert [(e.eval_id, e.interrupted) for e in store.evals()] == [("ev-2", False), ("ev-1", True)]
    store.close()
