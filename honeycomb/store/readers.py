"""The pool of connections a PostgreSQL store reads through (psycopg_pool), and what
psycopg logs of Honeycomb's connections.

A read waits for a connection of the pool for its time (a server that restarts is
waited for). Once the store's writer gave up on the server (it stays away, a run that
stops could not wait for it, or found it silent: ``away``), a read first asks whether
the server answers (a knock, :mod:`honeycomb.store.silence`): one that refuses is told
at once with libpq's reason, one that answers nothing within a moment is told so, and
a read of a server that answers goes on. A pool whose every connection is busy is
waited for, with no connection more. A read that goes on past a moment (the pool's
check of an idle connection, its query) goes on for as long as the server answers
(:mod:`honeycomb.store.watch`): a host paused would hold it for ever.

The pool tries again behind the reads once its server went away, and logs each failure
as a warning (logger ``psycopg.pool``), as psycopg logs an error it ignores (logger
``psycopg``). Where the application configured logging, those records go where it says.
Where nothing takes them, Python would print them on standard error (its last resort),
and a library never prints: those made in the store's threads (``honeycomb-store``...)
or while it reads or closes its pool (:func:`ours`) are then dropped. Nothing else
changes: the application's own use of psycopg logs as it did, and no level or handler
of any logger is set.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from honeycomb.store import forked
from honeycomb.store.watch import Watch
from runtime import StoreError
from runtime.logs import Unheard

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

    from honeycomb.store.silence import Server

__all__ = ["BUSY_S", "THREADS", "Readers", "open_pool", "ours", "unprinted"]

BUSY_S = 1.0
"""How long a read waits for a connection of the pool before it looks whether the
server went away since it asked (its writer gave up on it meanwhile)."""

THREADS = "honeycomb-store"
"""How the names of the store's threads begin: the writer's, and the pool's (the
pool's name, ``honeycomb-store-<schema>``, begins its threads' names)."""

_LOGGERS = ("psycopg", "psycopg.pool")
_UNHEARD = Unheard("store", threads=THREADS)

ours = _UNHEARD.ours
"""What psycopg logs meanwhile in this thread is of the store's connections."""


def unprinted() -> None:
    """Have psycopg's loggers drop the store's records that nothing takes (see the
    module's docstring); once is enough, and more changes nothing."""
    for name in _LOGGERS:
        logging.getLogger(name).addFilter(_UNHEARD)  # (a filter it has is not added again)


class Readers:
    """The pool of connections a store's reads take, opened by the first read.

    Args:
        pool: Opens the pool (:func:`open_pool`, given what it opens but its check).
        connect: A connection made now, or a StoreError saying why none can be.
        server: Whether the store's writer gave up on the server, and whether the
            server answers now (see :mod:`honeycomb.store.silence`).
    """

    def __init__(
        self,
        pool: Callable[..., psycopg_pool.ConnectionPool[Any]],
        connect: Callable[[], psycopg.Connection[Any]],
        server: Server,
    ) -> None:
        self._open = pool
        self._connect = connect
        self._server = server
        self._pool: psycopg_pool.ConnectionPool[Any] | None = None
        self._lock = threading.Lock()
        self._watch = Watch(server.knock, self._silent, BUSY_S)
        forked.inherited(self)

    def forked(self) -> None:
        """In a child made by fork: the parent's pool is left as it is (its connections
        are the parent's, see :mod:`honeycomb.store.forked`); the child's first read
        opens its own."""
        forked.left(self._pool)
        self._pool = None
        self._lock = threading.Lock()
        self._watch = Watch(self._server.knock, self._silent, BUSY_S)

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection of the pool: one it gives within :data:`BUSY_S`, or else, unless
        the server answers nothing, or the store's writer gave up on the server and no
        new connection can be made, one it gives within its time. Once the writer gave
        up, the server is asked first whether it answers. A read that goes on past
        :data:`BUSY_S` (the pool's check of an idle connection, its query) goes on for
        as long as the server answers (:mod:`honeycomb.store.watch`).

        Raises:
            StoreError: when no connection can be made (a server that refuses it: the
                pool is closed, and the next read opens it anew), or the server answers
                nothing.
            psycopg_pool.PoolTimeout: when the pool gave none in its time.
        """
        import psycopg_pool

        if self._server.away:
            self._answers(refused=True)
        pool = self._opened()
        try:
            conn = pool.getconn(timeout=BUSY_S)
        except psycopg_pool.PoolTimeout:
            # Every connection busy, or the server silent since (a check of an idle
            # connection cut): asked. Away, the pool tries again behind, its reason
            # not said, for as long as the read would wait: a new connection tells.
            self._answers(refused=False)
            if self._server.away:
                self.reachable()
            conn = pool.getconn()
        try:
            # As the pool's own connection() does: a transaction left is ended.
            with self._watch.over(conn), conn:
                yield conn
        finally:
            pool.putconn(conn)

    def _answers(self, *, refused: bool) -> None:
        """Return if the server answers (``refused``: and lets a connection in).

        Raises:
            StoreError: why not (a refusal: the pool is closed).
        """
        heard = self._server.knock().heard()
        why = heard.error()
        if why is not None and (heard.silent or refused):
            if not heard.silent:
                self.close()
            raise why

    def _silent(self) -> None:
        """The server answered nothing as a read went on: the store is away."""
        self._server.away = True

    def _check(self, conn: psycopg.Connection[Any]) -> None:
        """The pool's check of a connection it gives (a server that restarted dropped
        it), for as long as the server answers."""
        import psycopg_pool

        with self._watch.over(conn):
            psycopg_pool.ConnectionPool.check_connection(conn)

    def reachable(self) -> None:
        """Return if a connection can be made now; else close the pool.

        Raises:
            StoreError: with libpq's reason, when no connection can be made.
        """
        try:
            self._connect().close()
        except StoreError:
            self.close()
            raise

    def _opened(self) -> psycopg_pool.ConnectionPool[Any]:
        with self._lock:
            if self._pool is None:
                # A server that cannot be reached is told at once, with why: the pool
                # would try again for its timeout, logging each failure.
                self._connect().close()
                self._pool = self._open(check=self._check)
            return self._pool

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            with ours():
                pool.close()


def open_pool(
    conninfo: str,
    *,
    size: int,
    options: dict[str, Any],
    configure: Callable[[psycopg.Connection[Any]], None],
    check: Callable[[psycopg.Connection[Any]], None],
    name: str,
    where: str,
    timeout_s: float,
) -> psycopg_pool.ConnectionPool[Any]:
    """A pool of at most ``size`` connections, open, with one made.

    Raises:
        StoreError: when no connection was made within ``timeout_s``.
    """
    import psycopg_pool

    pool: psycopg_pool.ConnectionPool[Any] = psycopg_pool.ConnectionPool(
        conninfo,
        min_size=1,
        max_size=max(1, size),
        kwargs={"autocommit": True, "application_name": "honeycomb", **options},
        configure=configure,
        check=check,  # a connection the server dropped (it restarted) is made anew
        timeout=timeout_s,
        name=f"{THREADS}-{name}",
        open=False,
    )
    try:
        pool.open(wait=True, timeout=timeout_s)
    except psycopg_pool.PoolTimeout as exc:
        pool.close()
        raise StoreError(
            f"cannot connect to the run store within {timeout_s}s", path=where
        ) from exc
    return pool
