"""A PostgreSQL store whose server goes silent (a network cut, a paused host: it refuses
nothing and answers nothing): who waits for its writer waits only as long as the server
answers, and a slow server is waited for (test_postgres_away.py: a server that refuses).
The server is reached through a proxy in the test's process, which goes silent."""

from __future__ import annotations

import asyncio
import threading
import time

import anyio.to_thread
import psycopg
import pytest

from honeycomb.errors import StoreError
from honeycomb.store import RunStore, silence, writer
from honeycomb.store.postgres import PostgresConnection, PostgresDatabase, split_url
from tests.support.postgres import PostgresServer, SilentProxy, role_in, role_of
from tests.support.stores import ON_POSTGRES, query

pytestmark = ON_POSTGRES

_FAILED_S = 8.0
"""Far more than the waits here (a moment, 0.1 s, and a knock's second, or two on a busy
machine), less than what they were: libpq's 10 s to connect to a server that never
answers, for the stopping write alone, or for ever on a connection open to it."""


_SENT = "the commit of what it waited for was sent: it may be there or not"


@pytest.mark.parametrize(
    ("reset", "refuse", "known"),
    [
        (True, False, "nothing of what it waited for is written yet"),
        (False, False, _SENT),
        (False, True, _SENT),
    ],
    ids=["new_connections_unanswered", "silent_as_it_commits", "new_connections_refused"],
)
async def test_a_stopping_write_its_reads_and_closing_wait_for_a_silent_server_a_moment(
    postgres: PostgresServer,
    monkeypatch: pytest.MonkeyPatch,
    reset: bool,
    refuse: bool,
    known: str,
) -> None:
    """A run stopped (Ctrl-C, cancelled) while its server was silent waited far past its
    moment to record its end: 10 s once its connection was lost (libpq's time to connect
    to a server that takes connections and answers none: ``connection timeout
    expired``), and with its connection open, until the kernel gave up, minutes later;
    the read a command makes to say where the run is kept, and closing the store,
    waited as long again. Each now waits its moment, then as long as a new connection
    is not answered (a knock's second), and says what is known of the write: nothing of
    it written (the writer still holds it), or its commit sent. Nothing of it was
    written here. A new connection that fails at once with no word of the server
    (``refused``: a network unreachable, a name not resolved, nothing listening) is no
    answer either: it was taken for one, and the wait went on for as long as the
    writer's connection hung."""
    monkeypatch.setattr(writer, "STOPPING_S", 0.1)  # (shorter here; 1 s in the library)
    url = postgres.url()
    proxy = SilentProxy(postgres.port)
    try:
        store = RunStore(proxy.url(url))
        await store.commit(("CREATE TABLE t (n BIGINT)", ()))
        assert store.runs() == []  # the pool of readers is open
        if reset:
            proxy.silence(reset=True)
        else:
            commit = PostgresConnection.commit

            def silenced(self: PostgresConnection) -> None:
                proxy.silence(refuse=refuse)
                commit(self)

            monkeypatch.setattr(PostgresConnection, "commit", silenced)
        started = time.monotonic()
        insert = store.commit(("INSERT INTO t VALUES (1)", ()), stopping=True)
        with pytest.raises(StoreError, match="server answered nothing in 1 s") as caught:
            await asyncio.wait_for(insert, 4 * _FAILED_S)  # (without the fix: it hangs)
        assert known in str(caught.value)
        told = "server answered nothing|Connection refused"  # (libpq's reason, if it was)
        with pytest.raises(StoreError, match=told):
            await store.summary("r1")  # what was written before it first: told at once
        with pytest.raises(StoreError, match=told) as read:
            store.runs()
        with pytest.raises(StoreError, match=told) as again:  # told by the same knock
            store.runs()
        assert again.value is not read.value  # (each its own: tracebacks piled on one)
        await asyncio.wait_for(store.aclose(), 4 * _FAILED_S)
        assert time.monotonic() - started < _FAILED_S
    finally:
        proxy.close()
    assert query(url, "SELECT n FROM t") == []


async def test_reads_of_a_paused_server_end_before_the_store_knows_it_away(
    postgres: PostgresServer,
) -> None:
    """A server whose host paused (its kernel still acknowledges what is sent: no
    keepalive fails) held a read for ever, until the store was away: the pool's check
    of its idle connection, and a read's wait for what was written before it (a write
    the writer holds, waiting for the server), never ended. Each now goes on for as long
    as the server answers, as a stopping write's wait does; the writer's own write
    waits for the server as its connection does."""
    proxy = SilentProxy(postgres.port)
    stores = [RunStore(proxy.url(postgres.url())) for _ in range(2)]
    try:
        for store in stores:
            await store.commit(("CREATE TABLE t (n BIGINT)", ()))
            assert store.runs() == []  # the pool of readers holds an idle connection
        reading, writing = stores
        proxy.silence()
        started = time.monotonic()
        read = anyio.to_thread.run_sync(reading.runs, abandon_on_cancel=True)
        with pytest.raises(StoreError, match="server answered nothing in 1 s"):
            await asyncio.wait_for(read, 4 * _FAILED_S)  # (without the fix: it hangs)
        write = asyncio.ensure_future(writing.commit(("INSERT INTO t VALUES (1)", ())))
        with pytest.raises(StoreError, match="server answered nothing in 1 s"):
            await asyncio.wait_for(writing.summary("r1"), 4 * _FAILED_S)
        assert time.monotonic() - started < 2 * _FAILED_S
        assert not write.done()  # the writer's wait is its connection's
        write.cancel()
    finally:
        proxy.close()
    for store in stores:
        await asyncio.wait_for(store.aclose(), 4 * _FAILED_S)


async def test_what_a_store_closed_on_a_paused_server_held_is_not_written_when_it_resumes(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command stopped while its server's host was paused said its run's end was not
    recorded (nothing of it written yet), and closed its store; the writer, left to the
    paused server, wrote it all the same once the host resumed before the process ended
    (its statement waited in the kernel): recorded after the command said it was not.
    Once the store is closed on a silent server, the writer commits nothing more."""
    monkeypatch.setattr(writer, "STOPPING_S", 0.1)
    url = postgres.url()
    mine = role_of(url, "paused")
    proxy = SilentProxy(postgres.port)
    try:
        store = RunStore(proxy.url(mine))
        await store.commit(("CREATE TABLE t (n BIGINT)", ()))
        proxy.pause()
        ending = store.commit(("INSERT INTO t VALUES (1)", ()), stopping=True)
        with pytest.raises(StoreError, match="nothing of what it waited for is written yet"):
            await asyncio.wait_for(ending, 4 * _FAILED_S)
        await asyncio.wait_for(store.aclose(), 4 * _FAILED_S)
        proxy.resume()  # the writer's statement reaches the server, and is answered
        deadline = time.monotonic() + 4 * _FAILED_S
        while query(url, _SESSIONS.format(role_in(mine))):  # until the writer ended
            assert time.monotonic() < deadline, "the store's sessions did not end"
            await asyncio.sleep(0.01)  # (a look every 10 ms)
    finally:
        proxy.close()
    assert query(url, "SELECT n FROM t") == []


_SESSIONS = "SELECT 1 FROM pg_stat_activity WHERE usename = '{}'"


async def test_a_stopping_write_waits_for_a_slow_server_and_another_runs_batch_goes_on(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that answers is waited for however slow the write (here another run's
    batch holds the writer, waiting for a lock): the stopping write is not given up on
    once its moment is over, and the batch before it is not cut short. An earlier fix
    gave up on both after 1.5 s on a busy machine. The server is slow to let a
    connection in too (1.5 s, through a proxy: far away, TLS): the store's question of
    whether it answers gives it five times as long as the writer's connection took, and
    gave it 1 s, taking it for silent (the stopping write failed, the reads after it)."""
    monkeypatch.setattr(writer, "STOPPING_S", 0.1)
    knocked = threading.Event()  # the stopping write's moment is over: it asked the server
    heard = silence.Knock.heard

    def told(self: silence.Knock) -> silence.Heard:
        found = heard(self)
        knocked.set()
        return found

    monkeypatch.setattr(silence.Knock, "heard", told)
    url = postgres.url()
    proxy = SilentProxy(postgres.port, answer_after_s=1.5)
    store = RunStore(proxy.url(url))
    await store.commit(("CREATE TABLE t (n BIGINT)", ()))
    with psycopg.connect(split_url(url)[0], autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(4242)")
        held = ("SELECT pg_advisory_xact_lock(4242)", ())
        other = asyncio.ensure_future(store.commit(held, ("INSERT INTO t VALUES (1)", ())))
        stopping = store.commit(("INSERT INTO t VALUES (2)", ()), stopping=True)
        ending = asyncio.ensure_future(stopping)
        assert await anyio.to_thread.run_sync(knocked.wait, 60)
        assert not ending.done()  # past its moment, the server answering: still waiting
        holder.execute("SELECT pg_advisory_unlock(4242)")
        await other
        await ending
    assert query(url, "SELECT n FROM t ORDER BY n") == [(1,), (2,)]
    store.close()
    proxy.close()


def test_a_store_of_several_hosts_is_answered_by_the_next_when_one_is_silent(
    postgres: PostgresServer,
) -> None:
    """A URL of two hosts, the first silent: libpq gives it its connect timeout (2 s at
    least) before it tries the next, which lets the store's question in; the question
    was given 1 s in all, and took the store for silent."""
    proxy = SilentProxy(postgres.port)
    proxy.silence()
    both = f"127.0.0.1:{proxy.port},127.0.0.1:{postgres.port}"
    url = postgres.url().replace(f"127.0.0.1:{postgres.port}", both)
    try:
        heard = PostgresDatabase(url).knock().heard()
    finally:
        proxy.close()
    assert heard == silence.Heard()  # let in


def test_the_stores_connections_learn_of_a_silent_server_unless_the_url_says(
    postgres: PostgresServer,
) -> None:
    """A connection to a server gone silent waited for it as long as the kernel does
    (minutes: no keepalives), and a URL's ``connect_timeout`` was overridden by the
    store's 10 s. The store's connections send TCP keepalives and give up on what the
    server leaves unacknowledged; what the URL sets is kept."""
    url = postgres.url()
    given = f"{url}&keepalives_idle=7&connect_timeout=3"
    for store, idle, timeout in ((url, "10", "10"), (given, "7", "3")):
        connection = PostgresDatabase(store).connect()
        try:
            parameters = connection.conn.info.get_parameters()
        finally:
            connection.close()
        assert parameters["keepalives"] == "1"
        assert parameters["keepalives_idle"] == idle
        assert parameters["connect_timeout"] == timeout
        assert int(parameters["tcp_user_timeout"]) > 0
