"""What one run writes to its :class:`~honeycomb.store.RunStore`.

:class:`RunRecord` is one run's handle on the store: it holds the run's lease, and
every write it makes is under it. Each subtask's worker gets a :class:`WorkerRecord`,
which is the loop's checkpoint (new messages and the counters after every turn), the
dispatcher's journal of side-effecting calls, and its log of calls waiting for a
person's approval. What a resumed run reads back
is :mod:`honeycomb.run.restore`'s.

A worker that failed because the store did (a full disk, a lock, a lost lease) has not
finished: its result is not kept as final, and a resumed run runs it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable, Mapping
from typing import Any

from honeycomb.run.plan import Plan
from honeycomb.run.result import RunResult, SubtaskResult
from honeycomb.store import RunStore
from honeycomb.store.store import STATE_FIELDS, Lease, Statement
from honeycomb.trace.spans import Span
from runtime import (
    AlreadyDecided,
    AssistantMessage,
    JournalEntry,
    Message,
    OnUnknown,
    StoreError,
    ToolCall,
    ToolMessage,
    Usage,
    dump_messages_json,
)
from runtime._text import encode_json, model_json
from runtime.approvals import ApprovalEntry
from runtime.journal import arguments_text
from workers import LoopState

__all__ = ["RunRecord", "WorkerRecord", "approval_log", "store_failure"]

_SAVE_MESSAGES = (
    "INSERT OR REPLACE INTO messages (run_id, worker, seq, messages) VALUES (?, ?, ?, ?)"
)
_SAVE_STATE = (
    f"INSERT INTO workers (run_id, worker, status, updated_at, {', '.join(STATE_FIELDS)}) "
    f"VALUES (?, ?, 'running', ?, {', '.join('?' * len(STATE_FIELDS))}) "
    "ON CONFLICT (run_id, worker) DO UPDATE SET updated_at = excluded.updated_at, "
    + ", ".join(f"{name} = excluded.{name}" for name in STATE_FIELDS)
)
"""A worker's checkpoint: its loop state (the :data:`STATE_FIELDS`), each turn."""


class RunRecord:
    """One run's writes to the store, under the run's lease (see :meth:`take`)."""

    def __init__(self, store: RunStore, run_id: str, on_unknown: OnUnknown = "tell") -> None:
        self.store = store
        self.run_id = run_id
        self.on_unknown: OnUnknown = on_unknown
        self.lease: Lease | None = None
        self._journals: Mapping[str, Mapping[tuple[int, str], JournalEntry]] = {}
        self._approvals: dict[str, dict[tuple[int, str], ApprovalEntry]] = {}
        self._spans: list[Span] = []
        self._spans_due: asyncio.TimerHandle | None = None  # writes what waits
        self._workers: dict[str, WorkerRecord] = {}  # running, by subtask
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
        lease = self.lease
        if lease is not None:
            try:
                with contextlib.suppress(StoreError):
                    await self.store.commit(self.store.released(lease))
            finally:
                self.store.let_go(lease)

    def started(self, task: str, source: str | None, *, resumed: bool) -> None:
        if resumed:
            sql = "UPDATE runs SET status = 'running', finished_at = NULL WHERE run_id = ?"
            self.store.write((sql, (self.run_id,)), lease=self.lease)
            return
        self.store.write(
            (
                "INSERT INTO runs (run_id, task, status, source, started_at) "
                "VALUES (?, ?, 'running', ?, ?)",
                (self.run_id, task, source, time.time()),
            ),
            lease=self.lease,
        )

    def planned(self, plan: Plan, *, given: bool) -> None:
        """Keep the plan, and whether the run was ``given`` it (its subtasks) or its
        planner made it."""
        self.store.write(
            (
                "UPDATE runs SET plan = ?, workers = ?, planned_by = ? WHERE run_id = ?",
                (model_json(plan), len(plan.subtasks), "given" if given else "planner",
                 self.run_id),
            ),
            lease=self.lease,
        )  # fmt: skip

    def worker(self, name: str, resumed_from: int = 0) -> WorkerRecord:
        """The checkpoint and journal of subtask ``name``'s worker."""
        record = WorkerRecord(self, name, self._journals.get(name, {}), resumed_from)
        record.approvals.update(self._approvals.get(name, {}))
        self._workers[name] = record
        return record

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
        sees it go: ``honeycomb serve``), and at the end of the run."""
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

    async def subtask_finished(self, outcome: SubtaskResult) -> None:
        """Keep a subtask's result; return once it is committed (or the store failed:
        then it is written again with the end of the run)."""
        name = outcome.subtask.id
        self._workers.pop(name, None)
        if not finished(outcome):
            return  # not finished: a resumed run continues it
        if outcome.worker is not None and store_failure(outcome.worker.exception) is not None:
            self._rerun.add(name)  # not finished either: a resumed run runs it again
            return
        row = (self.run_id, name, outcome.status, model_json(outcome), time.time())
        try:
            # With the results of the workers that end with it: one transaction for all.
            await self.store.commit((_SAVE_RESULT, row), lease=self.lease, urgent=False)
        except StoreError:
            self._unwritten.append((_SAVE_RESULT, row))

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
                *self._unwritten, ended, *released, lease=lease, checkpoint=True
            )
        finally:
            if lease is not None:
                self.store.let_go(lease)


def finished(outcome: SubtaskResult) -> bool:
    """Whether a subtask's outcome is final, and so kept in its worker's row: not one a
    resumed run continues (cancelled, over its budget, waiting for a person)."""
    return outcome.status not in ("cancelled", "over_budget", "waiting")


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


class WorkerRecord:
    """One worker's checkpoint (its state after every turn), journal (its
    side-effecting calls) and approval log (its calls asked about)."""

    def __init__(
        self,
        run: RunRecord,
        worker: str,
        journal: Mapping[tuple[int, str], JournalEntry],
        saved: int,
    ) -> None:
        self._run = run
        self._worker = worker
        self._entries = journal
        self._saved = saved  # messages already in the store
        self.on_unknown: OnUnknown = run.on_unknown
        self.approvals: dict[tuple[int, str], ApprovalEntry] = {}

    # --- Checkpoint -----------------------------------------------------------------

    def save(self, state: LoopState) -> None:
        run_id, worker, messages = self._run.run_id, self._worker, state.messages
        start = self._saved if len(messages) >= self._saved else 0
        # The turn's new messages go in one row: one insert per turn, not per message.
        new = dump_messages_json(messages[start:])
        self._saved = len(messages)
        row = (
            run_id, worker, time.time(), state.task, len(messages),
            _index_of(state.previous_calls, messages), state.turn, state.input_tokens,
            state.output_tokens, state.cost, state.tool_calls, state.nudged, state.output_attempts,
            state.wrapped_up, state.repeats, state.cached_input_tokens, state.reasoning_tokens,
            state.summary, state.summarized, state.compactions, state.context_tokens,
            state.context_messages,
        )  # fmt: skip
        self._run.store.save(
            (_SAVE_MESSAGES, (run_id, worker, start, new)), (_SAVE_STATE, row),
            lease=self._run.lease,
        )  # fmt: skip

    # --- Journal ----------------------------------------------------------------------

    def recorded(self, turn: int, call_id: str) -> JournalEntry | None:
        return self._entries.get((turn, call_id))

    @property
    def entries(self) -> Mapping[tuple[int, str], JournalEntry]:
        """The journal of this worker's earlier lives, by turn and call id."""
        return self._entries

    async def intent(self, turn: int, call: ToolCall, arguments: Mapping[str, Any]) -> None:
        await self._run.store.commit(
            (
                "INSERT OR REPLACE INTO journal (run_id, worker, turn, call_id, tool, "
                "arguments, started_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    self._run.run_id,
                    self._worker,
                    turn,
                    call.id,
                    call.name,
                    arguments_text(arguments),
                    time.time(),
                ),
            ),
            lease=self._run.lease,
        )

    async def outcome(self, turn: int, observation: ToolMessage) -> None:
        await self._run.store.commit(
            (
                "UPDATE journal SET status = ?, content = ?, finished_at = ? "
                "WHERE run_id = ? AND worker = ? AND turn = ? AND call_id = ?",
                (
                    observation.status,
                    observation.content,
                    time.time(),
                    self._run.run_id,
                    self._worker,
                    turn,
                    observation.tool_call_id,
                ),
            ),
            lease=self._run.lease,
        )

    # --- ApprovalLog ------------------------------------------------------------------

    def recorded_approval(self, turn: int, call_id: str) -> ApprovalEntry | None:
        return self.approvals.get((turn, call_id))

    async def record_approval(self, entry: ApprovalEntry) -> ApprovalEntry:
        """Keep ``entry``; the entry that stands (a decision recorded first, by a person
        meanwhile, stands over this one)."""
        run = self._run
        try:
            await run.store.keep_approval(run.run_id, entry, lease=run.lease)
        except AlreadyDecided:
            p = entry.pending
            entry = next(
                e
                for e in await run.store.approvals_of(run.run_id)
                if (e.pending.worker, e.pending.turn, e.pending.call_id)
                == (p.worker, p.turn, p.call_id)
            )
        self.approvals[entry.pending.turn, entry.pending.call_id] = entry
        return entry


class _ApprovalLog:
    """A worker record seen as the dispatcher's approval log (its ``recorded`` is the
    journal's)."""

    def __init__(self, record: WorkerRecord) -> None:
        self._record = record
        self._entries = record.approvals  # updated in place, never replaced

    def recorded(self, turn: int, call_id: str) -> ApprovalEntry | None:
        return self._entries.get((turn, call_id))  # asked of every call of every turn

    async def record(self, entry: ApprovalEntry) -> ApprovalEntry:
        return await self._record.record_approval(entry)


def approval_log(record: WorkerRecord) -> _ApprovalLog:
    """The approval log of a worker's record."""
    return _ApprovalLog(record)


def _index_of(calls: tuple[ToolCall, ...], messages: tuple[Message, ...]) -> int:
    """Where the message holding ``calls`` is (-1: none), so they are stored once."""
    if calls:
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if isinstance(message, AssistantMessage) and message.tool_calls is calls:
                return index
    return -1
