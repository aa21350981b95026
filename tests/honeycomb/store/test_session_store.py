"""Sessions in the run store (either store: the tests that take ``store`` run on both):
a turn a row linking its run, forgetting a session with its runs, retention by age and
count, and a turn two processes both want."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from honeycomb import Executor, OfflineModel, Policy, Role, SessionPolicy
from honeycomb.run.session import StoreRows
from honeycomb.store import RunStore
from honeycomb.store.schema import SCHEMA_VERSION
from honeycomb.store.sessions import StoredSessions
from honeycomb.testing import FunctionModel
from runtime import ModelRequest, ModelResponse, SessionBusy
from tests.support.model_requests import role_of
from tests.support.stores import Where, query

ROLES = [Role(name="planner"), Role(name="researcher", description="Finds facts.")]


def executor(db: Where, **options: object) -> Executor:
    return Executor(ROLES, OfflineModel(latency=0), store=db, **options)  # type: ignore[arg-type]


def count(db: Where, table: str) -> int:
    found: int = query(db, f"SELECT count(*) FROM {table}")[0][0]
    return found


async def test_forgetting_a_session_deletes_its_runs_but_those_a_fork_shares(
    store: Where,
) -> None:
    db = store
    ex = executor(db)
    session = ex.session("first")
    await session.run("Find the weather in Rome.")
    await session.run("And in Oslo?")
    fork = await session.fork(1, "second")
    assert [t.turn for t in await fork.turns()] == [1]
    runs = {t.run_id for t in await session.turns()}
    await session.forget()
    assert await session.turns() == []
    shared = (await fork.turns())[0]
    assert shared.status == "ok"  # its run is still there
    assert ex.store is not None
    kept = {r.run_id for r in ex.store.runs()}
    assert kept & runs == {shared.run_id}
    assert count(db, "workers") > 0


async def test_retention_forgets_the_oldest_sessions_past_the_count(store: Where) -> None:
    db = store
    policy = Policy(sessions=SessionPolicy(max_sessions=2))
    ex = executor(db, policy=policy)
    for name in ("a", "b", "c"):
        await ex.session(name).run("Find the weather in Rome.")
    assert ex.store is not None
    listed = StoredSessions(ex.store).sessions()
    assert [row[0] for row in listed] == ["c", "b"]  # newest first; "a" was forgotten
    assert len(ex.store.runs()) == 2


async def test_retention_never_forgets_a_session_that_is_answering(store: Where) -> None:
    # Another session's retention deleted the run of a turn under way: its end failed
    # with RunBusy ("taken over by another process") and its answer was lost.
    started, hold = asyncio.Event(), asyncio.Event()
    offline = OfflineModel(latency=0)

    async def stalls_on_rome(request: ModelRequest) -> ModelResponse:
        if role_of(request) == "researcher" and "Rome" in str(request.messages[-1].content):
            started.set()
            await hold.wait()
        return await offline.complete(request)

    policy = Policy(sessions=SessionPolicy(max_sessions=1))
    ex = Executor(ROLES, FunctionModel(stalls_on_rome), store=store, policy=policy)
    answering = asyncio.create_task(ex.session("a").run("Find the weather in Rome."))
    await started.wait()
    await ex.session("b").run("Find the weather in Oslo.")  # "a" is older, but answers
    assert ex.store is not None
    assert {row[0] for row in StoredSessions(ex.store).sessions()} == {"a", "b"}
    hold.set()
    answered = await answering
    assert answered.status == "ok"
    assert [t.status for t in await ex.session("a").turns()] == ["ok"]
    await ex.session("c").run("Find the weather in Oslo.")  # neither answers now
    assert [row[0] for row in StoredSessions(ex.store).sessions()] == ["c"]


BEGIN_A_TURN = """
import asyncio, sys, time
from honeycomb.store import RunStore
from honeycomb.store.sessions import StoredSessions

async def main():
    await StoredSessions(RunStore(sys.argv[1])).begin(("s", 1, "run-a", "hi", time.time(), "", 0))
    print("begun", flush=True)
    sys.stdin.readline()  # its run would start now

asyncio.run(main())
"""


async def test_a_turn_another_process_began_is_answered_before_its_run_starts(
    store: Where,
) -> None:
    # Kept before its run took a lease, the turn read "interrupted" to the others, who
    # could clear the session or answer the turn again under the process answering it.
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", BEGIN_A_TURN, str(store),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert child.stdin is not None
    assert child.stdout is not None
    session = executor(store).session("s")
    try:
        assert await child.stdout.readline() == b"begun\n"
        [turn] = await session.turns()
        assert turn.status == "running"
        with pytest.raises(SessionBusy):
            await session.clear()
    finally:
        child.stdin.close()
        await child.wait()
    [turn] = await session.turns()
    assert turn.status == "interrupted"  # its process ended before its run started


async def test_retention_by_age(store: Where) -> None:
    ex = executor(store)
    await ex.session("old").run("Find the weather in Rome.")
    assert ex.store is not None
    stored = StoredSessions(ex.store)
    forgotten = await stored.prune(before=time.time() + 1, keep=None)
    assert forgotten == ["old"]
    assert stored.sessions() == []


async def test_a_turn_another_process_took_is_refused(store: Where) -> None:
    one, other = RunStore(store), RunStore(store)  # two processes' stores of one store
    try:
        row = ("s", 1, "run-a", "hello", time.time(), "", 0)
        lease = await StoredSessions(one).begin(row)
        with pytest.raises(SessionBusy) as refused:
            await StoredSessions(other).begin(("s", 1, "run-b", "hi", time.time(), "", 0))
        assert refused.value.turn == 1
        turns = await StoreRows(StoredSessions(other)).turns("s")
        assert [(t.run_id, t.status) for t in turns] == [("run-a", "running")]
        StoredSessions(one).let_go(lease)  # its run will not start
        await one.flush()
        turns = await StoreRows(StoredSessions(other)).turns("s")
        # No run of it, and no answer: as a turn cut off before its run was kept.
        assert [(t.run_id, t.status) for t in turns] == [("run-a", "interrupted")]
    finally:
        one.close()
        other.close()


async def test_a_store_of_schema_5_reads_as_holding_no_session_and_takes_one(db: Path) -> None:
    ex = executor(db)
    await ex.run("Find the weather in Rome.")
    assert ex.store is not None
    ex.store.close()
    with sqlite3.connect(db) as conn:  # as Honeycomb of schema 5 left it
        for table in ("session_turns", "session_taken_back", "evals", "eval_runs"):
            conn.execute(f"DROP TABLE {table}")  # (schemas 6, 7 and 9's)
        conn.execute("ALTER TABLE runs DROP COLUMN held")  # (schema 8's)
        conn.execute("PRAGMA user_version = 5")
    old = RunStore(db)
    assert StoredSessions(old).sessions() == []  # read as it is: no table, no session
    assert await StoreRows(StoredSessions(old)).turns("any") == []
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (5,)  # reading changed nothing

    later = executor(db)
    await later.session("new").run("Find the weather in Oslo.")
    assert [t.status for t in await later.session("new").turns()] == ["ok"]
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)


async def test_a_turn_cut_off_before_its_run_was_kept_is_run_when_resumed(db: Path) -> None:
    ex = executor(db)
    assert ex.store is not None
    stored = StoredSessions(ex.store)
    stored.let_go(await stored.begin(("cut", 1, "r1", "Find the weather in Rome.", 1.0, "", 0)))
    session = ex.session("cut", unfinished="resume")
    await session.run("And in Oslo?")
    turns = await session.turns()
    assert [(t.run_id, t.status) for t in turns[:1]] == [("r1", "ok")]
    assert [t.status for t in turns] == ["ok", "ok"]


async def test_a_turn_begun_here_is_answered_until_its_run_takes_it_over(store: Where) -> None:
    """A turn is kept, then its run starts: in between, the lease the turn was kept
    with stays held, so nothing reads it as cut off. It was let go of as the row was
    written: the session's retention forgot it, or another Executor on the store
    called the turn interrupted, and dropped it or refused the message as if it were."""
    policy = Policy(sessions=SessionPolicy(max_sessions=1))
    ex = executor(store, policy=policy)
    assert ex.store is not None
    stored = StoredSessions(ex.store)
    lease = await stored.begin(("a", 1, "run-a", "Find the weather in Rome.", 1.0, "", 0))
    await ex.session("b").run("Find the weather in Oslo.")  # "a" is older, but answers
    assert {row[0] for row in stored.sessions()} == {"a", "b"}
    other = executor(store)
    for unfinished in ("raise", "drop"):
        with pytest.raises(SessionBusy, match="is answering message 1"):
            await other.session("a", unfinished=unfinished).run("And in Oslo?")  # type: ignore[arg-type]
    with pytest.raises(SessionBusy, match="is answering message 1"):
        await stored.forget(["a"])  # checked as it deletes
    assert [(t.run_id, t.status) for t in await other.session("a").turns()] == [
        ("run-a", "running")
    ]
    stored.let_go(lease)  # its run will not start
    await ex.store.flush()
    assert [t.status for t in await other.session("a").turns()] == ["interrupted"]
    await ex.session("c").run("Find the weather in Oslo.")  # neither answers now
    assert [row[0] for row in stored.sessions()] == ["c"]


async def test_the_run_of_a_turn_takes_over_the_lease_it_was_kept_with(store: Where) -> None:
    ex = executor(store)
    assert ex.store is not None
    stored = StoredSessions(ex.store)
    lease = await stored.begin(("a", 1, "run-a", "Find the weather in Rome.", 1.0, "", 0))
    result = await ex.run("Find the weather in Rome.", run_id="run-a")  # no RunBusy
    assert result.status == "ok"
    stored.let_go(lease)
    await ex.store.flush()
    assert count(store, "leases") == 0  # the run let go of it as it ended


async def test_an_answer_read_for_a_turn_taken_back_meanwhile_is_not_given_to_the_next(
    store: Where, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A reader gave a turn the answer its run ended with (resumed as any run) as another
    # process took that turn back and took the next: that turn read as answered, with
    # the answer of the message taken back, its own run still to start.
    ex = executor(store)
    assert ex.store is not None
    stored = StoredSessions(ex.store)
    await ex.run("Find the weather in Rome.", run_id="r1")  # ended, its turn not told
    stored.let_go(await stored.begin(("a", 1, "r1", "Find the weather in Rome.", 1.0, "", 0)))
    load = ex.store.load

    async def meanwhile(run_id: str) -> object:
        if run_id == "r1":  # another process takes the turn back, and takes the next
            await stored.drop("a", 0)
            await stored.begin(("a", 1, "r2", "Find the weather in Oslo.", 2.0, "", 0))
        return await load(run_id)

    monkeypatch.setattr(ex.store, "load", meanwhile)
    rows = StoreRows(stored)
    await rows.turns("a")
    monkeypatch.undo()
    (turn,) = await rows.turns("a")
    assert (turn.run_id, turn.answer) == ("r2", None)
