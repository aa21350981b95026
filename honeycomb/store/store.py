"""``RunStore``: runs kept in one SQLite file, so a crashed run can be resumed.

The store holds each run (task, plan, status, result), each worker's conversation
after every turn, each finished worker's result, the journal of side-effecting tool
calls (:mod:`runtime.journal`) and the lease of each run under way
(:mod:`honeycomb.store.lease`). It is in WAL mode, checkpointed when a run ends and
when it closes (so a copy of the ``.db`` alone holds every run that ended). Only a
Honeycomb store, or a new or empty file, is ever written to; reading creates no file.

Writes never block the event loop: one writer thread per store commits them in
batches, in order (:mod:`honeycomb.store.writer`). Only what a guarantee rests on is
awaited: a side effect's intent before it runs, its outcome after, a worker's result
before it is reported, and the end of the run; each is committed only while the run's
lease is still its own.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import msgspec

from honeycomb.store import lease as _lease
from honeycomb.store.approvals import read_approvals
from honeycomb.store.lease import Lease
from honeycomb.store.results import whole_result
from honeycomb.store.schema import columns, reader
from honeycomb.store.writer import Action, Statement, Writer
from honeycomb.trace.spans import Span
from runtime import JournalEntry, StoreError
from runtime.approvals import ApprovalEntry
from runtime.value import Value

_SPANS = msgspec.json.Decoder(list[Span])
"""A batch of stored spans: a JSON array of spans, each an array of its fields."""

__all__ = [
    "STATE_FIELDS", "Lease", "RunStore", "RunSummary", "Statement", "StoredRun", "StoredWorker",
]  # fmt: skip

T = TypeVar("T")


class RunSummary(Value, frozen=True, gc=False, kw_only=True):
    """One line of ``honeycomb runs``.

    ``status`` is how the run ended (``ok``, ``partial``, ``failed``, ``over_budget``,
    ``interrupted``, ``waiting`` for approvals), or ``running`` while a live process
    carries it on: one stored as running whose process is gone, or whose lease
    expired, is ``interrupted``. Of a run under way, the counters are what its workers
    have spent so far (planning not included); of one that ended, all it spent.
    ``cached_input_tokens`` are those of the input tokens the providers read from their
    caches.
    """

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
    cached_input_tokens: int = 0

    @property
    def duration_s(self) -> float | None:
        return None if self.finished_at is None else self.finished_at - self.started_at


_SUMMARY = RunSummary.__struct_fields__  # the runs table's columns of the same names

STATE_FIELDS = (
    "task", "messages", "previous", "turn", "input_tokens", "output_tokens", "cost",
    "tool_calls", "nudged", "output_attempts", "wrapped_up", "repeats", "cached_input_tokens",
    "reasoning_tokens", "summary", "summarized", "compactions", "context_tokens",
    "context_messages",
)  # fmt: skip
"""A worker's saved loop state: its columns in the ``workers`` table."""


class StoredWorker(Value, frozen=True, kw_only=True):
    """What a store holds of one worker: its result once finished, else its last
    saved state (the :data:`STATE_FIELDS`) and its messages: ``(seq, JSON array)``
    rows in order, each holding the messages from index ``seq`` on (the lists are
    filled as the store is read)."""

    status: str
    result: str | None
    state: dict[str, Any] | None
    messages: list[tuple[int, str]] = msgspec.field(default_factory=list)
    journal: dict[tuple[int, str], JournalEntry] = msgspec.field(default_factory=dict)
    approvals: dict[tuple[int, str], ApprovalEntry] = msgspec.field(default_factory=dict)


class StoredRun(Value, frozen=True, kw_only=True):
    """Everything a store holds of one run."""

    run_id: str
    task: str
    status: str
    source: str | None
    plan: str | None
    result: str | None
    workers: dict[str, StoredWorker]
    planned_by: str | None = None
    """``given`` (the run was given its subtasks), ``planner``, or None: not known (a
    store of schema 3)."""


class RunStore:
    """Runs in one SQLite file (created with its folder on first write).

    Args:
        path: The file. Share one RunStore between Executors of one process.
        lease_ttl_s: How long the lease of a run of this store outlives its last
            heartbeat (renewed four times a TTL while the run goes): past it, another
            process may take the run over with ``steal=True``.
    """

    def __init__(self, path: str | Path, *, lease_ttl_s: float = 30.0) -> None:
        self.path = Path(path)
        self.lease_ttl_s = lease_ttl_s
        self._writer = Writer(self.path, lease_ttl_s)

    def __repr__(self) -> str:
        return f"RunStore({str(self.path)!r})"

    # --- writing ------------------------------------------------------------------------

    def write(self, *statements: Statement, lease: Lease | None = None) -> None:
        """Queue statements to commit together, in order with every other write (see
        :meth:`commit` to wait until they are); under ``lease``, only while it holds."""
        self._writer.put((statements, None, False, lease, False, False))

    def save(self, *statements: Statement, lease: Lease | None = None) -> None:
        """Queue statements that commute with every other kind of statement (they
        touch rows nothing else writes), to be committed soon. The writer runs all
        such rows of a batch with one ``executemany`` per statement, in the order
        they were saved: this is what keeps a checkpoint every turn cheap."""
        self._writer.put((statements, None, True, lease, False, False))

    async def commit(
        self,
        *statements: Statement,
        lease: Lease | None = None,
        checkpoint: bool = False,
        urgent: bool = True,
    ) -> None:
        """Write ``statements`` and return once they (and all written before) are
        committed, and with ``checkpoint``, once the file holds them (not only its WAL).
        Not ``urgent``, they are committed with whatever else arrives in the next
        moment, as writes nobody waits for are: many waiters, few transactions.

        Raises:
            RunBusy: when ``lease`` is no longer the run's (nothing was written).
            StoreError: when the store cannot be written.
        """
        await self._submit(statements, lease, checkpoint, urgent)

    async def flush(self) -> None:
        """Return once everything written so far is committed."""
        await self.commit()

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
        take = functools.partial(
            _lease.take, lease=lease, steal=steal, ttl_s=self.lease_ttl_s, path=str(self.path)
        )
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
    ) -> None:
        # Told by the writer with one call into the loop for a whole batch of waiters.
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._writer.put((work, waiter, False, lease, checkpoint, urgent))
        await waiter

    def close(self) -> None:
        """Commit what is queued, checkpoint the file and stop the writer thread."""
        self._writer.stop()

    async def open(self) -> None:
        """Open the file (creating it) in a worker thread, so a run learns at its
        start, not its end, that the store cannot be used.

        Raises:
            StoreError: when the file cannot be opened or is not a run store.
        """
        if not self._writer.running:
            await anyio.to_thread.run_sync(self._writer.start)

    # --- reading ------------------------------------------------------------------------

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

    def runs(self, limit: int = 50) -> list[RunSummary]:
        """The latest runs, newest first (a quick read; fine to call from a CLI)."""
        return self._summaries("ORDER BY started_at DESC LIMIT ?", (limit,))

    def find(self, run_id: str) -> RunSummary | None:
        """Run ``run_id``'s line (its task, source, status ...), or None."""
        found = self._summaries("WHERE run_id = ?", (run_id,))
        return found[0] if found else None

    def _summaries(self, where: str, params: tuple[Any, ...]) -> list[RunSummary]:
        def read(db: sqlite3.Connection) -> list[RunSummary]:
            selected = columns(db, "runs", _SUMMARY)
            rows = db.execute(f"SELECT {selected} FROM runs {where}", params).fetchall()
            found = [
                RunSummary(**dict(zip(RunSummary.__struct_fields__, row, strict=True)))
                for row in rows
            ]
            return [_under_way(db, run) if run.status == "running" else run for run in found]

        return self._reading(read, [])

    def spans(self, run_id: str) -> list[Span]:
        """The spans kept for run ``run_id`` (every life of it), by start time."""

        def read(db: sqlite3.Connection) -> list[Span]:
            rows = db.execute("SELECT spans FROM spans WHERE run_id = ?", (run_id,)).fetchall()
            return [span for (batch,) in rows for span in _SPANS.decode(batch)]

        found: list[Span] = self._reading(read, [])
        return sorted(found, key=lambda s: s.start)

    def progress(self, run_id: str) -> tuple[int, ...]:
        """Numbers that change whenever run ``run_id`` makes progress (batches of spans
        kept, worker rows updated, transcript rows and journal entries written): what a
        page watching the run compares to know when to read it again."""

        def read(db: sqlite3.Connection) -> tuple[int, ...]:
            found = db.execute(_PROGRESS, (run_id,) * 4).fetchone()
            return tuple(int(n or 0) for n in found)

        return self._reading(read, ())

    def _load(self, run_id: str) -> StoredRun | None:
        stored = self._reading(functools.partial(_load, run_id=run_id), None)
        if stored is None or stored.result is None:
            return stored

        def damaged(subtask: str) -> StoreError:
            return StoreError(
                f"run {run_id!r} ended {stored.status}, but the store holds no outcome of "
                f"its subtask {subtask!r}: the store is damaged",
                path=str(self.path),
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

    def _reading(self, read: Callable[[sqlite3.Connection], T], empty: T) -> T:
        """``read(db)`` on a read-only connection, in one snapshot (``empty``: no store
        there yet). A store no process has open is read as it is, creating no file;
        if a run opens it meanwhile, it is read again as a store in use (see
        :func:`~honeycomb.store.schema.reader`)."""
        for shared in (False, True):
            opened = reader(self.path, shared=shared)
            if opened is None:
                return empty
            db, unchanged = opened
            try:
                db.execute("BEGIN")  # one snapshot for the whole read
                found = read(db)
            except sqlite3.Error as exc:
                if unchanged is not None and not unchanged():
                    continue  # read while it changed: read it again
                raise StoreError(f"cannot read the run store: {exc}", path=str(self.path)) from exc
            finally:
                db.close()
            if unchanged is None or unchanged():
                return found
        raise AssertionError("unreachable: a shared read is never read again")  # pragma: no cover


class _Spent(Value, frozen=True, gc=False):
    """What a finished worker's stored result says it spent."""

    input_tokens: int = 0
    output_tokens: int = 0
    model_calls: int = 0
    tool_calls: int = 0
    cost: float = 0.0
    cached_input_tokens: int = 0


class _Worker(Value, frozen=True, gc=False):
    usage: _Spent = _Spent()


class _Outcome(Value, frozen=True, gc=False):
    worker: _Worker | None = None


_OUTCOME = msgspec.json.Decoder(_Outcome)


def _under_way(db: sqlite3.Connection, run: RunSummary) -> RunSummary:
    """A run stored as running (its counters are written when it ends): interrupted
    if no live process carries it on any more (killed, or hung past its lease), and
    what its workers have spent so far, as the store knows it."""
    spent = _Spent()
    counted = columns(
        db, "workers", ("turn", "compactions", "input_tokens", "output_tokens", "tool_calls",
                        "cost", "cached_input_tokens"),
    )  # fmt: skip
    for result, *counters in db.execute(
        f"SELECT result, {counted} FROM workers WHERE run_id = ?", (run.run_id,)
    ):
        if result is not None:  # finished: its result says it all
            worker = _OUTCOME.decode(result).worker
            done = worker.usage if worker is not None else _Spent()
        else:  # its last saved turn
            turns, summaries, given, taken, tools, cost, cached = (c or 0 for c in counters)
            done = _Spent(
                model_calls=turns + summaries, input_tokens=given, output_tokens=taken,
                tool_calls=tools, cost=float(cost), cached_input_tokens=cached,
            )  # fmt: skip
        spent = _Spent(
            input_tokens=spent.input_tokens + done.input_tokens,
            output_tokens=spent.output_tokens + done.output_tokens,
            model_calls=spent.model_calls + done.model_calls,
            tool_calls=spent.tool_calls + done.tool_calls,
            cost=spent.cost + done.cost,
            cached_input_tokens=spent.cached_input_tokens + done.cached_input_tokens,
        )
    return msgspec.structs.replace(
        run,
        status="running" if _lease.carried_on(db, run.run_id) else "interrupted",
        **msgspec.structs.asdict(spent),
    )


_PROGRESS = (
    "SELECT (SELECT count(*) FROM spans WHERE run_id = ?), "
    "(SELECT CAST(coalesce(sum(updated_at), 0) * 1000 AS INTEGER) FROM workers WHERE run_id = ?), "
    "(SELECT count(*) FROM messages WHERE run_id = ?), "
    "(SELECT count(*) FROM journal WHERE run_id = ?)"
)


def _load(db: sqlite3.Connection, run_id: str) -> StoredRun | None:
    selected = columns(db, "runs", ("task", "status", "source", "plan", "result", "planned_by"))
    row = db.execute(f"SELECT {selected} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        return None
    workers: dict[str, StoredWorker] = {}
    state_columns = columns(db, "workers", STATE_FIELDS)
    for name, status, result, *state in db.execute(
        f"SELECT worker, status, result, {state_columns} FROM workers WHERE run_id = ?",
        (run_id,),
    ):
        saved = dict(zip(STATE_FIELDS, state, strict=True))
        kept = saved if state[0] else None
        workers[name] = StoredWorker(status=status, result=result, state=kept)
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
        found = workers.setdefault(name, StoredWorker(status="running", result=None, state=None))
        found.journal[turn, call_id] = JournalEntry(
            tool=tool, arguments=arguments, status=status, content=content or ""
        )
    for entry in read_approvals(db, run_id):
        name = entry.pending.worker
        found = workers.setdefault(name, StoredWorker(status="running", result=None, state=None))
        found.approvals[entry.pending.turn, entry.pending.call_id] = entry
    task, status, source, plan, result, planned_by = row
    return StoredRun(
        run_id=run_id,
        task=task,
        status=status,
        source=source,
        plan=plan,
        result=result,
        workers=workers,
        planned_by=planned_by,
    )
