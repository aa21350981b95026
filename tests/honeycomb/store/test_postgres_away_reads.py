"""A PostgreSQL store whose server goes away: what its reads wait for, and what a process
using it prints of its pool (nothing)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
import anyio.to_thread
import psycopg_pool
import pytest

from honeycomb.errors import StoreError
from honeycomb.store import Connection, RunStore, readers, silence, writer
from honeycomb.store import postgres as postgres_store
from tests.support import ROOT
from tests.support.postgres import PostgresServer, away, back, role_in, role_of
from tests.support.stores import ON_POSTGRES

pytestmark = ON_POSTGRES

_READS_AS_IT_GOES = """
import logging, sys, threading
import honeycomb.store.postgres, honeycomb.store.readers
from honeycomb.store import RunStore
from honeycomb.errors import StoreError

honeycomb.store.postgres._CONNECT_TIMEOUT_S = 0.5  # the pool's time
honeycomb.store.readers.BUSY_S = 0.05  # (a read waits for the pool this long first)
if sys.argv[2] == "configured":
    logging.basicConfig()
tried = threading.Event()


def seen(record):
    if record.getMessage().startswith("error connecting in"):
        tried.set()  # the pool tried to connect again, and logged that it failed
    return True


logging.getLogger("psycopg.pool").addFilter(seen)
store = RunStore(sys.argv[1])
store.runs()
print("read", flush=True)
sys.stdin.readline()  # the server lets the store's role in no more
try:
    store.runs()
except StoreError:
    pass
assert tried.wait(60), "the pool never tried again"
store.close()
"""


@pytest.mark.parametrize("logging", ["unconfigured", "configured"])
def test_what_psycopg_logs_of_a_server_gone_is_printed_only_where_logging_is_configured(
    postgres: PostgresServer, logging: str
) -> None:
    """The pool of readers tries again behind the reads once the server went away, and
    logs each failure as a warning: with no logging configured, Python printed it on
    standard error. It is dropped there, and goes where an application's logging says."""
    url = postgres.url()
    reading = role_of(url, f"pool_{logging}")
    with subprocess.Popen(
        [sys.executable, "-c", _READS_AS_IT_GOES, reading, logging],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdout is not None
        assert child.stdout.readline() == "read\n"
        away(url, role_in(reading))
        _, err = child.communicate("\n", timeout=120)
    assert child.returncode == 0, err
    if logging == "configured":
        assert f"error connecting in 'honeycomb-store-{url.rsplit('=', 1)[1]}'" in err
    else:
        assert err == ""


async def test_a_flush_once_the_server_went_away_waits_for_nothing(
    postgres: PostgresServer,
) -> None:
    """A flush (what a read does first, and a command that says where a stopped run is
    kept) asked the writer for an empty transaction, which waited out the half minute
    of tries of a server that went away: it has nothing to write, and returns at once.
    The read after it says the server cannot be reached."""
    url = postgres.url()
    mine = role_of(url, "flushed")
    store = RunStore(mine)
    await store.commit(("CREATE TABLE t (n BIGINT)", ()))
    away(url, role_in(mine))
    started = time.monotonic()
    await store.flush()
    with pytest.raises(StoreError, match="cannot connect to the run store"):
        await store.load("r1")
    assert time.monotonic() - started < writer.RECONNECT_S / 4
    store.close()


async def test_a_read_once_the_writer_gave_up_on_the_server_is_told_why_in_a_moment(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that had read its store (``honeycomb run``, which reads the run's id as
    it starts, then again to say where a run stopped by Ctrl-C is kept) waited the
    pool's ten seconds at its next read, though its writer had given up on the server.
    It waits a moment (BUSY_S), then a new connection tells why. Once the server lets
    it in again, the reads go on without asking: each read asked, with a connection of
    its own, until the writer committed (an idle service after an outage)."""
    monkeypatch.setattr(writer, "RECONNECT_S", 0.3)
    monkeypatch.setattr(readers, "BUSY_S", 0.05)
    url = postgres.url()
    mine = role_of(url, "reader")
    store = RunStore(mine)
    await store.commit(("CREATE TABLE t (n BIGINT)", ()))
    assert store.runs() == []  # the pool is open
    away(url, role_in(mine))
    with pytest.raises(StoreError, match="cannot connect to the run store"):
        await store.commit(("INSERT INTO t VALUES (1)", ()))  # the writer gives up
    started = time.monotonic()
    with pytest.raises(StoreError, match="is not permitted to log in"):
        store.runs()
    assert time.monotonic() - started < postgres_store._CONNECT_TIMEOUT_S / 2
    back(url, role_in(mine))
    knocks: list[silence.Knock] = []
    knock = silence.Knock.__init__

    def counted(self: silence.Knock, *args: Any) -> None:
        knocks.append(self)
        knock(self, *args)

    monkeypatch.setattr(silence.Knock, "__init__", counted)
    for _ in range(3):
        assert store.runs() == []
    assert len(knocks) == 1  # let in: the store is not away
    await store.commit(("INSERT INTO t VALUES (2)", ()))  # the writer connects again
    assert store.runs() == []
    store.close()


def test_a_read_waits_for_a_server_that_restarts(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read whose pool lost its connections, while the writer has not given up on the
    server (it restarts), waits for it as long as the pool's time, not a moment: a run
    reading its decisions goes on once the server is back."""
    waiting = _past_the_moment(monkeypatch, 0.05)
    url = postgres.url()
    mine = role_of(url, "restarted")
    store = RunStore(mine)
    anyio.run(store.open)  # the store made: a read reads it
    assert store.runs() == []  # the pool is open
    away(url, role_in(mine))
    with ThreadPoolExecutor(1) as threads:
        read = threads.submit(store.runs)
        read.add_done_callback(lambda _: waiting.set())  # (one that failed says why)
        waiting.wait()
        back(url, role_in(mine))  # the server is back
        assert read.result() == []
    store.close()


def test_a_read_waits_for_a_busy_pool_with_no_connection_more(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pool whose every connection is busy is not a server away: the read waits for
    one of the pool's past the moment, and makes no connection of its own to look."""
    looked: list[readers.Readers] = []

    def look(self: readers.Readers) -> None:  # a connection made to look at the server
        looked.append(self)

    monkeypatch.setattr(readers.Readers, "reachable", look)
    waiting = _past_the_moment(monkeypatch, 0.01)  # (the second read's)
    store = RunStore(postgres.url(), pool_size=1)
    anyio.run(store.open)  # the store made: a read reads it
    holding, release = threading.Event(), threading.Event()

    def hold(_: Connection) -> int:  # the pool's one connection, until released
        holding.set()
        release.wait()
        return 1

    with ThreadPoolExecutor(2) as threads:
        first = threads.submit(store.read_now, hold, 0)
        holding.wait()
        second = threads.submit(store.runs)
        waiting.wait()
        release.set()
        assert (first.result(), second.result()) == (1, [])
    assert looked == []
    store.close()


def _past_the_moment(monkeypatch: pytest.MonkeyPatch, busy_s: float) -> threading.Event:
    """Set once a read waits for the pool past the moment (``readers.BUSY_S``, made
    ``busy_s``)."""
    monkeypatch.setattr(readers, "BUSY_S", busy_s)
    waiting = threading.Event()
    getconn = psycopg_pool.ConnectionPool.getconn

    def get(self: psycopg_pool.ConnectionPool[Any], timeout: float | None = None) -> Any:
        if timeout is None:
            waiting.set()
        return getconn(self, timeout)

    monkeypatch.setattr(psycopg_pool.ConnectionPool, "getconn", get)
    return waiting
