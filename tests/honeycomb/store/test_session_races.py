"""Two processes on one PostgreSQL store, one editing a session as the other takes its
next turn: of the two, one goes first, and neither undoes what the other did (SQLite's
one writer at a time does so by itself)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import anyio
import pytest

from honeycomb import Executor, OfflineModel, Role
from honeycomb.store import RunStore, forgetting
from honeycomb.store.database import Connection
from honeycomb.store.forgetting import Expired
from honeycomb.store.lease import Lease
from honeycomb.store.sessions import StoredSessions
from tests.support.postgres import PostgresServer
from tests.support.stores import ON_POSTGRES, query

pytestmark = ON_POSTGRES

ROLES = [Role(name="planner"), Role(name="researcher", description="Finds facts.")]


@pytest.fixture
def url(postgres: PostgresServer) -> str:
    return postgres.url()


def _waiting(url: str) -> bool:
    """Whether a transaction waits for a lock another holds."""
    return bool(query(url, "SELECT 1 FROM pg_locks WHERE NOT granted"))


async def test_a_turn_taken_as_another_process_forgets_the_session_is_never_lost(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The turn was kept (its message answered) and deleted by the forget that had
    # read the session before it: the answer belonged to no conversation.
    executor = Executor(ROLES, OfflineModel(latency=0), store=url)
    (first,) = [(await executor.session("ann").run("Find the weather in Rome.")).run_id]
    inside, go = threading.Event(), threading.Event()
    real: Callable[[Connection, Sequence[str]], list[str]] = forgetting.runs_of

    def paused(db: Connection, session_ids: Sequence[str]) -> list[str]:
        found = real(db, session_ids)
        inside.set()
        go.wait(30)
        return found

    monkeypatch.setattr(forgetting, "runs_of", paused)
    forgets, takes = StoredSessions(RunStore(url)), StoredSessions(RunStore(url))
    taken: list[Lease | None] = []

    async def take() -> None:
        taken.append(await takes.begin(("ann", 2, "run-b", "And Oslo?", 2e9, "", 0), first))

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(forgets.forget, ["ann"])
            await anyio.to_thread.run_sync(inside.wait, 10)
            tg.start_soon(take)
            with anyio.fail_after(10):
                while not taken and not _waiting(url):  # noqa: ASYNC110 (taken, or waits)
                    await anyio.sleep(0.01)
            go.set()
    finally:
        go.set()
    (lease,) = taken
    turns = [row[2] for row in await takes.turns("ann")]
    assert turns == ([] if lease is None else ["run-b"])  # kept: it is there
    for stored in (forgets, takes):
        stored.store.close()
    assert executor.store is not None
    executor.store.close()


async def test_a_turn_taken_as_retention_forgets_the_session_is_never_lost(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Retention read the session as past its age, a turn was taken, and retention
    # deleted it with the session: the answer belonged to no conversation.
    executor = Executor(ROLES, OfflineModel(latency=0), store=url)
    first = (await executor.session("ann").run("Find the weather in Rome.")).run_id
    inside, go = threading.Event(), threading.Event()
    real = forgetting.expired

    def paused(db: Connection, before: float | None, keep: int | None) -> list[Expired]:
        found = real(db, before, keep)
        inside.set()
        go.wait(30)
        return found

    monkeypatch.setattr(forgetting, "expired", paused)
    prunes, takes = StoredSessions(RunStore(url)), StoredSessions(RunStore(url))
    pruned: list[list[str]] = []
    try:
        async with anyio.create_task_group() as tg:

            async def prune() -> None:
                pruned.append(await prunes.prune(before=time.time() + 3600, keep=None))

            tg.start_soon(prune)
            await anyio.to_thread.run_sync(inside.wait, 10)
            lease = await takes.begin(("ann", 2, "run-b", "And Oslo?", time.time(), "", 0), first)
            assert lease is not None
            takes.let_go(lease)  # answered meanwhile: the session is not answering now
            await takes.store.flush()
            go.set()
    finally:
        go.set()
    assert pruned == [[]]  # it changed since it was read: not forgotten
    assert [row[2] for row in await takes.turns("ann")] == [first, "run-b"]
    for stored in (prunes, takes):
        stored.store.close()
    assert executor.store is not None
    executor.store.close()
