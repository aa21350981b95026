"""The writer thread of a :class:`~honeycomb.store.store.RunStore`.

One thread per store commits what is queued, in order, in batches (group commit: a
commit costs far more than a row), and renews the leases of the runs under way while
it waits: their heartbeat goes on however busy the event loop is, and stops when the
process does. It checkpoints the file when a run ends and when it stops.

A queued write is a :class:`Write`.

A batch that fails in any way (the disk, a lock, a value SQLite cannot take) is rolled
back, and each of its waiters is told with a StoreError; the thread goes on. Text is
made valid UTF-8 on the way in (lone surrogates replaced, see :mod:`runtime.text`),
and secrets are masked as a write is queued (see :mod:`runtime.secrets`).
Should the thread itself die, the waiters of its batch and of every write queued are
told too, and the next write starts another.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from honeycomb.store import lease as _lease
from honeycomb.store.lease import Lease
from honeycomb.store.schema import connect
from runtime import HoneycombError, StoreError
from runtime.secrets import masked
from runtime.text import valid_text
from runtime.value import Value

__all__ = ["Action", "Statement", "Write", "Writer"]

Statement = tuple[str, Sequence[Any]]
"""SQL and its parameters: a tuple for one row, a list of tuples for many."""
Action = Callable[[sqlite3.Connection], None]
"""Work of a transaction that reads before it writes (taking a lease, keeping a
decision): it raises a HoneycombError before it writes anything (told to its waiter,
the rest of the batch is committed), or not at all."""

_GATHER_S = 0.002
_STOP = object()


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
    urgent: bool = False
    """Commit it at once, not with whatever else arrives in the next moment."""


class Writer:
    """The thread that writes one store's file, started by the first write (and again
    by the next one, if it stopped or died)."""

    def __init__(self, path: Path, lease_ttl_s: float) -> None:
        self.path = path
        self.beat_s = lease_ttl_s / 4  # a few heartbeats a TTL
        self.running = False  # the thread runs (is_alive() costs a lock per write)
        self.started = False  # it was started once: reads wait for what it writes
        # The leases renewed: replaced, never changed in place, as the thread reads it
        # without a lock.
        self.held: frozenset[Lease] = frozenset()
        self.failure: BaseException | None = None
        self._queue: queue.SimpleQueue[Write | object] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def put(
        self,
        work: tuple[Statement, ...] | Action,
        *,
        done: asyncio.Future[None] | None = None,
        merge: bool = False,
        lease: Lease | None = None,
        checkpoint: bool = False,
        urgent: bool = False,
    ) -> None:
        """Queue a write (see :class:`Write`), its statements' secrets masked."""
        if not self.running:
            self.start()
        write = Write(
            work=masked(work),
            done=done,
            merge=merge,
            lease=lease,
            checkpoint=checkpoint,
            urgent=urgent,
        )
        self._queue.put(write)

    def stop(self) -> None:
        """Commit what is queued, checkpoint and stop the thread."""
        thread = self._thread
        if thread is not None and thread.is_alive():
            self._queue.put(_STOP)
            thread.join()
        self._thread = None
        self.started = False  # nothing more to wait for

    def start(self) -> None:
        """Start the thread, unless it runs.

        Raises:
            StoreError: in the caller, when the file cannot be opened as a store.
        """
        if self.running:
            return
        with self._start_lock:
            if not self.running:
                connection = connect(self.path, write=True)
                assert connection is not None  # None only for reading
                self._thread = threading.Thread(
                    target=self._loop, args=(connection,), name="honeycomb-store", daemon=True
                )
                self.running = self.started = True
                self._thread.start()

    def _loop(self, connection: sqlite3.Connection) -> None:
        """The writer thread: take what is queued, commit it as one transaction, and
        renew the leases held while it waits."""
        beat = self.beat_s
        due = time.monotonic() + beat
        stopping = False
        items: list[Write] = []  # the batch being written
        try:
            while not stopping:
                try:
                    batch = [self._queue.get(timeout=max(0.0, due - time.monotonic()))]
                except queue.Empty:
                    batch = []  # a heartbeat is due
                first = batch[0] if batch else None
                if isinstance(first, Write) and not first.urgent:
                    # Group commit: gather what arrives in the next moment into the same
                    # transaction (a commit costs far more than a row). Not for an urgent
                    # write: a side effect waits for its intent.
                    time.sleep(_GATHER_S)
                while True:
                    try:
                        batch.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                stopping = any(item is _STOP for item in batch)
                items = [item for item in batch if isinstance(item, Write)]
                held: frozenset[Lease] = frozenset()
                if time.monotonic() >= due:
                    held, due = self.held, time.monotonic() + beat
                if items or held:
                    self._batch(connection, items, held)
                items = []
            _checkpoint(connection, "TRUNCATE")
        except BaseException as exc:  # not a batch's error (those are told): never silent
            died = StoreError(
                f"the run store's writer stopped: {type(exc).__name__}: {exc}",
                path=str(self.path),
            )
            self.running = False  # the next write starts another
            self._abandon(items, died)
            raise
        finally:
            self.running = False  # stopped, or died: the next write starts another
            connection.close()

    def _abandon(self, items: list[Write], error: StoreError) -> None:
        """Tell the waiters of ``items`` (the batch being written), and of every write
        still queued, that it was not made."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, Write):
                items.append(item)
        _tell_all(items, dict.fromkeys(range(len(items)), error))

    def _batch(
        self, connection: sqlite3.Connection, items: list[Write], held: frozenset[Lease]
    ) -> None:
        """Commit ``items`` (and renew ``held``) in one transaction; tell their waiters."""
        refused: dict[int, HoneycombError] = {}
        try:
            self._commit(connection, items, held, refused)
        except Exception as exc:  # any error of any write: the batch's writes are not made
            # An sqlite3 error says what it is; another (a value sqlite3 cannot bind)
            # says its type too.
            why = str(exc) if isinstance(exc, sqlite3.Error) else f"{type(exc).__name__}: {exc}"
            error = StoreError(f"cannot write the run store: {why}", path=str(self.path))
            error.__cause__ = exc
            self.failure = error
            with contextlib.suppress(sqlite3.Error):  # a failed rollback leaves it to SQLite
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
            refused = dict.fromkeys(range(len(items)), error)
        else:
            if any(item.checkpoint for item in items):
                _checkpoint(connection, "PASSIVE")
        _tell_all(items, refused)

    def _commit(
        self,
        connection: sqlite3.Connection,
        items: list[Write],
        held: frozenset[Lease],
        refused: dict[int, HoneycombError],
    ) -> None:
        """One transaction: ordered writes in order, then the saved rows merged. Writes
        under a lease that is no longer the run's are left out, and said so in
        ``refused`` (by index), as are actions that raised."""
        merged: dict[str, list[Sequence[Any]]] = {}
        owned: dict[Lease, StoreError | None] = {}  # each lease checked once a batch
        path = str(self.path)
        connection.execute("BEGIN IMMEDIATE")
        if held:
            _lease.renew(connection, held)
        for index, item in enumerate(items):
            work, lease = item.work, item.lease
            if lease is not None:
                if lease not in owned:
                    owned[lease] = _lease.check(connection, lease, path)
                lost = owned[lease]
                if lost is not None:
                    refused[index] = lost
                    continue
            if callable(work):
                try:
                    work(connection)
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
        connection.execute("COMMIT")


def _checkpoint(connection: sqlite3.Connection, mode: str) -> None:
    """Move what the WAL holds into the file itself, as far as readers allow. What is
    committed is durable either way; a checkpoint that cannot finish is left to the
    next one (or to the next open)."""
    with contextlib.suppress(sqlite3.Error):
        connection.execute(f"PRAGMA wal_checkpoint({mode})")


def _storable(row: Sequence[Any]) -> Sequence[Any]:
    """A row's parameters as SQLite can take them: text with lone surrogates has them
    replaced by U+FFFD (see :mod:`runtime.text`), for no UTF-8 encoder takes them."""
    for value in row:
        # isascii() first: valid_text's own first test, without a call for each value.
        if type(value) is str and not value.isascii() and valid_text(value) is not value:
            return tuple(valid_text(v) if type(v) is str else v for v in row)
    return row


def _tell_all(items: list[Write], refused: dict[int, HoneycombError]) -> None:
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
