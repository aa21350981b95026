"""The writer thread of a :class:`~honeycomb.store.store.RunStore`.

One thread per store commits what is queued, in order, in batches (group commit: a
commit costs far more than a row), and renews the leases of the runs under way while
it waits: their heartbeat goes on however busy the event loop is, and stops when the
process does. It checkpoints the file when a run ends and when it stops.

A queued write is a :class:`~honeycomb.store.batch.Write`, and a batch of them is
written as :func:`~honeycomb.store.batch.write_batch` says.

A batch that fails in any way (the disk, a lock, a value the database cannot take) is
rolled back, and each of its waiters is told with a StoreError; the thread goes on.
One that failed for one write's values (a value the database does not take) is made
again write by write, so that only that write fails, not the others' of other runs. A
connection to a server that is lost (:meth:`~honeycomb.store.database.WriteConnection.lost`)
is made anew, for as long as :data:`RECONNECT_S` (the server restarts; once it gave up,
each batch tries once, until it connects again), or :data:`STOPPING_S` once a run that
stops queued its end (``Write.stopping``): a batch it lost before its commit was sent
is written again then, as nothing of it was (as is one the server rolled back to break
a deadlock with another process's); one lost as it committed is not (it may be there,
or not: its waiters are told so). Secrets are masked as a write is queued (see
:mod:`runtime.secrets`). The thread is never interrupted: whoever waits for it stops
waiting once its server answers nothing (:mod:`honeycomb.store.silence`), and the
thread goes on with what it holds, as its connection allows, but commits nothing more
once the store was closed on the silent server (:meth:`Writer.stop`).
Should the thread itself die, the waiters of its batch and of every write in its queue
are told too, and the next write starts another thread, with a queue and a connection
of its own (:class:`Writer`).
"""

from __future__ import annotations

import asyncio
import itertools
import queue
import threading
import time

from honeycomb.store import forked, silence
from honeycomb.store.batch import Action, Statement, Write, tell_all, write_batch
from honeycomb.store.database import Database, WriteConnection
from honeycomb.store.lease import Lease
from runtime import HoneycombError, StoreError
from runtime.secrets import masked

__all__ = ["RECONNECT_S", "STOPPING_S", "Action", "Statement", "Write", "Writer"]

_GATHER_S = 0.002
_STOP = object()
RECONNECT_S = 30.0
"""How long the writer tries to connect again to a server it lost, before it tells the
waiters of what it holds that the store cannot be written."""
STOPPING_S = 1.0
"""How long it tries for a run that stops (``Write.stopping``)."""
_RECONNECT_EVERY_S = (0.05, 0.1, 0.2, 0.5, 1.0)
_GIVEN_UP = "the store was closed while its server answered nothing: not written"


class Writer:
    """The writer of one store: a thread at a time (a :class:`_Life`), started by the
    first write, and again by the next one once it stopped or died.

    Each thread has a queue and a connection of its own. A write goes to the queue of
    the thread that runs; one queued as that thread ended is the ended thread's (written,
    or its waiter told it was not) or, if it did not take it, the next thread's: no write
    waits in a queue that no thread reads, and a thread that ends never takes what was
    queued for the next one. The next thread writes once the one before it has ended,
    so writes keep the order they were queued in.
    """

    def __init__(self, database: Database, lease_ttl_s: float) -> None:
        self.database = database
        # A few heartbeats a TTL, and one an hour at least: a wait of a TTL of years
        # would be longer than a thread can wait.
        self.beat_s = min(lease_ttl_s / 4, 3600.0)
        self.started = False  # it was started once: reads wait for what it writes
        # The leases renewed: replaced, never changed in place, as the thread reads it
        # without a lock.
        self.held: frozenset[Lease] = frozenset()
        self.failure: BaseException | None = None
        self._life: _Life | None = None  # the thread that runs, or the last one
        self._start_lock = threading.Lock()
        forked.inherited(self)

    def forked(self) -> None:
        """In a child made by fork: its parent's thread, queue and connection are left
        as they are (see :mod:`honeycomb.store.forked`), and its parent's leases are not
        renewed from here; the child's first write starts a thread of its own."""
        forked.left(self._life)
        self._life = None
        self._start_lock = threading.Lock()  # another thread of the parent may have held it
        self.held = frozenset()
        self.started = False

    @property
    def running(self) -> bool:
        """Whether a thread runs that takes what is queued."""
        life = self._life
        return life is not None and not life.ended

    def put(
        self,
        work: tuple[Statement, ...] | Action,
        *,
        done: asyncio.Future[None] | None = None,
        merge: bool = False,
        lease: Lease | None = None,
        checkpoint: bool = False,
        scrub: bool = False,
        urgent: bool = False,
        stopping: bool = False,
    ) -> None:
        """Queue a write (see :class:`Write`), its statements' secrets masked."""
        write = Write(
            work=masked(work),
            done=done,
            merge=merge,
            lease=lease,
            checkpoint=checkpoint,
            scrub=scrub,
            urgent=urgent,
            stopping=stopping,
        )
        life = self._life
        if life is None or life.ended:
            life = self.start()
        if stopping:
            life.hurried.set()  # before the thread can take it
        life.queue.put(write)
        if life.ended:
            self._hand_on(life)

    def sent(self, done: asyncio.Future[None]) -> bool:
        """Whether the write told to ``done`` is in the batch whose commit was sent."""
        life = self._life
        return life is not None and life.committing and any(w.done is done for w in life.batch)

    def _hand_on(self, ended: _Life) -> None:
        """Queue what the thread that ended as it was queued did not take, for the next
        thread (or the one after, should that one end too). When none can start (the
        store cannot be opened), their waiters are told why."""
        writes = ended.leftovers()
        while writes:
            try:
                life = self.start()
            except StoreError as exc:
                self.failure = exc
                tell_all(writes, dict.fromkeys(range(len(writes)), exc))
                return
            if any(write.stopping for write in writes):
                life.hurried.set()
            for write in writes:
                life.queue.put(write)
            if not life.ended:
                return
            writes = life.leftovers()

    def stop(self) -> None:
        """Commit what is queued, checkpoint and stop the thread: as a run that stops
        does, waiting for a lost server a moment only (:data:`STOPPING_S`), and for the
        thread as long as its server answers. A thread left to a silent server commits
        nothing more (the process ends, saying what was not written: it stays so), and
        ends by itself; a commit it had sent may be there or not."""
        life = self._life
        if life is not None and life.thread.is_alive():
            life.hurried.set()  # a lost server is waited for no more, as for a stopping write
            life.queue.put(Write(work=(), stopping=True))
            life.queue.put(_STOP)
            for wait in silence.waits(self.database, STOPPING_S):
                life.thread.join(wait)
                if not life.thread.is_alive():
                    break
            else:
                life.given_up.set()
        self.started = False  # nothing more to wait for

    def stop_soon(self) -> None:
        """Have the thread commit what is queued, checkpoint and stop, without waiting
        for it."""
        life = self._life
        if life is not None and not life.ended:
            life.queue.put(_STOP)

    def start(self) -> _Life:
        """The thread that runs, started unless one does.

        Raises:
            StoreError: in the caller, when the file cannot be opened as a store.
        """
        with self._start_lock:
            life = self._life
            if life is None or life.ended:
                life = self._life = _Life(self, self.database.connect(), after=life)
                self.started = True
                life.thread.start()
            return life


class _Life:
    """One writer thread, from its start to its end, with its queue and its connection:
    it commits what is queued, in order, in batches, and renews the leases held while
    it waits.

    Args:
        writer: The store's writer (its database, its leases, its last failure).
        connection: The thread's connection, made by whoever started it.
        after: The thread before it, which it waits for before it writes.
    """

    def __init__(self, writer: Writer, connection: WriteConnection, after: _Life | None) -> None:
        self.writer = writer
        self.queue: queue.SimpleQueue[Write | object] = queue.SimpleQueue()
        self.connection: WriteConnection | None = connection
        self.ended = False  # it takes nothing more from its queue, but what it drains
        self.committing = False  # the batch being written is being committed
        self.batch: tuple[Write, ...] = ()  # the batch being written (see Writer.sent)
        self.unreachable = False  # it gave up connecting again, and has not connected since
        # A stopping write is queued: a lost server is waited for no more (a wait under
        # way ends as it is set).
        self.hurried = threading.Event()
        self.given_up = threading.Event()  # the store closed on a silent server
        self.thread = threading.Thread(target=self._run, name="honeycomb-store", daemon=True)
        self._after = after.thread if after is not None else None

    def leftovers(self) -> list[Write]:
        """What is queued and no thread took (the queue is left empty)."""
        items: list[Write] = []
        while True:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                return items
            if isinstance(item, Write):
                items.append(item)

    def _run(self) -> None:
        if self._after is not None:
            self._after.join()  # what the thread before it took is written first
            self._after = None
        items: list[Write] = []  # the batch being written
        try:
            self._write(items)
            self.ended = True
            # Queued as it stopped: written now (a write queued after this takes itself
            # to the next thread).
            items[:] = self.leftovers()
            if items:
                self._batch(items, frozenset())
            if self.connection is not None:
                self.connection.checkpoint(final=True)
        except BaseException as exc:  # not a batch's error (those are told): never silent
            died = StoreError(
                f"the run store's writer stopped: {type(exc).__name__}: {exc}",
                path=self.writer.database.where,
            )
            self.ended = True  # before a waiter told below starts the next thread
            self._abandon(items, died)
            raise
        finally:
            if self.connection is not None:
                self.connection.close()
                self.connection = None

    def _write(self, items: list[Write]) -> None:
        """Take what is queued and commit it as one transaction (``items``, while it is
        written), and renew the leases held while it waits, until told to stop."""
        beat = self.writer.beat_s
        due = time.monotonic() + beat
        stopping = False
        while not stopping:
            try:
                batch = [self.queue.get(timeout=max(0.0, due - time.monotonic()))]
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
                    batch.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            stopping = any(item is _STOP for item in batch)
            items[:] = [item for item in batch if isinstance(item, Write)]
            if any(item.stopping for item in items):
                self.hurried.clear()  # taken: its batch waits as briefly as it says
            held: frozenset[Lease] = frozenset()
            if time.monotonic() >= due:
                held, due = self.writer.held, time.monotonic() + beat
            if items or held:
                self._batch(items, held)
            items.clear()

    def _abandon(self, items: list[Write], error: StoreError) -> None:
        """Tell the waiters of ``items`` (the batch being written), and of every write
        still in its queue, that it was not made."""
        items = items + self.leftovers()
        tell_all(items, dict.fromkeys(range(len(items)), error))

    def _batch(self, items: list[Write], held: frozenset[Lease]) -> None:
        """Commit ``items`` (and renew ``held``) in one transaction; tell their waiters.
        A batch whose connection was lost before it committed is written again on a new
        one, as is one the server rolled back to break a deadlock (nothing of it was
        written). A batch with nothing to do (flushes: what was queued before them is
        done) needs no connection, and waits for no server."""
        if not held and not any(item.work or item.scrub or item.checkpoint for item in items):
            tell_all(items, {})
            return
        deadline: float | None = None
        stopping = any(item.stopping for item in items)
        self.batch = tuple(items)
        while True:
            refused: dict[int, HoneycombError] = {}
            self.committing = False
            try:
                connection = self._connected(stopping)
                write_batch(connection, items, held, refused, self.writer.database.where)
                if self.given_up.is_set():  # (rolled back below)
                    raise StoreError(_GIVEN_UP, path=self.writer.database.where)
                self.committing = True
                connection.commit()
                self.writer.database.away = False  # it answers again (found silent before)
            except Exception as exc:  # any error of any write: the batch's writes are not made
                failed = self.connection
                if failed is not None:
                    failed.rollback()
                lost = failed is not None and failed.lost()
                # Written again: a batch the server did not commit (its connection was
                # lost before the commit was sent, or it broke a deadlock with another
                # process's transaction by rolling this one back).
                again = (lost and not self.committing) or (
                    failed is not None and failed.retryable(exc)
                )
                if again:
                    deadline = deadline or time.monotonic() + _patience(stopping)
                    # A stopping write behind it cuts short the wait for a lost server,
                    # not the retry of a batch a healthy one rolled back.
                    if time.monotonic() < deadline and not (lost and self._cut_short(stopping)):
                        continue  # on a new connection, if it was lost
                if len(items) > 1 and failed is not None and failed.of_one_write(exc):
                    # One write the database does not take (one run's) does not fail
                    # the others with it (other runs'): each is made on its own.
                    for index, item in enumerate(items):
                        self._batch([item], held if index == 0 else frozenset())
                    return
                error = self._failed(exc, lost=lost)
                refused = dict.fromkeys(range(len(items)), error)
            else:
                if any(item.scrub for item in items):
                    connection.checkpoint(final=True)
                elif any(item.checkpoint for item in items):
                    connection.checkpoint(final=False)
            self.committing, self.batch = False, ()
            tell_all(items, refused)
            return

    def _failed(self, exc: Exception, *, lost: bool) -> StoreError:
        """The error told to the waiters of a batch that failed with ``exc``."""
        if isinstance(exc, StoreError):
            error = exc
        elif lost and self.committing:
            error = StoreError(
                "the connection to the run store was lost as it committed: what was being "
                f"written may be there or not ({exc})",
                path=self.writer.database.where,
            )
        else:
            # The database's own error says what it is; another (a value it cannot
            # bind) says its type too.
            errors = self.connection.errors if self.connection is not None else ()
            why = str(exc) if isinstance(exc, errors) else f"{type(exc).__name__}: {exc}"
            error = StoreError(
                f"cannot write the run store: {why}", path=self.writer.database.where
            )
        if error is not exc:
            error.__cause__ = exc
        self.writer.failure = error
        return error

    def _cut_short(self, stopping: bool) -> bool:
        """Whether the wait for a lost server of a batch (``stopping``: one that holds a
        stopping write) ends now, for a stopping write queued after it."""
        return self.hurried.is_set() and not stopping

    def _connected(self, stopping: bool) -> WriteConnection:
        """The writer's connection: made anew if it was lost, trying for as long as
        :data:`RECONNECT_S`, or :data:`STOPPING_S` for a batch that holds a stopping
        write (once, when the last time it tried it gave up), and no longer once a
        stopping write is queued after the batch.

        Raises:
            StoreError: when the database could not be connected to in that time.
        """
        connection = self.connection
        if connection is not None and not connection.lost():
            return connection
        if connection is not None:
            connection.close()
            self.connection = None
        # Waited out once: a write after one the wait failed tries once, or each write
        # of a run (its workers', its end's, its lease's) would wait as long again.
        deadline = time.monotonic() + (0.0 if self.unreachable else _patience(stopping))
        for wait in itertools.chain(_RECONNECT_EVERY_S, itertools.repeat(_RECONNECT_EVERY_S[-1])):
            try:
                self.connection = self.writer.database.connect()
            except StoreError:
                cut_short = self._cut_short(stopping)
                if time.monotonic() >= deadline or cut_short:
                    # Waited out: the writes after it try once. Not a brief wait (a
                    # stopping run's): other runs' writes wait as long as ever. Reads
                    # wait no more either way.
                    self.unreachable = self.unreachable or not (stopping or cut_short)
                    self.writer.database.away = True
                    raise
            else:
                self.unreachable = False
                return self.connection
            # The last try at the deadline, not a whole wait after it; and at once, for
            # another batch's, as a stopping write is queued after it.
            pause = max(0.0, min(wait, deadline - time.monotonic()))
            if stopping:
                time.sleep(pause)
            else:
                self.hurried.wait(pause)
        raise AssertionError("unreachable: the waits never end")  # pragma: no cover


def _patience(stopping: bool) -> float:
    """How long a batch waits for a lost server (``stopping``: it holds a stopping write)."""
    return STOPPING_S if stopping else RECONNECT_S
