"""A PostgreSQL store whose server goes silent (a network cut, a paused host: nothing
answers, nothing is reset): a run that stops meanwhile waits for it a moment only, and
the store's connections learn of a silent server (see test_postgres_away.py for a
server that refuses)."""

from __future__ import annotations

import asyncio
import time

import pytest

from honeycomb.errors import StoreError
from honeycomb.store import RunStore, writer
from honeycomb.store.postgres import PostgresDatabase
from tests.support.postgres import PostgresServer, SilentProxy
from tests.support.stores import ON_POSTGRES, query

pytestmark = ON_POSTGRES

_FAILED_S = 5.0
"""Far more than a stopping write's moment here, far less than what it waited: libpq's
10 s to connect to a server that never answers, or forever on a connection open to it."""


@pytest.mark.parametrize(
    ("reset", "told"),
    [
        (True, "cannot connect to the run store: the server did not answer in time"),
        (False, "did not answer in 0.6 s and nothing of what the run was writing as it "),
    ],
    ids=["new_connections_unanswered", "silent"],
)
async def test_a_stopping_write_waits_for_a_silent_server_only_its_moment(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch, reset: bool, told: str
) -> None:
    """A run stopped (Ctrl-C, cancelled) while its server was silent waited far past its
    moment to record its end: 10 s once its connection was lost (libpq's time to connect
    to a server that takes connections and answers none), and with its connection still
    open, until the kernel gave up, minutes later; Ctrl-C on ``honeycomb run`` took as
    long, and closing the store waited for the writer as long again. The write is given
    up on after its moment (the writer's tries of 0.1 s here, or the waiter's 0.5 s more
    for the answer of a connection open to the server), and said not written; the store
    closes at once after it."""
    monkeypatch.setattr(writer, "STOPPING_S", 0.1)  # (shorter here; 1 s in the library)
    url = postgres.url()
    proxy = SilentProxy(postgres.port)
    try:
        store = RunStore(proxy.url(url))
        await store.commit(("CREATE TABLE t (n BIGINT)", ()))
        proxy.silence(reset=reset)
        started = time.monotonic()
        insert = store.commit(("INSERT INTO t VALUES (1)", ()), stopping=True)
        with pytest.raises(StoreError) as caught:
            await asyncio.wait_for(insert, 4 * _FAILED_S)  # (without the fix: it hangs)
        took = time.monotonic() - started
        assert told in str(caught.value)
        assert took < _FAILED_S, took
        await asyncio.wait_for(store.aclose(), 4 * _FAILED_S)  # its writer is not stuck
        assert time.monotonic() - started < _FAILED_S
    finally:
        proxy.close()
    assert query(url, "SELECT n FROM t") == []


def test_the_stores_connections_learn_of_a_silent_server(postgres: PostgresServer) -> None:
    """A connection to a server gone silent waited for it as long as the kernel does
    (minutes, with no keepalives). The store's connections send TCP keepalives and give
    up on what the server leaves unacknowledged, unless the URL says otherwise."""
    url = postgres.url()
    for given, idle in ((url, "10"), (f"{url}&keepalives_idle=7", "7")):
        connection = PostgresDatabase(given).connect()
        try:
            parameters = connection.conn.info.get_parameters()
        finally:
            connection.close()
        assert parameters["keepalives"] == "1"
        assert parameters["keepalives_idle"] == idle
        assert int(parameters["tcp_user_timeout"]) > 0
