"""Stored runs that stop abnormally: a BaseException raised by a tool or a model marks
the run interrupted and is raised as itself; workers the store failed are run again by
a resume once the store works; a worker is reported finished only once its result is
durable."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from honeycomb import Subtask
from honeycomb.events import WorkerFinished
from honeycomb.store import RunStore
from runtime import Event
from tests.support import ROOT, fatal
from tests.support.durable import TASK, Setup, calls_by_worker, plan


def run_status(db: Path) -> tuple[str, dict[str, str]]:
    with sqlite3.connect(db) as raw:
        [(status,)] = raw.execute("SELECT status FROM runs WHERE run_id = 'r1'").fetchall()
        workers = dict(raw.execute("SELECT worker, status FROM workers WHERE result IS NOT NULL"))
        assert raw.execute("SELECT count(*) FROM leases").fetchone() == (0,)
    return status, workers


async def resumed_and_checked(db: Path) -> None:
    """Resume r1 with a model that answers: w0 (finished) is not run again."""
    asked: list[str] = []
    result = await fatal.executor(db, None, "model", asked).resume("r1")
    assert result.status == "ok"
    assert [s.status for s in result.subtasks.values()] == ["ok", "ok", "ok"]
    assert sorted(set(asked)) == ["w1", "w2"]


@pytest.mark.parametrize("where", fatal.WHERE)
@pytest.mark.parametrize("kind", ["KeyboardInterrupt", "SystemExit"])
def test_keyboard_interrupt_or_system_exit_in_a_tool_or_model_interrupts_the_run(
    tmp_path: Path, kind: str, where: str
) -> None:
    db = tmp_path / "runs.db"
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.fatal", str(db), kind, where],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == {"raised": kind}
    status, finished = run_status(db)
    assert status == "interrupted"
    assert finished == {"w0": "ok"}  # the finished worker is kept; w1 and w2 were not
    anyio.run(resumed_and_checked, db)


@pytest.mark.parametrize("where", fatal.WHERE)
async def test_an_own_base_exception_is_raised_as_itself_not_in_a_group(
    tmp_path: Path, where: str
) -> None:
    db = tmp_path / "runs.db"
    executor = fatal.executor(db, fatal.Abort, where)
    events: list[Event] = []
    with pytest.raises(fatal.Abort, match="raised by the"):
        await executor.run("the task", subtasks=fatal.PLAN, run_id="r1", on_event=[events.append])
    # Every worker.started has its worker.finished, the worker that raised it included.
    started = [e.worker for e in events if e.kind == "worker.started"]
    ended = {e.worker: e for e in events if isinstance(e, WorkerFinished)}
    assert sorted(started) == sorted(ended) == ["w0", "w1", "w2"]
    assert ended["w1"].status == "cancelled"
    assert "Abort: the run stopped: raised by the" in str(ended["w1"].error)
    status, finished = run_status(db)
    assert status == "interrupted"
    assert finished == {"w0": "ok"}
    # What stopped it, and where, is kept with the run (and shown as it ends).
    by = {
        "model": "the turn model call of w1",
        "guard": "guard 'executor.<locals>.checked' of worker w1",  # it said nobody
    }.get(where, "tool 'boom' of worker w1")
    with sqlite3.connect(db) as raw:
        assert raw.execute("SELECT error FROM runs").fetchall() == [
            (f"Abort: raised by the {where.split()[-1]}; raised by {by}",)
        ]
    raw.close()
    await resumed_and_checked(db)


async def test_workers_the_store_failed_are_run_again_by_resume(tmp_path: Path) -> None:
    db, effects, calls = tmp_path / "runs.db", tmp_path / "effects.txt", tmp_path / "calls.txt"
    store = RunStore(db)
    await store.open()
    # The store refuses w1's first side effect's intent, as a full disk would.
    with sqlite3.connect(db) as raw:
        raw.execute(
            "CREATE TRIGGER full BEFORE INSERT ON journal WHEN NEW.arguments LIKE '%w1-1%' "
            "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"
        )
    raw.close()
    subtasks = [*plan(2), Subtask(id="w2", role="worker", instruction="go", depends_on=("w1",))]
    # One worker at a time, so that only w1's write meets the failure.
    first = Setup(effects, calls).executor(store, max_workers=1)
    result = await first.run(TASK, subtasks=subtasks, run_id="r1")
    assert result.status == "partial"
    failed = result.subtasks["w1"]
    assert failed.status == "failed"
    assert failed.error is not None
    assert (failed.error.type, "disk is full" in failed.error.message) == ("StoreError", True)
    assert result.subtasks["w2"].status == "skipped"
    assert sorted(effects.read_text().splitlines()) == ["w0-1", "w0-2"]

    with sqlite3.connect(db) as raw:  # the store works again
        raw.execute("DROP TRIGGER full")
    raw.close()
    again = await Setup(effects, calls, life="2").executor(store).run(TASK, run_id="r1")
    assert again.status == "ok"
    assert sorted(effects.read_text().splitlines()) == [
        "w0-1", "w0-2", "w1-1", "w1-2", "w2-1", "w2-2",
    ]  # fmt: skip
    made = calls_by_worker(calls)
    assert [turn for turn, life in made["w0"] if life == "2"] == []  # w0 had finished
    # w1 is run again from its last durable turn, to its end
    assert [turn for turn, life in made["w1"] if life == "2"][-2:] == [2, 3]
    assert [turn for turn, life in made["w2"] if life == "2"] == [1, 2, 3]


async def test_a_worker_is_reported_finished_once_its_result_is_durable(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    seen: dict[str, tuple[str, bool] | None] = {}

    def check(event: Event) -> None:
        if isinstance(event, WorkerFinished):
            with sqlite3.connect(db) as raw:  # another connection: only what is committed
                row = raw.execute(
                    "SELECT status, result IS NOT NULL FROM workers WHERE worker = ?",
                    (event.worker,),
                ).fetchone()
            raw.close()
            seen[event.worker] = row

    executor = Setup(tmp_path / "e", tmp_path / "c").executor(db)
    await executor.run(TASK, subtasks=plan(3), run_id="r1", on_event=[check])
    assert seen == {f"w{i}": ("ok", True) for i in range(3)}
