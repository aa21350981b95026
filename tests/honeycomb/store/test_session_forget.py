"""Forgetting a session leaves nothing of it in the store: the runs of its turns and
of the turns it took back (``pop``, ``clear``, a message its guards refused), each
run whole (workers, spans, journal, approvals, lives), on both kinds of store; and
retention reads each session's last turn from an index."""

from __future__ import annotations

import asyncio
import re
import sqlite3
from pathlib import Path

import pytest

from honeycomb import Executor, GuardCheck, GuardrailTripped, Guards, Role, ToolMessage, tool
from honeycomb.store import RunStore, forgetting
from honeycomb.store.forgetting import LAST, runs_of
from honeycomb.store.schema import SCHEMA_VERSION
from honeycomb.store.sessions import StoredSessions
from honeycomb.testing import FunctionModel, call
from runtime import ModelRequest, SessionBusy
from tests.support.model_requests import Answer
from tests.support.stores import Where, query

MARK = re.compile(r"Zz\w+")
"""The words each message names: found anywhere in the store, a message is kept."""


def _refuse_wires(check: GuardCheck) -> str | None:
    return "it asks for a wire" if "wire" in check.text else None


def _payer(store: Where, model: FunctionModel | None = None) -> Executor:
    """A payer that pays whom each message names, a call that needs approval."""

    @tool(side_effects=True, approval=True)
    def pay(to: str) -> str:
        """Pay someone."""
        return f"paid {to}"

    def answer(request: ModelRequest) -> Answer:
        if any(isinstance(m, ToolMessage) for m in request.messages):
            return "done"
        named = MARK.findall(" ".join(str(m.content) for m in request.messages))
        return call("pay", {"to": named[-1]})

    return Executor(
        [Role(name="payer", tools=("pay",))],
        model or FunctionModel(answer),
        tools=[pay],
        aggregator="concat",
        planner=lambda task: [("payer", task)],
        guards=Guards(input=(_refuse_wires,)),
        store=store,
    )


def _holding(store: Where, pattern: str) -> list[str]:
    """The tables and columns of ``store`` where some row's text holds ``pattern``."""
    if isinstance(store, Path):
        raw = sqlite3.connect(store)
        try:
            listed = raw.execute("SELECT name FROM sqlite_master WHERE type='table'")
            tables = [name for (name,) in listed]
            found = [(t, row[1]) for t in tables for row in raw.execute(f"PRAGMA table_info({t})")]
        finally:
            raw.close()
    else:
        found = query(
            store,
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema()",
        )
    return [
        f"{table}.{column}"
        for table, column in found
        if query(
            store,
            f"SELECT count(*) FROM {table} WHERE CAST({column} AS TEXT) LIKE ?",
            (f"%{pattern}%",),
        )[0][0]
    ]


async def test_forgetting_a_session_leaves_nothing_of_it_to_read_back(store: Where) -> None:
    # The turns taken back (by pop, by clear, a message its guards refused) kept their
    # runs, which forget() left: their messages, answers, calls and approvals.
    executor = _payer(store)
    session = executor.session("ann")
    waiting = await session.run("Pay ZzAlpha.")
    (asked,) = waiting.pending
    await executor.decide(waiting.run_id, asked.call_id, approve=True)
    await session.resume()  # paid: a journal entry, an approval decided
    await session.run("Pay ZzBravo.")  # it waits for approval ...
    await session.pop()  # ... and is taken back
    await session.run("Pay ZzCharlie.")
    await session.clear()
    with pytest.raises(GuardrailTripped):
        await session.run("Then wire ZzDelta the funds.")
    await session.run("Pay ZzEcho.")
    assert executor.store is not None
    assert query(store, "SELECT count(*) FROM journal")[0][0] > 0
    assert len(executor.store.runs()) == 5

    await session.forget()
    await executor.store.flush()
    assert await session.turns() == []
    assert executor.store.runs() == []
    assert await executor.pending(waiting.run_id) == []
    assert _holding(store, "Zz") == []
    for table in ("runs", "workers", "spans", "journal", "approvals", "lives", "leases"):
        assert query(store, f"SELECT count(*) FROM {table}") == [(0,)], table
    executor.store.close()


async def test_a_run_a_fork_shares_is_kept_until_both_are_forgotten(store: Where) -> None:
    executor = _payer(store)
    session = executor.session("ann")
    shared = await session.run("Pay ZzAlpha.")
    fork = await session.fork(1, "ann-b")
    await session.pop()  # taken back here, still the fork's turn
    await session.forget()
    assert executor.store is not None
    assert [r.run_id for r in executor.store.runs()] == [shared.run_id]
    await fork.clear()  # taken back there too: still the fork's, to forget
    assert [r.run_id for r in executor.store.runs()] == [shared.run_id]
    await fork.forget()
    assert executor.store.runs() == []
    executor.store.close()


async def test_retention_forgets_a_session_whose_turns_were_all_taken_back(store: Where) -> None:
    executor = _payer(store)
    await executor.session("ann").run("Pay ZzAlpha.")
    await executor.session("ann").clear()
    await executor.session("bob").run("Pay ZzBravo.")
    assert executor.store is not None
    stored = StoredSessions(executor.store)
    assert await stored.prune(before=None, keep=1) == ["ann"]
    assert _holding(store, "ZzAlpha") == []
    assert len(executor.store.runs()) == 1
    executor.store.close()


class _Explained:
    """A store's connection that keeps the plan of each statement it runs."""

    def __init__(self, db: Path) -> None:
        self.raw = sqlite3.connect(db)
        self.plans: list[str] = []

    def execute(self, sql: str, params: tuple[object, ...] = ()) -> sqlite3.Cursor:
        self.plans += [row[3] for row in self.raw.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
        return self.raw.execute(sql, params)

    def columns(self, table: str) -> frozenset[str]:
        return frozenset(row[1] for row in self.raw.execute(f"PRAGMA table_info({table})"))


def _plans(db: Path, sql: str, params: tuple[object, ...]) -> list[str]:
    raw = sqlite3.connect(db)
    try:
        return [row[3] for row in raw.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
    finally:
        raw.close()


async def test_a_store_of_schema_6_is_brought_up_to_the_index_retention_reads(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    executor = _payer(db)
    await executor.session("ann").run("Pay ZzAlpha.")
    assert executor.store is not None
    executor.store.close()
    raw = sqlite3.connect(db)  # as schema 6 made it
    raw.executescript(
        "DROP TABLE session_taken_back; DROP INDEX IF EXISTS session_turns_by_time; "
        "ALTER TABLE runs DROP COLUMN held; DROP TABLE eval_runs; "
        "ALTER TABLE evals DROP COLUMN interrupted; PRAGMA user_version = 6;"
    )
    raw.close()
    assert [r.run_id for r in RunStore(db).runs()] != []  # read as it is
    executor = _payer(db)
    await executor.session("ann").clear()  # the first write brings it up to date
    assert executor.store is not None
    executor.store.close()
    raw = sqlite3.connect(db)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    raw.close()
    for sql, params in ((f"{LAST} HAVING max(started_at) < ?", (1.0,)), (LAST, ())):
        plans = _plans(db, sql, params)
        assert "SCAN session_turns USING COVERING INDEX session_turns_by_time" in plans, plans
    explained = _Explained(db)
    assert len(runs_of(explained, ("ann",))) == 1  # type: ignore[arg-type]  # taken back
    assert not [p for p in explained.plans if p.startswith("SCAN session")], explained.plans
    executor = _payer(db)
    await StoredSessions(executor.store).forget(["ann"])  # type: ignore[arg-type]
    assert executor.store is not None
    assert executor.store.runs() == []
    executor.store.close()


async def test_a_session_is_not_forgotten_while_a_run_it_took_back_is_carried_on(
    store: Where,
) -> None:
    # Deleted under the run resumed by its id, its rows were written again as it went on.
    started, hold = asyncio.Event(), asyncio.Event()

    async def stalls_once_told(request: ModelRequest) -> Answer:
        if any(isinstance(m, ToolMessage) for m in request.messages):
            started.set()
            await hold.wait()
            return "done"
        return call("pay", {"to": "ZzAlpha"})

    executor = _payer(store, FunctionModel(stalls_once_told))
    session = executor.session("ann")
    waiting = await session.run("Pay ZzAlpha.")
    await session.pop()  # its call denied; its run stays, and may be resumed by its id
    resumed = asyncio.create_task(executor.resume(waiting.run_id))
    await started.wait()
    with pytest.raises(SessionBusy, match=waiting.run_id):
        await session.forget()
    hold.set()
    assert (await resumed).status == "ok"
    await session.forget()  # once it has ended
    assert executor.store is not None
    assert executor.store.runs() == []
    executor.store.close()


async def test_retention_forgets_every_session_past_it_a_batch_at_a_time(
    store: Where, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(forgetting, "PRUNED_AT_ONCE", 2)
    executor = _payer(store)
    for name in ("a", "b", "c", "d", "e"):
        await executor.session(name).run(f"Pay Zz{name}.")
    assert executor.store is not None
    stored = StoredSessions(executor.store)
    assert await stored.prune(before=None, keep=1) == ["a", "b", "c", "d"]
    assert [row[0] for row in stored.sessions()] == ["e"]
    executor.store.close()


def _files_holding(folder: Path, text: bytes) -> list[str]:
    """The files in ``folder`` whose bytes hold ``text``."""
    return sorted(f.name for f in folder.iterdir() if text in f.read_bytes())


@pytest.fixture(params=["as built", "secure_delete off"])
def sqlite_build(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite as this machine built it (secure_delete on by default), or as a build
    whose connections start with it off: a deleted row's text stays in its freed page
    there, unless the store turns it on."""
    if request.param == "as built":
        return
    connect = sqlite3.connect

    def insecure(*args: object, **kwargs: object) -> sqlite3.Connection:
        db = connect(*args, **kwargs)  # type: ignore[arg-type]
        db.execute("PRAGMA secure_delete=OFF")
        return db

    monkeypatch.setattr(sqlite3, "connect", insecure)


@pytest.mark.usefixtures("sqlite_build")
async def test_a_forgotten_session_is_nowhere_in_the_files_of_a_store_still_open(
    tmp_path: Path,
) -> None:
    # Deleted from the tables, its text stayed in the file's write-ahead log (and the
    # pages not yet moved from it) for as long as the service kept the store open.
    db = tmp_path / "runs.db"
    executor = _payer(db)
    session = executor.session("ann")
    await session.run("Pay ZzAlpha.")
    await session.pop()
    await session.run("Pay ZzBravo.")
    await session.forget()
    assert _files_holding(tmp_path, b"Zz") == []
    await executor.session("bob").run("Pay ZzCharlie.")  # the store goes on
    await executor.session("carol").run("Pay ZzDelta.")
    assert executor.store is not None
    assert await StoredSessions(executor.store).prune(before=None, keep=1) == ["bob"]
    assert _files_holding(tmp_path, b"ZzCharlie") == []  # retention alike
    assert len(executor.store.runs()) == 1
    executor.store.close()
