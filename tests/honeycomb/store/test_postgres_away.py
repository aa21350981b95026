"""A PostgreSQL store whose server goes away: how a run that stops meanwhile ends, and
what writes wait for (its reads: test_postgres_away_reads.py)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import psycopg
import pytest

from honeycomb import Executor, Role, Subtask
from honeycomb.cli.main import main
from honeycomb.errors import StoreError
from honeycomb.store import RunStore, writer
from honeycomb.store.postgres import PostgresConnection, PostgresDatabase, split_url
from honeycomb.testing import FunctionModel
from runtime import ModelRequest
from tests.support.postgres import AWAY_S, PostgresServer, away, back, role_in, role_of
from tests.support.stores import ON_POSTGRES, query

pytestmark = ON_POSTGRES


async def test_a_stopping_runs_write_waits_for_a_server_away_only_a_moment(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run stopped (Ctrl-C, cancelled) while its server is away waited the writer's
    half minute of tries to record its end. Its write (``stopping``) is tried for a
    moment (STOPPING_S), and cuts short the wait of the write queued before it; the
    other writes after it wait as long as ever; once the server is back, writes go on.

    The write before it is told as the stopping write is queued, not once its wait
    between two tries is over (up to a second, made the writer's whole time here)."""
    monkeypatch.setattr(writer, "STOPPING_S", 0.1)  # (shorter here; the writer's 30 s is not)
    monkeypatch.setattr(writer, "_RECONNECT_EVERY_S", (writer.RECONNECT_S,))
    url = postgres.url()
    mine = role_of(url, "stops")
    role = role_in(mine)
    failed, tried = _failing_connects(monkeypatch)
    store = RunStore(mine)
    await store.commit(("CREATE TABLE t (n BIGINT)", ()))
    away(url, role)
    told: list[StoreError] = []

    async def first() -> None:
        with pytest.raises(StoreError, match="cannot connect to the run store") as caught:
            await store.commit(("INSERT INTO t VALUES (1)", ()))
        told.append(caught.value)

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        await anyio.to_thread.run_sync(failed.wait)  # it waits for the server now
        started = time.monotonic()
        with pytest.raises(StoreError, match="cannot connect to the run store"):
            await store.commit(("INSERT INTO t VALUES (2)", ()), stopping=True)
        took = time.monotonic() - started
    assert took < writer.RECONNECT_S / 4, took  # a moment, not the writer's half minute
    assert told  # the write before it was told at once too
    monkeypatch.setattr(writer, "RECONNECT_S", 0.3)
    failed.clear()
    attempts = 0

    def counted(self: PostgresDatabase) -> PostgresConnection:
        nonlocal attempts
        attempts += 1
        return tried(self)

    monkeypatch.setattr(PostgresDatabase, "connect", counted)
    with pytest.raises(StoreError, match="cannot connect to the run store"):
        await store.commit(("INSERT INTO t VALUES (3)", ()))
    assert attempts > 1  # waited for the server again, as before the run stopped
    back(url, role)
    await store.commit(("INSERT INTO t VALUES (4)", ()))
    store.close()
    assert query(url, "SELECT n FROM t") == [(4,)]


async def test_closing_the_store_waits_for_a_server_away_only_a_moment(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing the store while a write waited for its lost server to come back (a run's,
    or the renewal of the leases held) waited out the writer's half minute of tries: a
    command ending, or a service stopping, took as long. Closing cuts that wait short,
    as a stopping run's write does: the write is told the store cannot be written."""
    monkeypatch.setattr(writer, "_RECONNECT_EVERY_S", (writer.RECONNECT_S,))
    url = postgres.url()
    mine = role_of(url, "closing")
    failed, _ = _failing_connects(monkeypatch)
    store = RunStore(mine)
    await store.commit(("CREATE TABLE t (n BIGINT)", ()))
    away(url, role_in(mine))

    async def waiting() -> None:
        with pytest.raises(StoreError, match="cannot connect to the run store"):
            await store.commit(("INSERT INTO t VALUES (1)", ()))

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiting)
        await anyio.to_thread.run_sync(failed.wait)  # it waits for the server now
        started = time.monotonic()
        await store.aclose()
        took = time.monotonic() - started
    assert took < writer.RECONNECT_S / 4, took
    back(url, role_in(mine))


class _Clock:
    """The writer's clock, its waits between tries passing at once."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


async def test_a_stopping_write_tries_for_no_longer_than_its_moment(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer slept its whole wait between two tries (up to a second) past the end
    of its time of tries: a run stopping while its server was away tried for 1.85 s of
    its STOPPING_S (1 s), and Ctrl-C on it took as much longer. Its last try is at the
    end of its time, not after it."""
    clock = _Clock()
    monkeypatch.setattr(writer, "time", clock)
    tried: list[float] = []  # when the writer tried to connect again
    connect = PostgresDatabase.connect

    def timed(self: PostgresDatabase) -> PostgresConnection:
        tried.append(clock.now)
        return connect(self)

    url = postgres.url()
    mine = role_of(url, "moment")
    store = RunStore(mine)
    await store.commit(("CREATE TABLE t (n BIGINT)", ()))
    monkeypatch.setattr(PostgresDatabase, "connect", timed)
    away(url, role_in(mine))
    with pytest.raises(StoreError, match="cannot connect to the run store"):
        await store.commit(("INSERT INTO t VALUES (1)", ()), stopping=True)
    assert len(tried) > 1
    assert tried[-1] - tried[0] == pytest.approx(writer.STOPPING_S)
    store.close()


async def test_writes_handed_on_to_a_writer_that_cannot_start_are_told_why(
    postgres: PostgresServer,
) -> None:
    """The writes queued as the writer's thread ended are handed on to the next thread:
    when that one could not start (its server away), they were dropped, and a run
    waiting for one of them (a worker's result, its end) waited for ever; only the one
    whose queueing found the thread ended was told. Each is told why."""
    url = postgres.url()
    mine = role_of(url, "handed")
    store = RunStore(mine)
    await store.open()
    ended = store._writer._life
    assert ended is not None
    store.close()  # the thread ends: here, as the second write is queued

    class Ending(queue.SimpleQueue[Any]):
        def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
            super().put(item, block, timeout)
            ended.ended = self.qsize() > 1

    ended.ended, ended.queue = False, Ending()
    away(url, role_in(mine))
    loop = asyncio.get_running_loop()
    first, second = loop.create_future(), loop.create_future()
    with anyio.fail_after(10):
        store._writer.put((("SELECT 1", ()),), done=first)
        store._writer.put((("SELECT 2", ()),), done=second)
        for waiter in (first, second):
            with pytest.raises(StoreError, match="is not permitted to log in"):
                await waiter
    back(url, role_in(mine))


def test_a_role_sent_away_keeps_no_session_though_each_comes_back_at_once(
    postgres: PostgresServer,
) -> None:
    """What the tests here rely on (``away``): once it returns, the role is refused and
    the server lists none of its sessions, though each one connects again the moment it
    is ended, as a store's writer does. Its sessions were ended in the transaction that
    refused the role, and one could get back in before the refusal was committed (a
    race: many sessions make it likely): a run stopped then recorded its interruption."""
    url = postgres.url()
    mine = role_of(url, "back")
    conninfo = split_url(mine)[0]
    sessions = [psycopg.connect(conninfo, autocommit=True) for _ in range(16)]
    refused: list[str] = []  # why each session that came back was turned away

    def come_back(conn: psycopg.Connection[Any]) -> None:
        with conn, contextlib.suppress(psycopg.OperationalError):
            conn.execute("SELECT pg_sleep(%s)", (AWAY_S,))  # until it is ended
        try:
            psycopg.connect(conninfo, autocommit=True).close()
        except psycopg.OperationalError as exc:
            refused.append(str(exc))

    with ThreadPoolExecutor(len(sessions)) as threads:
        ended = [threads.submit(come_back, conn) for conn in sessions]
        away(url, role_in(mine))
        listed = "SELECT count(*) FROM pg_stat_activity WHERE usename = ?"
        assert query(url, listed, (role_in(mine),)) == [(0,)]
        for session in ended:
            session.result()
    assert len(refused) == len(sessions), refused
    assert all("is not permitted to log in" in why for why in refused), refused


async def test_a_run_stopped_while_its_server_is_away_is_resumed_once_it_is_back(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run cancelled while its server is away cannot record that it was interrupted:
    it ends saying so, in a moment (it waited the writer's whole time of tries, 30 s:
    its record is a stopping write, which waits writer.STOPPING_S), its row says it is
    running, and no process carries it on. Once the server is back, the store lists it
    as interrupted and a resume finishes it."""
    monkeypatch.setattr(writer, "STOPPING_S", 0.1)  # (shorter here; the writer's 30 s is not)
    url = postgres.url()
    mine = role_of(url, "resumed")
    role = role_in(mine)
    thinking = anyio.Event()
    calls: list[ModelRequest] = []

    async def answer(request: ModelRequest) -> str:
        calls.append(request)
        if len(calls) == 1:
            thinking.set()
            await anyio.sleep_forever()  # until the run is cancelled
        return "done"

    store = RunStore(mine)
    executor = Executor(
        [Role(name="worker", description="Answers.")], FunctionModel(answer), store=store
    )
    subtasks = [Subtask(id="w0", role="worker", instruction="answer")]
    running = asyncio.ensure_future(executor.run("answer", subtasks=subtasks, run_id="r1"))
    await thinking.wait()
    away(url, role)
    began = time.monotonic()
    running.cancel()  # as Ctrl-C cancels the command's run
    with pytest.raises(asyncio.CancelledError) as stopped:
        await running
    took = time.monotonic() - began
    notes = getattr(stopped.value, "__notes__", [])
    assert any("could not record the run as interrupted" in note for note in notes), notes
    assert took < writer.RECONNECT_S / 4, took  # a moment's tries, not the writer's
    assert query(url, "SELECT status FROM runs WHERE run_id = ?", ("r1",)) == [("running",)]
    back(url, role)
    found = store.find("r1")
    assert found is not None
    assert found.status == "interrupted"
    result = await executor.resume("r1")
    assert result.status == "ok"
    assert result.answer_text.endswith("done")
    assert len(calls) == 2  # the one cut off, asked again
    store.close()


def test_ctrl_c_on_a_run_whose_server_went_away_ends_the_command_in_a_moment(
    postgres: PostgresServer, fast_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``honeycomb run`` stopped by Ctrl-C once its PostgreSQL server went away waited
    the writer's half minute of tries to record the interruption, another to flush
    before it said where the run was kept, and the pool's ten seconds to read it. It
    ends in a moment, says that the run could not be recorded as interrupted and how to
    continue it, and prints nothing of psycopg's; once the server is back, ``honeycomb
    resume`` finishes the run (here, in this process)."""
    url = postgres.url()
    mine = role_of(url, "ctrl_c")
    env = {**os.environ, "HONEYCOMB_DEMO_TOOL_LATENCY": "0.3", "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "honeycomb", "demo", "--plain", "--store", mine]
    with subprocess.Popen(
        [*command, "--run-id", "stopped"], env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    ) as child:  # fmt: skip
        assert child.stdout is not None
        for line in child.stdout:  # stop it once workers are running (its plan is kept)
            if line.rstrip().endswith(") started"):
                break
        away(url, role_in(mine))
        started = time.monotonic()
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=120)
    took = time.monotonic() - started
    assert child.returncode == 130, err
    assert took < writer.RECONNECT_S / 3, took
    assert "Traceback" not in err
    # Told that the run was not recorded as interrupted (it said it stopped, as if it had).
    stopped = "SIGINT: run stopped stopped.\nHoneycomb could not record the run as interrupted: "
    assert stopped in err
    assert "The store keeps the run as it was before the signal: running" in err
    assert "honeycomb resume stopped --store" in err
    assert "psycopg" not in err
    assert "error connecting" not in err
    back(url, role_in(mine))
    assert main(["resume", "stopped", "--store", mine, "--plain"]) == 0
    assert "Answer:" in capsys.readouterr().out


async def test_a_batch_the_server_rolled_back_is_made_again_though_a_run_stops_behind_it(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch the server rolled back to break a deadlock (another run's writes) failed
    instead of being made again when a stopping write, or the store's close, was queued
    behind it: what cuts short the wait for a lost server cut short its retry too, on a
    server that answers. It is made again, and the stopping write after it."""
    url = postgres.url()
    store = RunStore(url)
    await store.commit(("CREATE TABLE t (n BIGINT)", ()))
    committing, stopped = threading.Event(), threading.Event()
    commit = PostgresConnection.commit
    commits: list[PostgresConnection] = []

    def deadlocked(self: PostgresConnection) -> None:
        commits.append(self)
        if len(commits) == 1:  # rolled back, once a stopping write is queued behind it
            committing.set()
            stopped.wait(60)
            raise psycopg.errors.DeadlockDetected("deadlock detected")
        commit(self)

    monkeypatch.setattr(PostgresConnection, "commit", deadlocked)
    other = asyncio.ensure_future(store.commit(("INSERT INTO t VALUES (1)", ())))
    assert await anyio.to_thread.run_sync(committing.wait, 60)
    stopping = asyncio.ensure_future(store.commit(("INSERT INTO t VALUES (2)", ()), stopping=True))
    await asyncio.sleep(0)  # (it is queued as it starts)
    stopped.set()
    await other  # (without the fix: StoreError, deadlock detected)
    await stopping
    assert query(url, "SELECT n FROM t ORDER BY n") == [(1,), (2,)]
    store.close()


def _failing_connects(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[threading.Event, Callable[[PostgresDatabase], PostgresConnection]]:
    """Watch the writer's tries to connect: the event is set once one could not (the
    server away), and the connect that sets it is returned, to wrap again."""
    failed = threading.Event()
    connect = PostgresDatabase.connect

    def tried(self: PostgresDatabase) -> PostgresConnection:
        try:
            return connect(self)
        except StoreError:
            failed.set()
            raise

    monkeypatch.setattr(PostgresDatabase, "connect", tried)
    return failed, tried
