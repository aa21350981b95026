"""``RunStore``: runs kept in one SQLite file (the default) or in a PostgreSQL database
that many processes share, so a crashed run can be resumed, anywhere.

The store holds each run (task, plan, status, result), each worker's conversation
after every turn, each finished worker's result, the journal of side-effecting tool
calls (:mod:`runtime.tools.journal`) and the lease of each run under way
(:mod:`honeycomb.store.lease`). Where the rows are is its
:class:`~honeycomb.store.database.Database`: an SQLite file in WAL mode, checkpointed
when a run ends and when it closes (so a copy of the ``.db`` alone holds every run that
ended; :mod:`honeycomb.store.sqlite`), or a schema of a PostgreSQL database
(:mod:`honeycomb.store.postgres`). Only a Honeycomb store, or a new or empty file (an
empty or missing schema), is ever written to; reading creates nothing.

Writes never block the event loop: one writer thread per store commits them in
batches, in order (:mod:`honeycomb.store.writer`). Only what a guarantee rests on is
awaited: a side effect's intent before it runs, its outcome after, a worker's result
before it is reported, and the end of the run; each is committed only while the run's
lease is still its own.
"""

from __future__ import annotations

import asyncio
import functools
import math
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import anyio
import anyio.to_thread
import msgspec

from honeycomb.store import lease as _lease
from honeycomb.store import silence
from honeycomb.store import writer as writing
from honeycomb.store.approvals import ASK, asked_row, keep_decision, read_approvals
from honeycomb.store.cut_off import keep_cut_off
from honeycomb.store.database import Connection, Database, is_url, store_problem
from honeycomb.store.evals import KEEP_EVAL, EvalSummary, read_eval, read_evals
from honeycomb.store.lease import Lease
from honeycomb.store.results import whole_result
from honeycomb.store.runs import (
    PROGRESS,
    STATE_FIELDS,
    RunSummary,
    StoredRun,
    StoredWorker,
    read_run,
    read_spans,
    read_summaries,
)
from honeycomb.store.sqlite import SQLiteDatabase
from honeycomb.store.writer import Action, Statement, Writer
from honeycomb.trace.spans import Span
from runtime import ConfigError, StoreError
from runtime.concurrency import waited
from runtime.config.stores import url_schema
from runtime.secrets import masked
from runtime.tools.approvals import ApprovalEntry

__all__ = [
    "STATE_FIELDS",
    "EvalSummary",
    "Lease",
    "RunStore",
    "RunSummary",
    "Statement",
    "StoredRun",
    "StoredWorker",
]

T = TypeVar("T")


class RunStore:
    """Runs in one SQLite file (created with its folder on first write), or in a
    PostgreSQL database (``postgresql://...``: its own schema made on first write).

    Args:
        where: The file, or a PostgreSQL connection URL (its ``schema`` query
            parameter names the schema the store's tables are in, ``honeycomb``
            unless it says otherwise; the password is best left out of it: libpq
            reads ``PGPASSWORD`` and ``~/.pgpass``, or see ``password_env``). Share one
            RunStore between Executors of one process.
        lease_ttl_s: How long the lease of a run of this store outlives its last
            heartbeat (renewed four times a TTL while the run goes): past it, another
            process may take the run over with ``steal=True``.
        pool_size: PostgreSQL: how many connections reads use at most (the writer
            has one more).
        password_env: PostgreSQL: the environment variable that holds the password.

    Raises:
        ConfigError: when ``lease_ttl_s`` is not a number of seconds above 0; on
            PostgreSQL, when psycopg is not installed, ``password_env`` is not set, or
            the URL is not one.
    """

    def __init__(
        self,
        where: str | Path,
        *,
        lease_ttl_s: float = 30.0,
        pool_size: int = 4,
        password_env: str | None = None,
    ) -> None:
        if not _seconds(lease_ttl_s):
            raise ConfigError(
                f"lease_ttl_s is {lease_ttl_s!r}: give how many seconds a run's lease "
                "outlives its last heartbeat, a number above 0 (30 by default)",
                field="lease_ttl_s",
            )
        self.lease_ttl_s = lease_ttl_s
        self.path: Path | None = None
        """The SQLite file (None: a PostgreSQL store)."""
        database: Database
        problem = store_problem(where)
        if problem is not None:
            raise ConfigError(problem, field="store")
        if is_url(where):
            from honeycomb.store.postgres import PostgresDatabase

            database = PostgresDatabase(
                str(where), pool_size=pool_size, password_env=password_env, lease_ttl_s=lease_ttl_s
            )
        else:
            self.path = Path(where)
            database = SQLiteDatabase(self.path)
        self._database = database
        self.where = database.where
        """What commands and errors name the store by: its file, or its URL without a
        password (``--store`` takes either)."""
        self._writer = Writer(database, lease_ttl_s)
        # Dropped unclosed (an Executor made for each request of a service), the store
        # stops its writer thread and closes its connections: nothing else would.
        weakref.finalize(self, _dropped, self._writer, database).atexit = False

    def __repr__(self) -> str:
        return f"RunStore({self.where!r})"

    def kept(self, text: str) -> str:
        """``text`` as the store keeps it, and gives it back: with lone surrogates
        replaced by U+FFFD, and on PostgreSQL, whose text holds no NUL, each NUL too."""
        return self._database.kept(text)

    def another_task(self, stored: str, task: str) -> str | None:
        """The task ``stored`` (a run's as this store keeps it), masked, when ``task`` is
        another; None when it is the same. Both as the store keeps them now: a secret
        learned since the run was stored is in its task in the clear there."""
        kept = masked(stored)
        return kept if kept != masked(self.kept(task)) else None

    @property
    def name(self) -> str:
        """A short name of the store: its file's, or its database's and schema's."""
        if self.path is not None:
            return self.path.name
        database = urlsplit(self.where).path.rsplit("/", 1)[-1]  # its query may hold a "/"
        return f"{database}?schema={url_schema(self.where)}"

    # --- writing ------------------------------------------------------------------------

    def write(self, *statements: Statement, lease: Lease | None = None) -> None:
        """Queue statements to commit together, in order with every other write (see
        :meth:`commit` to wait until they are); under ``lease``, only while it holds."""
        self._writer.put(statements, lease=lease)

    def save(self, *statements: Statement, lease: Lease | None = None) -> None:
        """Queue statements that commute with every other kind of statement (they
        touch rows nothing else writes), to be committed soon. The writer runs all
        such rows of a batch with one ``executemany`` per statement, in the order
        they were saved: this is what keeps a checkpoint every turn cheap."""
        self._writer.put(statements, merge=True, lease=lease)

    async def commit(
        self,
        *statements: Statement,
        lease: Lease | None = None,
        checkpoint: bool = False,
        urgent: bool = True,
        stopping: bool = False,
    ) -> None:
        """Write ``statements`` and return once they (and all written before) are
        committed, and with ``checkpoint``, once the file holds them (not only its WAL).
        Not ``urgent``, they are committed with whatever else arrives in the next
        moment, as writes nobody waits for are: many waiters, few transactions.
        ``stopping``: they are a stopping run's last (cancelled, Ctrl-C), which a
        server that is away does not keep waiting: the writer tries to connect again
        for a moment, not for the half minute a restart takes
        (:attr:`~honeycomb.store.writer.Write.stopping`), and they are waited for only
        as long as the server answers (:mod:`honeycomb.store.silence`).

        Raises:
            RunBusy: when ``lease`` is no longer the run's (nothing was written).
            StoreError: when the store cannot be written, or (``stopping``) its server
                answers nothing: the error says what is known of the write.
        """
        await self._submit(statements, lease, checkpoint, urgent, stopping=stopping)

    async def flush(self) -> None:
        """Return once everything written so far is committed, waiting for as long as
        the store's server answers (:mod:`honeycomb.store.silence`).

        Raises:
            StoreError: when the store's server answers nothing.
        """
        await self._submit((), None, False, True, bounded=True)

    async def take_lease(self, run_id: str, *, steal: bool = False) -> Lease:
        """Lease run ``run_id`` to this process, in one transaction (see
        :mod:`honeycomb.store.lease`); the writer renews it until :meth:`let_go`.

        Args:
            steal: Take the lease even from a process that may be alive, if its lease
                has expired. A live lease is never taken.

        Raises:
            RunBusy: when another process holds the run.
            StoreError: when the store cannot be written.
        """
        lease = _lease.new_lease(run_id)

        def take(db: Connection) -> None:
            left = _lease.take(db, lease, steal=steal, ttl_s=self.lease_ttl_s, path=self.where)
            if left is not None:  # a life that never ended: counted to its last heartbeat
                keep_cut_off(db, run_id, left)

        try:
            await self._submit(take, None, False, True)
        except StoreError:
            _lease.ended(lease)
            raise
        except BaseException:  # cancelled: the lease may be taken all the same
            _lease.ended(lease)
            self.write(self.released(lease))
            raise
        self._writer.held = self._writer.held | {lease}
        return lease

    def let_go(self, lease: Lease) -> None:
        """Stop renewing ``lease``: its run ended (and wrote :meth:`released`, or tried)."""
        self._writer.held = self._writer.held - {lease}
        _lease.ended(lease)

    async def keep_approval(
        self, run_id: str, entry: ApprovalEntry, *, lease: Lease | None = None
    ) -> None:
        """Keep a call asked about (``entry`` without a decision; one asked before is
        left as it is), or its decision; return once it is committed. A decision is
        final: of several made at once, in any processes, the first stands.

        Raises:
            AlreadyDecided: when the call was decided already (nothing was written).
            RunBusy: when ``lease`` is no longer the run's.
            StoreError: when the store cannot be written.
        """
        if entry.decision is None:
            await self.commit((ASK, asked_row(run_id, entry.pending)), lease=lease)
            return
        keep = functools.partial(keep_decision, run_id=run_id, entry=entry)
        await self._submit(keep, lease, False, True)

    async def act(self, action: Action) -> None:
        """Run ``action(db)`` in a transaction of its own, in order with every other
        write; return once it is committed (what it raises is raised here). What it
        runs is written as statements are: their parameters' secrets masked and their
        text made storable.

        Raises:
            StoreError: when the store cannot be written.
        """
        await self._submit(action, None, False, True)

    async def scrub(self) -> None:
        """Return once what was deleted before is in no file of an SQLite store either
        (its rows must not be read again: a session forgotten): the file is
        checkpointed whole and its WAL emptied, as far as readers allow.

        Raises:
            StoreError: when the store cannot be written.
        """
        await self._submit((), None, False, True, scrub=True)

    @staticmethod
    def released(lease: Lease) -> Statement:
        """The statement that deletes ``lease`` (if it is still the run's)."""
        return (_lease.RELEASE, (lease.run_id, lease.owner))

    async def _submit(
        self,
        work: tuple[Statement, ...] | Action,
        lease: Lease | None,
        checkpoint: bool,
        urgent: bool,
        *,
        scrub: bool = False,
        stopping: bool = False,
        bounded: bool = False,
    ) -> None:
        """Queue a write and wait for it (``stopping`` or ``bounded``: for as long as
        the store's server answers)."""
        if not self._writer.running:
            await self.open()  # connecting to a server takes a while: not in the loop
        # Told by the writer with one call into the loop for a whole batch of waiters.
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._writer.put(
            work,
            done=waiter,
            lease=lease,
            checkpoint=checkpoint,
            scrub=scrub,
            urgent=urgent,
            stopping=stopping,
        )
        if stopping or bounded:
            await self._answered(waiter)
        else:
            await waiter

    async def _answered(self, waiter: asyncio.Future[None]) -> None:
        """``await waiter`` for as long as the store's server answers (:mod:`.silence`).

        Raises:
            StoreError: the write's own error, or, once the server answered nothing,
                what is known of the write (the writer still holds it).
        """
        try:
            for wait in silence.waits(self._database, writing.STOPPING_S):
                if await waited(waiter, wait):
                    break
            else:
                sent, within = self._writer.sent(waiter), self._database.knock().window
                raise silence.unanswered(self.where, sent=sent, within=within)
        finally:
            if not waiter.done():
                waiter.cancel()  # nobody to tell: the write stands (see batch._tell)
        waiter.result()

    def close(self) -> None:
        """Commit what is queued, checkpoint the file, stop the writer thread and close
        the connections. A server that is away is waited for a moment, as by a run
        that stops, and a silent one no longer than it answers: what the writer could
        not write by then is not written, should the server answer later (see
        :meth:`~honeycomb.store.writer.Writer.stop`)."""
        self._writer.stop()
        self._database.close()

    async def aclose(self) -> None:
        """:meth:`close`, in a worker thread (it waits for the writer to commit what is
        queued). A later :meth:`open` (a run's) starts it again."""
        await anyio.to_thread.run_sync(self.close)

    async def open(self) -> None:
        """Open the file or database (creating the store) in a worker thread, so a run
        learns at its start, not its end, that the store cannot be used.

        Raises:
            StoreError: when it cannot be opened or is not a run store.
        """
        if not self._writer.running:
            await anyio.to_thread.run_sync(self._writer.start)

    async def keep_eval(
        self,
        eval_id: str,
        name: str,
        started_at: float,
        passed: bool,
        report: bytes,
        *,
        interrupted: bool = False,
    ) -> None:
        """Keep an eval's ``report`` (JSON) by its id, and return once it is committed
        (an eval of the same id is replaced); ``interrupted``: it was stopped before
        every run was made.

        Raises:
            StoreError: when the store cannot be written.
        """
        text = report.decode()
        row = (eval_id, name, started_at, int(passed), text, int(interrupted))
        await self.commit((KEEP_EVAL, row))

    # --- reading ------------------------------------------------------------------------

    def evals(self, limit: int = 50) -> list[EvalSummary]:
        """The latest evals, newest first (a quick read; fine to call from a CLI)."""
        return self._reading(functools.partial(read_evals, limit=limit), [])

    def eval_report(self, eval_id: str) -> str | None:
        """The report of eval ``eval_id`` as JSON, or None when the store has none."""
        return self._reading(functools.partial(read_eval, eval_id=eval_id), None)

    async def load(self, run_id: str) -> StoredRun | None:
        """The run ``run_id``, or None if the store does not have it."""
        return await self._read(self._load, run_id)

    async def summary(self, run_id: str) -> RunSummary | None:
        """Run ``run_id``'s line, as :meth:`find`, from async code."""
        return await self._read(self.find, run_id)

    async def _read(self, read: Callable[[str], T], run_id: str) -> T:
        """``read(run_id)`` in a worker thread, after what was written is committed."""
        if self._writer.started:
            await self.flush()
        return await anyio.to_thread.run_sync(read, run_id)

    async def reading(self, read: Callable[[Connection], T], empty: T) -> T:
        """:meth:`read_now`, from async code: in a worker thread, after what was
        written is committed."""
        if self._writer.started:
            await self.flush()
        return await anyio.to_thread.run_sync(self._reading, read, empty)

    def read_now(self, read: Callable[[Connection], T], empty: T) -> T:
        """``read(db)`` on a read-only connection, in one snapshot (``empty``: no store
        there yet); a quick read, fine to call from a CLI."""
        return self._reading(read, empty)

    def runs(self, limit: int = 50) -> list[RunSummary]:
        """The latest runs, newest first (a quick read; fine to call from a CLI)."""
        return self._summaries("ORDER BY started_at DESC LIMIT ?", (limit,))

    def find(self, run_id: str) -> RunSummary | None:
        """Run ``run_id``'s line (its task, source, status ...), or None."""
        found = self._summaries("WHERE run_id = ?", (run_id,))
        return found[0] if found else None

    def _summaries(self, where: str, params: tuple[Any, ...]) -> list[RunSummary]:
        return self._reading(functools.partial(read_summaries, where=where, params=params), [])

    def spans(self, run_id: str) -> list[Span]:
        """The spans kept for run ``run_id`` (every life of it), by start time."""

        found: list[Span] = self._reading(functools.partial(read_spans, run_id=run_id), [])
        return sorted(found, key=lambda s: s.start)

    def progress(self, run_id: str) -> tuple[int, ...]:
        """Numbers that change whenever run ``run_id`` makes progress (batches of spans
        kept, worker rows updated, transcript rows and journal entries written): what a
        page watching the run compares to know when to read it again."""

        def read(db: Connection) -> tuple[int, ...]:
            found = db.execute(PROGRESS, (run_id,) * 4).fetchone()
            return tuple(int(n or 0) for n in found)

        return self._reading(read, ())

    def _load(self, run_id: str) -> StoredRun | None:
        stored = self._reading(functools.partial(read_run, run_id=run_id), None)
        if stored is None or stored.result is None:
            return stored

        def damaged(subtask: str) -> StoreError:
            return StoreError(
                f"run {run_id!r} ended {stored.status}, but the store holds no outcome of "
                f"its subtask {subtask!r}: the store is damaged",
                path=self.where,
            )

        outcomes = {name: worker.result for name, worker in stored.workers.items()}
        result = whole_result(stored.result, outcomes, damaged=damaged)
        return msgspec.structs.replace(stored, result=result)

    def approvals(self, run_id: str) -> list[ApprovalEntry]:
        """The calls of run ``run_id`` that asked for approval, decided or not, in
        the order they asked (a quick read; fine to call from a CLI)."""
        return self._reading(functools.partial(read_approvals, run_id=run_id), [])

    async def approvals_of(self, run_id: str) -> list[ApprovalEntry]:
        """:meth:`approvals`, from async code, after what was written is committed."""
        return await self._read(self.approvals, run_id)

    # --- connections --------------------------------------------------------------------

    def _reading(self, read: Callable[[Connection], T], empty: T) -> T:
        """``read(db)`` in one snapshot of the store (``empty``: no store there yet)."""
        return self._database.read(read, empty)


def _dropped(writer: Writer, database: Database) -> None:
    """A store nothing refers to any more (its RunStore collected unclosed): its writer
    thread ends once it has committed what is queued, and its readers' connections close,
    each in a thread of its own, not in the one that dropped it (an event loop's)."""
    writer.stop_soon()
    threading.Thread(target=database.close, name="honeycomb-store-close", daemon=True).start()


def _seconds(value: object) -> bool:
    """Whether ``value`` is a finite number of seconds above 0."""
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < math.inf
