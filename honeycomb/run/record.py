"""What one run writes to its :class:`~honeycomb.store.RunStore`.

:class:`RunRecord` is one run's handle on the store: it holds the run's lease, and
every write it makes is under it. Each subtask's worker gets a
:class:`~honeycomb.run.worker_record.WorkerRecord`, which is the loop's checkpoint, the
dispatcher's journal of side-effecting calls, and its log of calls waiting for a
person's approval. What a resumed run reads back
is :mod:`honeycomb.run.restore`'s.

Each life of the run (a ``run`` or ``resume`` that carries it on) has a row of the
``lives`` table, kept as the run's budget spends (:mod:`honeycomb.run.spending`): a
resumed run's budget starts from all that its earlier lives spent, a crashed one's
included.

A worker that failed because the store did (a full disk, a lock, a lost lease) has not
finished: its result is not kept as final, and a resumed run runs it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from honeycomb.run.phase_names import is_phase_name
from honeycomb.run.plan import Plan
from honeycomb.run.result import RunResult, SubtaskResult
from honeycomb.run.spending import LifeSpending
from honeycomb.run.worker_record import WorkerRecord
from honeycomb.store import RunStore
from honeycomb.store.store import Lease, Statement
from honeycomb.trace.spans import Span
from runtime import (
    Budget,
    JournalEntry,
    NotStarted,
    OnUnknown,
    StoreError,
    Usage,
)
from runtime.concurrency import Bell
from runtime.text import encode_json, model_json
from runtime.tools.approvals import ApprovalEntry

if TYPE_CHECKING:
    from honeycomb.run.restore import Resumed

__all__ = ["RunRecord", "store_failure"]


class RunRecord:
    """One run's writes to the store, under the run's lease (see :meth:`take`)."""

    def __init__(self, store: RunStore, run_id: str, on_unknown: OnUnknown = "tell") -> None:
        self.store = store
        self.run_id = run_id
        self.on_unknown: OnUnknown = on_unknown
        self.lease: Lease | None = None
        self.life = 1  # this life's number
        self.started_at = 0.0  # when the run's first life started
        self.bell = Bell()  # rung as this process records a decision of the run
        self._spending: LifeSpending | None = None
        self._journals: Mapping[str, Mapping[tuple[int, str], JournalEntry]] = {}
        self._approvals: dict[str, dict[tuple[int, str], ApprovalEntry]] = {}
        self._spans: list[Span] = []
        self._spans_due: asyncio.TimerHandle | None = None  # writes what waits
        self._workers: dict[str, WorkerRecord] = {}  # running, by the name kept under
        self._unwritten: list[Statement] = []  # results the store did not take, to retry
        self._rerun: set[str] = set()  # subtasks that failed because the store did

    async def take(self, *, steal: bool = False) -> None:
        """Take the run's lease: from now on this process carries the run on.

        Raises:
            RunBusy: when another process does.
        """
        self.lease = await self.store.take_lease(self.run_id, steal=steal)

    async def release(self) -> None:
        """Let go of the lease of a run that ends without :meth:`finished`. Never
        raises: the error that ends the run is the one to see, and a lease the store
        could not delete is free anyway to this process's next run, and to any other
        once this process is gone."""
        if self._spending is not None:
            self._spending.stop()
        lease = self.lease
        if lease is not None:
            try:
                with contextlib.suppress(StoreError):
                    await self.store.commit(self.store.released(lease))
            finally:
                self.store.let_go(lease)

    def started(
        self,
        task: str,
        source: str | None,
        *,
        resumed: Resumed | None,
        budget: Budget | None,
        held: str | None = None,
    ) -> None:
        """Start this life of the run: the run's row (a resumed run's is marked running
        again) and the life's; given the run's ``budget`` (not a sub-run's, which spends
        its caller's), what it spends is kept in the life's row as it spends it.
        ``held``: what the run holds back until its output guards pass its answer
        (``workers``), which every view of it honours (this life's guards say it)."""
        now = time.time()
        if resumed is not None:
            self.life, self.started_at = resumed.life, resumed.started_at
            sql = (
                "UPDATE runs SET status = 'running', finished_at = NULL, held = ? WHERE run_id = ?"
            )
            self.store.write((sql, (held, self.run_id)), lease=self.lease)
        else:
            self.life, self.started_at = 1, now
            self.store.write(
                (
                    "INSERT INTO runs (run_id, task, status, source, started_at, held) "
                    "VALUES (?, ?, 'running', ?, ?, ?)",
                    (self.run_id, task, source, now, held),
                ),
                lease=self.lease,
            )
        if budget is not None:
            self._spending = LifeSpending(self.store, self.run_id, self.life, budget, self.lease)

    def spent_so_far(self) -> None:
        """Write what the run has spent, if it spent since it was last written, and the
        spans that have ended: before a write the run waits for (see
        :mod:`honeycomb.run.spending`). A crash after that write then loses neither
        what the answers it keeps cost nor their spans: a life's trace is as durable as
        its spending, however early in the life the process dies."""
        self._write_spans()
        if self._spending is not None:
            self._spending.flush()

    async def planned(self, plan: Plan, *, given: bool) -> None:
        """Keep the plan, and whether the run was ``given`` it (its subtasks) or its
        planner made it, with what the run has spent; return once it is committed (its
        workers start then: a resumed run never plans again what they ran for).

        Raises:
            RunBusy: when the run was taken over.
            StoreError: when the store cannot be written.
        """
        self.spent_so_far()
        await self.store.commit(
            (
                "UPDATE runs SET plan = ?, workers = ?, planned_by = ? WHERE run_id = ?",
                (
                    model_json(plan),
                    len(plan.subtasks),
                    "given" if given else "planner",
                    self.run_id,
                ),
            ),
            lease=self.lease,
        )

    def worker(self, name: str, resumed_from: int = 0) -> WorkerRecord:
        """The checkpoint, journal and approval log of subtask ``name``'s worker, or of
        the nested worker ``name`` (``CALLER/CALL``), whose calls wait in the store
        as its caller's do: not under the planner or the aggregator."""
        waits = not is_phase_name(name.partition("/")[0])
        return self._made(name, resumed_from, waits=waits)

    def phase_worker(self, name: str, resumed_from: int = 0) -> WorkerRecord:
        """The checkpoint, journal and approval log of the planner's or the aggregator's
        worker kept under ``name`` (:mod:`honeycomb.run.phase_workers`), a caller whose
        agents are kept too until :meth:`phase_ended`. Its calls cannot wait in the
        store."""
        return self._made(name, resumed_from, phase=True)

    def _made(self, name: str, resumed_from: int, **options: bool) -> WorkerRecord:
        """A worker's record, its earlier lives' journal and decisions in it."""
        record = WorkerRecord(self, name, self._journals.get(name, {}), resumed_from, **options)
        record.decisions.update(self._approvals.get(name, {}))
        self._workers[name] = record
        return record

    def phase_ended(self, name: str) -> None:
        """The planner's or the aggregator's worker kept under ``name`` has ended."""
        self._workers.pop(name, None)

    def phase_finished(self, outcome: SubtaskResult) -> None:
        """Keep the result of the planner's or the aggregator's worker (``outcome``,
        under the name it is kept by) once final, as a subtask's is: a resumed run reads
        it back rather than ask again. One the store failed, or that did not end (cut
        off, over budget), is not: a resumed run continues it from its checkpoint.

        Queued, not waited for: no guarantee rests on it (a run whose process dies
        before it is committed continues the worker from its checkpoint, its calls
        answered from the journal), and a store that fails to write it fails nothing.
        The spans that ended go before it (:meth:`spent_so_far`), as a subtask's do.
        """
        if finished(outcome) and not unfinished(_raised(outcome)):
            self.spent_so_far()
            self.store.write(self._result(outcome), lease=self.lease)

    def keeps(self, name: str) -> bool:
        """Whether the worker kept under ``name`` is kept turn by turn now as a caller
        whose agents (``agent:`` tools) are kept too: a subtask's, a nested worker's,
        the planner's or the aggregator's."""
        return name in self._workers

    def use_journals(self, journals: Mapping[str, Mapping[tuple[int, str], JournalEntry]]) -> None:
        """Journal entries of an earlier life of this run, by worker."""
        self._journals = journals

    def use_approvals(
        self, approvals: Mapping[str, Mapping[tuple[int, str], ApprovalEntry]]
    ) -> None:
        """Calls asked about (and decisions) of earlier lives of this run, by worker."""
        self._approvals = {worker: dict(entries) for worker, entries in approvals.items()}

    def decided(self, entries: Iterable[ApprovalEntry]) -> None:
        """Decisions recorded while the run goes (``Executor.decide``): a worker's record
        made from now on reads them (a nested worker's, as its caller goes on)."""
        for entry in entries:
            pending = entry.pending
            self._approvals.setdefault(pending.worker, {})[pending.turn, pending.call_id] = entry

    def span(self, span: Span) -> None:
        """Keep a span that ended (see :mod:`honeycomb.trace.spans`); spans are written in
        batches, at least once a second while they come (so a page watching the run
        sees it go: ``honeycomb serve``), with every write the run waits for (see
        :meth:`spent_so_far`), and at the end of the run."""
        if not self._spans:
            loop = asyncio.get_running_loop()
            self._spans_due = loop.call_later(_SPAN_EVERY_S, self._write_spans)
        self._spans.append(span)
        if len(self._spans) >= _SPAN_BATCH:
            self._write_spans()

    def _write_spans(self) -> None:
        if self._spans_due is not None:
            self._spans_due.cancel()
            self._spans_due = None
        if self._spans:
            batch, self._spans = self._spans, []
            text = encode_json(batch).decode()
            self.store.save((_SAVE_SPANS, (self.run_id, text)), lease=self.lease)

    async def subtask_finished(self, outcome: SubtaskResult, *, again: bool = False) -> None:
        """Keep a subtask's result; return once it is committed (or the store failed,
        or the run was cancelled meanwhile: then it is written again with the end of the
        run). With ``again``, its worker
        failed as it started, for want of what it needs (its MCP tools): it has not
        finished, and a resumed run starts it again, as one the store failed."""
        name = outcome.subtask.id
        self._workers.pop(name, None)
        self.spent_so_far()
        if not finished(outcome):
            return  # not finished: a resumed run continues it
        if again or unfinished(_raised(outcome)):
            self._rerun.add(name)  # not finished either: a resumed run runs it again
            return
        kept = self._result(outcome)
        try:
            # With the results of the workers that end with it: one transaction for all.
            await self.store.commit(kept, lease=self.lease, urgent=False)
        except StoreError:
            self._unwritten.append(kept)
        except asyncio.CancelledError:
            # The run stops as it is written: kept with its end (again, if it was
            # committed already), not lost to a resumed run that would redo its work.
            self._unwritten.append(kept)
            raise

    def _result(self, outcome: SubtaskResult) -> Statement:
        """What keeps ``outcome`` in its worker's row (a subtask's, or the planner's or
        the aggregator's under the name it is kept by), read back by a resumed run."""
        row = (self.run_id, outcome.subtask.id, outcome.status, model_json(outcome), time.time())
        return _SAVE_RESULT, row

    async def finished(
        self, status: str, result: RunResult | None, usage: Usage, error: str | None
    ) -> None:
        """Record how the run ended and let go of its lease; return once that (and every
        span) is committed and checkpointed.

        A run some of whose workers the store failed keeps no result: a resume runs them
        again, and aggregates anew. The result is kept without the outcomes of the
        subtasks that finished: each is in its worker's row already (reading the run
        puts them back: :mod:`honeycomb.store.results`).
        """
        self._write_spans()
        if self._spending is not None:
            self._spending.end()  # the last word on what it spent, with the end of the run
        kept = None
        if result is not None and not self._rerun:
            unfinished = {k: v for k, v in result.subtasks.items() if not finished(v)}
            kept = model_json(result.model_copy(update={"subtasks": unfinished}))
        ended = (
            "UPDATE runs SET status = ?, finished_at = ?, result = ?, error = ?, "
            "model_calls = ?, input_tokens = ?, output_tokens = ?, tool_calls = ?, cost = ?, "
            "cached_input_tokens = ? WHERE run_id = ?",
            (
                status,
                time.time(),
                kept,
                error,
                usage.model_calls,
                usage.input_tokens,
                usage.output_tokens,
                usage.tool_calls,
                usage.cost,
                usage.cached_input_tokens,
                self.run_id,
            ),
        )
        lease = self.lease
        released = [self.store.released(lease)] if lease is not None else []
        try:
            await self.store.commit(
                *self._unwritten,
                ended,
                *released,
                lease=lease,
                checkpoint=True,
                # Its process stops (cancelled, Ctrl-C): a server that is away is waited
                # for a moment, not the half minute a restart takes.
                stopping=status == "interrupted",
            )
        finally:
            if lease is not None:
                self.store.let_go(lease)


def finished(outcome: SubtaskResult) -> bool:
    """Whether a subtask's outcome is final, and so kept in its worker's row: not one a
    resumed run continues (cancelled, over its budget, waiting for a person)."""
    return outcome.status not in ("cancelled", "over_budget", "waiting")


def _raised(outcome: SubtaskResult) -> BaseException | None:
    """What the outcome's worker failed of, if it failed."""
    return outcome.worker.exception if outcome.worker is not None else None


def unfinished(exc: BaseException | None) -> bool:
    """Whether a worker that failed of ``exc`` has not finished, and a resumed run runs
    it again from where it was: the store failed it, or a nested worker of its, left
    paused by an earlier life, could not start again (:class:`NotStarted`)."""
    return isinstance(exc, NotStarted) or store_failure(exc) is not None


def store_failure(exc: BaseException | None) -> StoreError | None:
    """The store's error that ``exc`` is or holds (in exception groups), if any: what
    a worker failed of when the store failed it."""
    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = store_failure(inner)
            if found is not None:
                return found
    return None


_SAVE_SPANS = "INSERT INTO spans (run_id, spans) VALUES (?, ?)"

_SPAN_BATCH = 256
_SPAN_EVERY_S = 1.0
_SAVE_RESULT = (
    "INSERT INTO workers (run_id, worker, status, result, updated_at) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id, worker) DO UPDATE SET "
    "status = excluded.status, result = excluded.result, "
    "updated_at = excluded.updated_at"
)
