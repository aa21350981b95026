"""What one run writes to its :class:`~honeycomb.store.store.RunStore`, and what a resumed
run reads back.

:class:`RunRecord` is one run's handle on the store: it holds the run's lease, and
every write it makes is under it. Each subtask's worker gets a :class:`WorkerRecord`,
which is both the loop's checkpoint (new messages and the counters after every turn)
and the dispatcher's journal of side-effecting calls. :func:`restore` turns a stored
run back into what the scheduler needs: the results of finished workers, and the loop
state each unfinished worker continues from.

A worker that failed because the store did (a full disk, a lock, a lost lease) has not
finished: its result is not kept as final, and a resumed run runs it again.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

from honeycomb.run.plan import Plan
from honeycomb.run.result import RunResult, SubtaskResult
from honeycomb.store.store import Lease, RunStore, Statement, StoredRun, StoredWorker
from honeycomb.trace.spans import SpanRow
from runtime import (
    AssistantMessage,
    JournalEntry,
    Message,
    OnUnknown,
    StoreError,
    ToolCall,
    ToolMessage,
    Usage,
    dump_messages_json,
    validate_messages,
)
from runtime._values import record
from runtime.journal import arguments_text
from workers import LoopState

__all__ = [
    "Resumed", "RunRecord", "WorkerRecord", "restore", "retyped", "store_failure", "stored_result",
]  # fmt: skip

_RESULT_EXCLUDE = {"worker": {"exception"}}
_SAVE_MESSAGES = (
    "INSERT OR REPLACE INTO messages (run_id, worker, seq, messages) VALUES (?, ?, ?, ?)"
)
_SAVE_STATE = (
    "INSERT INTO workers (run_id, worker, status, updated_at, task, messages, previous, turn, "
    "input_tokens, output_tokens, cost, tool_calls, nudged, output_attempts, wrapped_up, "
    "repeats) VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run_id, worker) DO UPDATE SET updated_at = excluded.updated_at, "
    "task = excluded.task, messages = excluded.messages, previous = excluded.previous, "
    "turn = excluded.turn, input_tokens = excluded.input_tokens, "
    "output_tokens = excluded.output_tokens, cost = excluded.cost, "
    "tool_calls = excluded.tool_calls, "
    "nudged = excluded.nudged, output_attempts = excluded.output_attempts, "
    "wrapped_up = excluded.wrapped_up, repeats = excluded.repeats"
)


class RunRecord:
    """One run's writes to the store, under the run's lease (see :meth:`take`)."""

    def __init__(self, store: RunStore, run_id: str, on_unknown: OnUnknown = "tell") -> None:
        self.store = store
        self.run_id = run_id
        self.on_unknown: OnUnknown = on_unknown
        self.lease: Lease | None = None
        self._journals: Mapping[str, Mapping[tuple[int, str], JournalEntry]] = {}
        self._spans: list[SpanRow] = []
        self._outcomes: dict[str, tuple[SubtaskResult, str]] = {}  # as written: JSON
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

    def planned(self, plan: Plan) -> None:
        self.store.write(
            (
                "UPDATE runs SET plan = ?, workers = ? WHERE run_id = ?",
                (plan.model_dump_json(), len(plan.subtasks), self.run_id),
            ),
            lease=self.lease,
        )

    def worker(self, name: str, resumed_from: int = 0) -> WorkerRecord:
        """The checkpoint and journal of subtask ``name``'s worker."""
        record = WorkerRecord(self, name, self._journals.get(name, {}), resumed_from)
        self._workers[name] = record
        return record

    def use_journals(self, journals: Mapping[str, Mapping[tuple[int, str], JournalEntry]]) -> None:
        """Journal entries of an earlier life of this run, by worker."""
        self._journals = journals

    def span(self, span: SpanRow) -> None:
        """Keep a span that ended (see :mod:`honeycomb.trace.spans`); spans are written in
        batches, as JSON arrays, and at the end of the run."""
        self._spans.append(span)
        if len(self._spans) >= _SPAN_BATCH:
            self._write_spans()

    def _write_spans(self) -> None:
        if self._spans:
            batch, self._spans = self._spans, []
            self.store.save((_SAVE_SPANS, (self.run_id, json.dumps(batch))), lease=self.lease)

    async def subtask_finished(self, outcome: SubtaskResult) -> None:
        """Keep a subtask's result; return once it is committed (or the store failed:
        then it is written again with the end of the run)."""
        name = outcome.subtask.id
        record = self._workers.pop(name, None)
        if outcome.status in ("cancelled", "over_budget"):
            return  # not finished: a resumed run continues it
        if outcome.worker is not None and store_failure(outcome.worker.exception) is not None:
            self._rerun.add(name)  # not finished either: a resumed run runs it again
            return
        text = _outcome_json(outcome, record)
        self._outcomes[name] = (outcome, text)
        row = (self.run_id, name, outcome.status, text, time.time())
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
        again, and aggregates anew.
        """
        self._write_spans()
        kept = self._result_json(result) if result is not None and not self._rerun else None
        ended = (
            "UPDATE runs SET status = ?, finished_at = ?, result = ?, error = ?, "
            "model_calls = ?, input_tokens = ?, output_tokens = ?, tool_calls = ?, cost = ? "
            "WHERE run_id = ?",
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

    def _result_json(self, result: RunResult) -> str:
        """``result.model_dump_json()``, made of the JSON each subtask's result was
        written as when it finished: dumping every transcript again at the end of a
        run would cost as much as dumping them then."""
        subtasks = []
        for name, outcome in result.subtasks.items():
            written = self._outcomes.get(name)
            if written is not None and written[0] is outcome:
                text = written[1]
            else:  # finished in an earlier life, or cancelled
                text = _outcome_json(outcome, None)
            subtasks.append(f"{json.dumps(name, ensure_ascii=False)}:{text}")
        return _spliced(result, "subtasks", f"{{{','.join(subtasks)}}}")


def _outcome_json(outcome: SubtaskResult, record: WorkerRecord | None) -> str:
    """``outcome.model_dump_json()``, its transcript made of the JSON its worker's
    checkpoint wrote of each turn (``record``, if any): dumping the whole
    conversation again when a worker finishes would cost about as much as all its
    checkpoints did."""
    worker = outcome.worker
    if worker is None:
        return outcome.model_dump_json(exclude=_RESULT_EXCLUDE)
    messages = worker.transcript.messages
    array = record.messages_json(messages) if record is not None else None
    transcript = f'{{"messages":{array or dump_messages_json(messages)}}}'
    return _spliced(outcome, "worker", _spliced(worker, "transcript", transcript))


def _spliced(value: BaseModel, field: str, text: str) -> str:
    """``value.model_dump_json()`` with ``field`` written as ``text`` (its JSON,
    made elsewhere): pydantic dumps only the fields before and after it (through the
    model's serializer, as ``model_dump_json`` does without its keyword arguments,
    which cost as much again as dumping these few fields)."""
    before, after = _around(type(value), field)
    dump = value.__pydantic_serializer__.to_json
    parts = [
        dump(value, include=before)[1:-1].decode() if before else "",
        f'"{field}":{text}',
        dump(value, include=after)[1:-1].decode() if after else "",
    ]
    return f"{{{','.join([part for part in parts if part])}}}"


@functools.cache
def _around(cls: type[BaseModel], field: str) -> tuple[set[str], set[str]]:
    """The fields of ``cls`` before and after ``field``, as pydantic writes them."""
    names = list(cls.model_fields)
    at = names.index(field)
    return set(names[:at]), set(names[at + 1 :])


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
_SAVE_RESULT = (
    "INSERT INTO workers (run_id, worker, status, result, updated_at) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id, worker) DO UPDATE SET "
    "status = excluded.status, result = excluded.result, "
    "updated_at = excluded.updated_at"
)


class WorkerRecord:
    """One worker's checkpoint (its state after every turn) and journal (its
    side-effecting calls)."""

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
        # The messages this record wrote, and their JSON (a turn's text each, without
        # the brackets), to write a finished worker's transcript from.
        self._written: list[Message] = []
        self._texts: list[str] = []
        self.on_unknown: OnUnknown = run.on_unknown

    # --- Checkpoint -----------------------------------------------------------------

    def save(self, state: LoopState) -> None:
        run_id, worker, messages = self._run.run_id, self._worker, state.messages
        start = self._saved if len(messages) >= self._saved else 0
        # The turn's new messages go in one row: one insert per turn, not per message.
        added = messages[start:]
        new = dump_messages_json(added)
        self._saved = len(messages)
        if start == 0:
            self._written, self._texts = [], []
        if added:
            self._written += added
            self._texts.append(new[1:-1])
        row = (
            run_id, worker, time.time(), state.task, len(messages),
            _index_of(state.previous_calls, messages), state.turn, state.input_tokens,
            state.output_tokens, state.cost, state.tool_calls, state.nudged, state.output_attempts,
            state.wrapped_up, state.repeats,
        )  # fmt: skip
        self._run.store.save(
            (_SAVE_MESSAGES, (run_id, worker, start, new)), (_SAVE_STATE, row),
            lease=self._run.lease,
        )  # fmt: skip

    def messages_json(self, messages: tuple[Message, ...]) -> str | None:
        """``dump_messages_json(messages)``, with the JSON :meth:`save` wrote of the
        messages it saved where ``messages`` hold those very objects, in a row (None
        when they do not)."""
        written = self._written
        at = _position(written, messages)
        if at < 0:
            return None
        end = at + len(written)
        head = dump_messages_json(messages[:at])[1:-1]
        tail = dump_messages_json(messages[end:])[1:-1]
        return f"[{','.join([text for text in (head, *self._texts, tail) if text])}]"

    # --- Journal ----------------------------------------------------------------------

    def recorded(self, turn: int, call_id: str) -> JournalEntry | None:
        return self._entries.get((turn, call_id))

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


def _state(stored: StoredWorker) -> LoopState | None:
    """The loop state a stored worker continues from (None: start afresh)."""
    saved = stored.state
    if saved is None:
        return None
    count = saved["messages"]
    found: list[Message] = []
    for seq, batch in stored.messages:
        if seq > len(found):
            return None  # a gap: start this worker again
        found[seq:] = validate_messages(batch)
    messages = tuple(found[:count])
    if len(messages) < count:
        return None  # the store lost the tail: start this worker again
    return LoopState(
        task=saved["task"],
        messages=messages,
        turn=saved["turn"],
        input_tokens=saved["input_tokens"],
        output_tokens=saved["output_tokens"],
        cost=saved["cost"] or 0.0,
        tool_calls=saved["tool_calls"],
        previous_calls=_calls_at(saved["previous"], messages),
        nudged=bool(saved["nudged"]),
        output_attempts=saved["output_attempts"],
        wrapped_up=bool(saved["wrapped_up"]),
        repeats=saved["repeats"],
    )


def _position(run: list[Message], messages: tuple[Message, ...]) -> int:
    """Where ``run`` (the very message objects, in order) starts in ``messages`` (-1:
    it is empty or not there)."""
    if not run:
        return -1
    first = run[0]
    for at, message in enumerate(messages):
        if message is first:
            found = messages[at : at + len(run)]
            same = len(found) == len(run) and all(a is b for a, b in zip(found, run, strict=True))
            return at if same else -1
    return -1


def _index_of(calls: tuple[ToolCall, ...], messages: tuple[Message, ...]) -> int:
    """Where the message holding ``calls`` is (-1: none), so they are stored once."""
    if calls:
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if isinstance(message, AssistantMessage) and message.tool_calls is calls:
                return index
    return -1


def _calls_at(index: int, messages: tuple[Message, ...]) -> tuple[ToolCall, ...]:
    message = messages[index] if 0 <= index < len(messages) else None
    return message.tool_calls if isinstance(message, AssistantMessage) else ()


@record(frozen=True)
class Resumed:
    """What a resumed run starts from.

    Attributes:
        plan: The plan of the earlier life, if it got that far.
        finished: Results of subtasks that finished (they are not run again).
        states: Loop states of subtasks that had started, to continue from.
        spent: What the earlier lives spent (the run's budget starts from it).
        journals: Side-effecting calls journaled so far, by worker.
    """

    plan: Plan | None
    finished: dict[str, SubtaskResult]
    states: dict[str, LoopState]
    spent: Usage
    journals: dict[str, dict[tuple[int, str], JournalEntry]]


def restore(stored: StoredRun) -> Resumed:
    """Read a stored run back for the scheduler."""
    plan = Plan.model_validate_json(stored.plan) if stored.plan else None
    finished: dict[str, SubtaskResult] = {}
    states: dict[str, LoopState] = {}
    spent = Usage()
    for name, worker in stored.workers.items():
        if worker.status == "skipped":
            continue  # skipped again at once if what it depends on failed again
        if worker.result is not None:
            outcome = finished[name] = SubtaskResult.model_validate_json(worker.result)
            if outcome.worker is not None:
                spent += outcome.worker.usage
            continue
        state = _state(worker)
        if state is not None:
            states[name] = state
            spent += state.usage
    journals = {name: w.journal for name, w in stored.workers.items() if w.journal}
    return Resumed(plan, finished, states, spent, journals)


M = TypeVar("M", bound=BaseModel)


def retyped(value: M, field: str, wanted: type[BaseModel] | None) -> M:
    """``value`` whose ``field`` (an output read back from JSON) is made ``wanted``
    again, if it has an output type and is not already one."""
    current = getattr(value, field)
    if wanted is None or current is None or isinstance(current, wanted):
        return value
    return value.model_copy(update={field: wanted.model_validate(current)})


def stored_result(stored: StoredRun) -> RunResult | None:
    """The result of a run that ended with an answer."""
    if stored.result is None or stored.status not in ("ok", "partial"):
        return None
    return RunResult.model_validate_json(stored.result)
