"""A process forked from one that used a run store (a server's workers forked once the
app was loaded, ``multiprocessing``'s default on Linux) runs with it: its writes start
a thread and connections of its own, its parent's go on as they were, and it renews
none of its parent's leases. On both stores."""

from __future__ import annotations

import multiprocessing
import sys
from multiprocessing.queues import SimpleQueue
from pathlib import Path

import anyio
import pytest

from honeycomb import Executor
from honeycomb.store import Connection, RunStore
from tests.support.concurrency import MEET_LIMIT_S
from tests.support.durable import TASK, Setup, plan
from tests.support.stores import Where

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="no fork (Windows)")


def _backend(db: Connection) -> int | None:
    """The server process a PostgreSQL store's read is answered by (None: SQLite)."""
    if db.row_lock == "":
        return None
    found: int = db.execute("SELECT pg_backend_pid()").fetchone()[0]
    return found


def _in_child(executor: Executor, store: RunStore, told: SimpleQueue[object]) -> None:
    """A run of the child's own, on the store its parent used: what it leases, which
    connection it reads on, how its run ended."""
    told.put(sorted(lease.run_id for lease in store._writer.held))
    told.put(store.read_now(_backend, None))
    result = anyio.run(lambda: executor.run(TASK, subtasks=plan(2), run_id="child"))
    told.put(result.status)


def test_a_forked_process_runs_with_the_store_its_parent_used(store: Where, tmp_path: Path) -> None:
    # The child's run waited for ever: its writes went to its parent's writer, whose
    # thread is not in the child. A PostgreSQL child read on its parent's pool of
    # connections, and its writer renewed its parent's leases.
    kept = RunStore(store)
    executor = Setup(tmp_path / "e", tmp_path / "c").executor(kept)
    assert anyio.run(lambda: executor.run(TASK, subtasks=plan(2), run_id="parent")).status == "ok"
    assert [run.run_id for run in kept.runs()] == ["parent"]  # its readers too
    reading = kept.read_now(_backend, None)  # its pool's one connection
    held = anyio.run(kept.take_lease, "held")  # a run the parent carries on as it forks
    fork = multiprocessing.get_context("fork")
    told: SimpleQueue[object] = fork.SimpleQueue()
    child = fork.Process(target=_in_child, args=(executor, kept, told))
    child.start()
    child.join(MEET_LIMIT_S)
    if child.is_alive():
        child.kill()
        child.join()
        pytest.fail("the forked process's run never ended")
    assert child.exitcode == 0  # else it told less than it had to: not waited for
    leased, read_on, ended = told.get(), told.get(), told.get()
    assert (leased, ended) == ([], "ok")
    assert read_on is None or read_on != reading  # a connection of the child's own
    # The parent's own writer and readers go on as they were.
    kept.let_go(held)
    again = anyio.run(lambda: executor.run(TASK, subtasks=plan(1), run_id="again"))
    assert again.status == "ok"
    assert {run.run_id for run in kept.runs()} == {"parent", "child", "again"}
    kept.close()
