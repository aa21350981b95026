"""What the writer thread of a run store writes: queued writes (:class:`Write`), and a
batch of them in one transaction (:func:`write_batch`), whose waiters are told how it
went in their event loop (:func:`tell_all`).

Text is made valid UTF-8 on the way in (lone surrogates replaced, see
:mod:`runtime.text`); an action's values are masked as it runs them (a statement's are
masked as it is queued, see :mod:`runtime.secrets`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from honeycomb.store import lease as _lease
from honeycomb.store.database import Connection, Rows, WriteConnection
from honeycomb.store.lease import Lease
from runtime import HoneycombError, StoreError
from runtime.secrets import masked
from runtime.text import valid_text
from runtime.value import Value

__all__ = ["Action", "Statement", "Write", "tell_all", "write_batch"]

Statement = tuple[str, Sequence[Any]]
"""SQL and its parameters: a tuple for one row, a list of tuples for many."""
Action = Callable[[Connection], None]
"""Work of a transaction that reads before it writes (taking a lease, keeping a
decision): it raises a HoneycombError before it writes anything (told to its waiter,
the rest of the batch is committed), or not at all."""


class Write(Value, frozen=True, kw_only=True):
    """One write queued for the writer thread."""

    work: tuple[Statement, ...] | Action
    """The statements to run, in order, or an action."""
    done: asyncio.Future[None] | None = None
    """The future of whoever waits for it to be committed (None: nobody)."""
    merge: bool = False
    """The statements commute with every other write (see ``RunStore.save``)."""
    lease: Lease | None = None
    """The lease they are written under: committed only while it is still the run's."""
    checkpoint: bool = False
    """Checkpoint the file once they are committed."""
    scrub: bool = False
    """Checkpoint the file whole once they are committed, its WAL emptied: what they
    deleted is then in neither file (SQLite keeps the pages it wrote in the WAL)."""
    urgent: bool = False
    """Commit it at once, not with whatever else arrives in the next moment."""
    stopping: bool = False
    """Written as its run stops (cancelled, Ctrl-C), which waits for it: a server that is
    away is waited for a moment (``writer.STOPPING_S``), not a restart's time
    (``writer.RECONNECT_S``), and the writer stops waiting for it for the writes queued
    before it too (their waiters are told the store cannot be written). Its waiter waits
    no longer than the server answers (:mod:`honeycomb.store.silence`)."""


def write_batch(
    connection: WriteConnection,
    items: list[Write],
    held: frozenset[Lease],
    refused: dict[int, HoneycombError],
    where: str,
) -> None:
    """Begin one transaction and make in it what ``items`` (and renewing ``held``) write,
    short of its commit: ordered writes in order, then the saved rows merged. Writes
    under a lease that is no longer the run's (of the store ``where``) are left out, and
    said so in ``refused`` (by index), as are actions that raised."""
    merged: dict[str, list[Sequence[Any]]] = {}
    owned: dict[Lease, StoreError | None] = {}  # each lease checked once a batch
    connection.begin()
    if held:
        _lease.renew(connection, held)
    for index, item in enumerate(items):
        work, lease = item.work, item.lease
        if lease is not None:
            if lease not in owned:
                owned[lease] = _lease.check(connection, lease, where)
            lost = owned[lease]
            if lost is not None:
                refused[index] = lost
                continue
        if callable(work):
            try:
                work(_Storing(connection))
            except HoneycombError as exc:
                refused[index] = exc
            owned.clear()  # it may have taken a lease
            continue
        for sql, given in work:
            many = isinstance(given, list)  # rows for one statement
            params = [_storable(row) for row in given] if many else _storable(given)
            if item.merge:
                rows = merged.setdefault(sql, [])
                rows.extend(params) if many else rows.append(params)
            elif many:
                connection.executemany(sql, params)
            else:
                connection.execute(sql, params)
    for sql, rows in merged.items():
        connection.executemany(sql, rows)


class _Storing:
    """The connection an action is given: the parameters of what it runs are written
    as a statement's are, their secrets masked and their text made storable (an
    action's values are its own, not seen as it is queued)."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self.row_lock = connection.row_lock

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        return self._connection.execute(sql, _storable(masked(params)))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._connection.executemany(sql, [_storable(row) for row in masked(rows)])

    def columns(self, table: str) -> frozenset[str]:
        return self._connection.columns(table)

    def lock_run(self, run_id: str) -> None:
        self._connection.lock_run(valid_text(masked(run_id)))

    def json_number(self, column: str, *keys: str) -> str:
        return self._connection.json_number(column, *keys)


def _storable(row: Sequence[Any]) -> Sequence[Any]:
    """A row's parameters as a database can take them: text with lone surrogates has them
    replaced by U+FFFD (see :mod:`runtime.text`), for no UTF-8 encoder takes them."""
    for value in row:
        # isascii() first: valid_text's own first test, without a call for each value.
        if type(value) is str and not value.isascii() and valid_text(value) is not value:
            return tuple(valid_text(v) if type(v) is str else v for v in row)
    return row


def tell_all(items: list[Write], refused: dict[int, HoneycombError]) -> None:
    """Tell the waiters of ``items`` how their writes went (``refused``, by index)."""
    waiters: dict[
        asyncio.AbstractEventLoop, list[tuple[asyncio.Future[None], HoneycombError | None]]
    ] = {}
    for index, item in enumerate(items):
        done = item.done
        if done is not None:
            waiters.setdefault(done.get_loop(), []).append((done, refused.get(index)))
    for loop, told in waiters.items():  # one wake-up of each loop, not one per write
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            loop.call_soon_threadsafe(_tell, told)


def _tell(waiters: list[tuple[asyncio.Future[None], HoneycombError | None]]) -> None:
    """In the waiters' event loop: how their writes went. One that stopped waiting
    (cancelled) has nothing to be told: its write stands."""
    for waiter, error in waiters:
        if not waiter.done():
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(error)
