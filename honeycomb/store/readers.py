"""The pool of connections a PostgreSQL store reads through (psycopg_pool), and what
psycopg logs of Honeycomb's connections.

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
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from runtime import StoreError

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

__all__ = ["THREADS", "open_pool", "ours", "unprinted"]

THREADS = "honeycomb-store"
"""How the names of the store's threads begin: the writer's, and the pool's (the
pool's name, ``honeycomb-store-<schema>``, begins its threads' names)."""

_LOGGERS = ("psycopg", "psycopg.pool")
_ours: ContextVar[bool] = ContextVar("honeycomb_store_ours", default=False)


@contextlib.contextmanager
def ours() -> Iterator[None]:
    """What psycopg logs meanwhile in this thread is of the store's connections."""
    token = _ours.set(True)
    try:
        yield
    finally:
        _ours.reset(token)


class _Unheard(logging.Filter):
    """Drops a record of the store's connections that no handler would take."""

    def filter(self, record: logging.LogRecord) -> bool:
        of_store = (record.threadName or "").startswith(THREADS) or _ours.get()
        return not of_store or _heard(logging.getLogger(record.name))


_UNHEARD = _Unheard()


def unprinted() -> None:
    """Have psycopg's loggers drop the store's records that nothing takes (see the
    module's docstring); once is enough, and more changes nothing."""
    for name in _LOGGERS:
        logging.getLogger(name).addFilter(_UNHEARD)  # (a filter it has is not added again)


def _heard(logger: logging.Logger) -> bool:
    """Whether a handler of ``logger``, or of one it propagates to, takes its records,
    as logging looks for one before it falls back on its last resort."""
    current: logging.Logger | None = logger
    while current is not None:
        if current.handlers:
            return True
        if not current.propagate:
            return False
        current = current.parent
    return False


def open_pool(
    conninfo: str,
    *,
    size: int,
    options: dict[str, Any],
    configure: Callable[[psycopg.Connection[Any]], None],
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
        # A connection the server dropped (it restarted) is made anew.
        check=psycopg_pool.ConnectionPool.check_connection,
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
