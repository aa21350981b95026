"""``RunStore``: runs kept in one SQLite file, so a crashed run can be resumed.

The store holds each run (task, plan, status, result), each worker's conversation
after every turn, each finished worker's result, and the journal of side-effecting
tool calls (see :mod:`runtime.journal`). The file is in WAL mode, so readers (``honeycomb
runs``) never wait for the run that writes.

Writes never block the event loop: they are queued to one writer thread per store,
which commits them in batches, in order. Most writes are fire-and-forget; the ones a
guarantee rests on are awaited until committed: a side effect's intent before it
runs, its outcome after, and the end of the run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import sniffio

from honeycomb._schema import SCHEMA, SCHEMA_VERSION
from honeycomb.spans import Span
from runtime import JournalEntry, StoreError
from runtime._values import record

__all__ = ["STATE_FIELDS", "RunStore", "RunSummary", "StoredRun", "StoredWorker"]


_GATHER_S = 0.002
T = TypeVar("T")
Statement = tuple[str, Sequence[Any]]
"""SQL and its parameters: a tuple for one row, a list of tuples for many."""
_STOP = object()


@record(frozen=True)
class RunSummary:
    """One line of ``honeycomb runs``."""

    run_id: str
    task: str
    status: str
    started_at: float
    finished_at: float | None
    workers: int
    model_calls: int
    input_tokens: int
    output_tokens: int
    tool_calls: int
    source: str | None
    cost: float

    @property
    def duration_s(self) -> float | None:
        return None if self.finished_at is None else self.finished_at - self.started_at


STATE_FIELDS = (
    "task", "messages", "previous", "turn", "input_tokens", "output_tokens", "cost",
    "tool_calls", "nudged", "output_attempts", "wrapped_up", "repeats",
)  # fmt: skip
"""A worker's saved loop state: its columns in the ``workers`` table."""


@dataclass(slots=True)
class StoredWorker:
    """What a store holds of one worker: its result once finished, else its last
    saved state (the :data:`STATE_FIELDS`) and its messages: ``(seq, JSON array)``
    rows in order, each holding the messages from index ``seq`` on."""

    status: str
    result: str | None
    state: dict[str, Any] | None
    messages: list[tuple[int, str]] = field(default_factory=list)
    journal: dict[tuple[int, str], JournalEntry] = field(default_factory=dict)


@dataclass(slots=True)
class StoredRun:
    """Everything a store holds of one run."""

    run_id: str
    task: str
    status: str
    source: str | None
    plan: str | None
    result: str | None
    workers: dict[str, StoredWorker]


class RunStore:
    """Runs in one SQLite file (created with its folder on first use).

    Args:
        path: The file. Share one RunStore between Executors of one process.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._writing = False  # the writer thread runs (is_alive() costs a lock per write)
        self._start_lock = threading.Lock()
        self._failure: BaseException | None = None

    def __repr__(self) -> str:
        return f"RunStore({str(self.path)!r})"

    # --- writing ------------------------------------------------------------------------

    def write(self, *statements: Statement) -> None:
        """Queue statements to commit together, in order with every other write (see
        :meth:`commit` to wait until they are)."""
        self._ensure_writer()
        self._queue.put((statements, None, False))

    def save(self, *statements: Statement) -> None:
        """Queue statements that commute with every other kind of statement (they
        touch rows nothing else writes), to be committed soon. The writer runs all
        such rows of a batch with one ``executemany`` per statement, in the order
        they were saved: this is what keeps a checkpoint every turn cheap."""
        self._ensure_writer()
        self._queue.put((statements, None, True))

    async def commit(self, *statements: Statement) -> None:
        """Write ``statements`` and return once they (and all written before) are
        committed.

        Raises:
            StoreError: when the store cannot be written.
        """
        self._ensure_writer()
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._queue.put((statements, done, False))
        await _wait(done)

    async def flush(self) -> None:
        """Return once everything written so far is committed."""
        await self.commit()

    def close(self) -> None:
        """Commit what is queued and stop the writer thread."""
        writer = self._writer
        if writer is not None and writer.is_alive():
            self._queue.put(_STOP)
            writer.join()
        self._writer = None

    async def open(self) -> None:
        """Open the file (creating it) in a worker thread, so a run learns at its
        start, not its end, that the store cannot be used.

        Raises:
            StoreError: when the file cannot be opened or is not a run store.
        """
        if not self._writing:
            await anyio.to_thread.run_sync(self._ensure_writer)

    def _ensure_writer(self) -> None:
        if self._writing:
            return
        with self._start_lock:
            if not self._writing:
                connection = self._connect()  # fail here, in the caller, if it cannot open
                self._writer = threading.Thread(
                    target=self._write_loop, args=(connection,), name="honeycomb-store",
                    daemon=True,
                )  # fmt: skip
                self._writing = True
                self._writer.start()

    def _write_loop(self, connection: sqlite3.Connection) -> None:
        """The writer thread: take what is queued, commit it as one transaction."""
        stopping = False
        try:
            while not stopping:
                batch = [self._queue.get()]
                if batch[0] is not _STOP and batch[0][1] is None:
                    # Group commit: gather what arrives in the next moment into the same
                    # transaction (a commit costs far more than a row). Not when someone
                    # waits for this write: a side effect waits for its intent.
                    time.sleep(_GATHER_S)
                while True:
                    try:
                        batch.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                if batch[-1] is _STOP:
                    stopping = True
                items = [item for item in batch if item is not _STOP]
                error: BaseException | None = None
                try:
                    self._commit(connection, items)
                except sqlite3.Error as exc:
                    error = StoreError(f"cannot write the run store: {exc}", path=str(self.path))
                    self._failure = error
                    if connection.in_transaction:
                        connection.execute("ROLLBACK")
                for _, done, _ in items:
                    if done is None:
                        continue
                    if error is None:
                        done.set_result(None)
                    else:
                        done.set_exception(error)
        finally:
            self._writing = False  # stopped, or died: the next write starts another
        connection.close()

    @staticmethod
    def _commit(connection: sqlite3.Connection, items: list[Any]) -> None:
        """One transaction: ordered writes in order, then the saved rows merged."""
        merged: dict[str, list[Sequence[Any]]] = {}
        connection.execute("BEGIN IMMEDIATE")
        for statements, _, merge in items:
            for sql, params in statements:
                many = isinstance(params, list)  # rows for one statement
                if merge:
                    rows = merged.setdefault(sql, [])
                    rows.extend(params) if many else rows.append(params)
                elif many:
                    connection.executemany(sql, params)
                else:
                    connection.execute(sql, params)
        for sql, rows in merged.items():
            connection.executemany(sql, rows)
        connection.execute("COMMIT")

    # --- reading ------------------------------------------------------------------------

    async def load(self, run_id: str) -> StoredRun | None:
        """The run ``run_id``, or None if the store does not have it."""
        return await self._read(self._load, run_id)

    async def summary(self, run_id: str) -> RunSummary | None:
        """Run ``run_id``'s line, as :meth:`find`, from async code."""
        return await self._read(self.find, run_id)

    async def _read(self, read: Callable[[str], T], run_id: str) -> T:
        """``read(run_id)`` in a worker thread, after what was written is committed."""
        if self._writer is not None:
            await self.flush()
        return await anyio.to_thread.run_sync(read, run_id)

    def runs(self, limit: int = 50) -> list[RunSummary]:
        """The latest runs, newest first (a quick read; fine to call from a CLI)."""
        return self._summaries("ORDER BY started_at DESC LIMIT ?", (limit,))

    def find(self, run_id: str) -> RunSummary | None:
        """Run ``run_id``'s line (its task, source, status ...), or None."""
        found = self._summaries("WHERE run_id = ?", (run_id,))
        return found[0] if found else None

    def _summaries(self, where: str, params: tuple[Any, ...]) -> list[RunSummary]:
        if not self.path.exists():
            return []
        with self._reading() as db:
            rows = db.execute(
                "SELECT run_id, task, status, started_at, finished_at, workers, model_calls, "
                f"input_tokens, output_tokens, tool_calls, source, cost FROM runs {where}",
                params,
            ).fetchall()
        return [RunSummary(*row) for row in rows]

    def spans(self, run_id: str) -> list[Span]:
        """The spans kept for run ``run_id`` (every life of it), by start time."""
        if not self.path.exists():
            return []
        with self._reading() as db:
            rows = db.execute("SELECT spans FROM spans WHERE run_id = ?", (run_id,)).fetchall()
        found = [Span(*values) for (batch,) in rows for values in json.loads(batch)]
        return sorted(found, key=lambda s: s.start)

    def _load(self, run_id: str) -> StoredRun | None:
        if not self.path.exists():
            return None
        with self._reading() as db:
            row = db.execute(
                "SELECT task, status, source, plan, result FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            if row is None:
                return None
            workers: dict[str, StoredWorker] = {}
            columns = ", ".join(STATE_FIELDS)
            for name, status, result, *state in db.execute(
                f"SELECT worker, status, result, {columns} FROM workers WHERE run_id = ?",
                (run_id,),
            ):
                saved = dict(zip(STATE_FIELDS, state, strict=True))
                workers[name] = StoredWorker(status, result, saved if state[0] else None)
            for name, seq, messages in db.execute(
                "SELECT worker, seq, messages FROM messages WHERE run_id = ? ORDER BY worker, seq",
                (run_id,),
            ):
                if name in workers:
                    workers[name].messages.append((seq, messages))
            for name, turn, call_id, tool, arguments, status, content in db.execute(
                "SELECT worker, turn, call_id, tool, arguments, status, content FROM journal "
                "WHERE run_id = ?",
                (run_id,),
            ):
                found = workers.setdefault(name, StoredWorker("running", None, None))
                found.journal[turn, call_id] = JournalEntry(tool, arguments, status, content or "")
        return StoredRun(run_id, row[0], row[1], row[2], row[3], row[4], workers)

    # --- connections --------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=30.0
            )
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"the store was written by a newer Honeycomb (schema {version}); "
                    "upgrade Honeycomb or use another store",
                    path=str(self.path),
                )
            if version < SCHEMA_VERSION:
                db.executescript(SCHEMA)  # one transaction: a crash leaves all or none
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the run store: {exc}", path=str(self.path)) from exc
        return db

    @contextlib.contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        db = self._connect()
        try:
            db.execute("BEGIN")  # one snapshot for the whole read
            yield db
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the run store: {exc}", path=str(self.path)) from exc
        finally:
            db.close()


async def _wait(done: concurrent.futures.Future[None]) -> None:
    """Wait for the writer without blocking the event loop."""
    if sniffio.current_async_library() == "asyncio":
        await asyncio.wrap_future(done)
    else:
        await anyio.to_thread.run_sync(done.result)
