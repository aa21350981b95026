"""One worker's part of a run's record in the store (see :mod:`honeycomb.run.record`):
its loop's checkpoint (new messages and the counters after every turn), the
dispatcher's journal of side-effecting calls, and its log of calls that asked for a
person's approval."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from msgspec.structs import replace

from honeycomb.store import RunStore
from honeycomb.store.store import STATE_FIELDS, Lease
from runtime import (
    AlreadyDecided,
    AssistantMessage,
    JournalEntry,
    Message,
    OnUnknown,
    StoreError,
    ToolCall,
    ToolMessage,
    dump_messages_json,
)
from runtime.concurrency import Bell, TimedOut, within
from runtime.tools.approvals import ApprovalEntry, PendingApproval
from runtime.tools.define import arguments_text
from runtime.tools.journal import Verdict, judged_entry
from runtime.tools.unmasking import kept_apart
from workers import LoopState


class RunRecord(Protocol):
    """What a worker's record uses of its run's (:class:`honeycomb.run.record.RunRecord`)."""

    store: RunStore
    run_id: str
    started_at: float
    lease: Lease | None
    on_unknown: OnUnknown
    bell: Bell
    """Rung as this process records a decision on one of the run's calls."""

    def spent_so_far(self) -> None:
        """Write what the run spent, before a write the run waits for."""


__all__ = ["LOOK_EVERY_S", "WorkerRecord", "look_again", "watched"]

LOOK_EVERY_S = 0.5
"""How often a worker that waits for a decision (paused in the store, or while the run's
approver asks) looks in the store for one recorded elsewhere (another process)."""


async def look_again(ring: asyncio.Event) -> None:
    """Return at ``ring`` (a decision recorded in this process), or after
    :data:`LOOK_EVERY_S` (one recorded elsewhere is found in the store)."""
    with contextlib.suppress(TimedOut), within(LOOK_EVERY_S):
        await ring.wait()


T = TypeVar("T")


async def watched(
    run: RunRecord,
    wanted: Callable[[list[ApprovalEntry]], T | None],
    given_up: Callable[[], bool] = lambda: False,
) -> T | None:
    """What ``wanted`` finds among the run's calls asked about in the store (decisions
    waited for), read at each ring of the run's bell (a decision recorded in this
    process) and every :data:`LOOK_EVERY_S` (one recorded elsewhere: ``honeycomb
    approve``, a web page's server); None once ``given_up`` says so, after a read. A
    read that fails is tried again at the next look: a server away a while (a
    restart) fails no wait."""
    while True:
        ring = run.bell.next_ring()  # before the read: no ring is missed
        with contextlib.suppress(StoreError):
            found = wanted(await run.store.approvals_of(run.run_id))
            if found is not None:
                return found
        if given_up():
            return None
        await look_again(ring)


_SAVE_MESSAGES = (
    "INSERT INTO messages (run_id, worker, seq, messages) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (run_id, worker, seq) DO UPDATE SET messages = excluded.messages"
)
_SAVE_STATE = (
    f"INSERT INTO workers (run_id, worker, status, updated_at, {', '.join(STATE_FIELDS)}) "
    f"VALUES (?, ?, 'running', ?, {', '.join('?' * len(STATE_FIELDS))}) "
    "ON CONFLICT (run_id, worker) DO UPDATE SET updated_at = excluded.updated_at, "
    + ", ".join(f"{name} = excluded.{name}" for name in STATE_FIELDS)
)
"""A worker's checkpoint: its loop state (the :data:`STATE_FIELDS`), each turn."""
_INTENT = (
    "INSERT INTO journal (run_id, worker, turn, call_id, tool, arguments, started_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, worker, turn, call_id) DO UPDATE SET "
    "tool = excluded.tool, arguments = excluded.arguments, started_at = excluded.started_at, "
    "status = NULL, content = NULL, finished_at = NULL"
)
"""A side-effecting call about to run (one journaled before, and cut off, anew)."""
_JUDGED = (
    "INSERT INTO journal (run_id, worker, turn, call_id, tool, arguments, status, content, "
    "started_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run_id, worker, turn, call_id) DO UPDATE SET tool = excluded.tool, "
    "arguments = excluded.arguments, status = excluded.status, content = excluded.content, "
    "started_at = excluded.started_at, finished_at = excluded.finished_at"
)
"""The guards' verdict on a call they judged, which has not begun (``passed``, or its
refusal as its outcome)."""
_STATUS = (
    "INSERT INTO workers (run_id, worker, status, updated_at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (run_id, worker) DO UPDATE SET status = excluded.status, "
    "updated_at = excluded.updated_at"
)
"""What a worker with no outcome is at: ``cancelled`` (``over_budget``) once its call
cut it off, its checkpoint kept; ``running`` again as a call continues it."""


class WorkerRecord:
    """One worker's checkpoint (its state after every turn), journal (its
    side-effecting calls) and approval log (its calls asked about, and their
    decisions), kept under ``worker``, its name in the run.

    With ``phase``, the worker is one of the run's planner or aggregator, kept under
    a name of its own in the run (:mod:`honeycomb.run.phase_workers`), and its calls'
    idempotency keys are made from that name too, since its worker's own name (its
    role's) is that of every attempt and round of the planner. Its calls, and those
    of the agents it calls, cannot wait in the store for a person (``waits`` is
    False): their log keeps what the approver decided, which a resumed run goes on
    with."""

    def __init__(
        self,
        run: RunRecord,
        worker: str,
        journal: Mapping[tuple[int, str], JournalEntry],
        saved: int,
        *,
        phase: bool = False,
        waits: bool = True,
    ) -> None:
        self._run = run
        self._worker = worker
        self._entries = dict(journal)  # earlier lives', then this one's
        self._saved = saved  # messages already in the store
        self.on_unknown: OnUnknown = run.on_unknown
        self.decisions: dict[tuple[int, str], ApprovalEntry] = {}
        """Its calls asked about so far, and their decisions, by turn and call id."""
        self.approvals = _ApprovalLog(self)
        self.waits = waits and not phase
        """Whether its calls may wait in the store for a person's decision."""
        # The run's identity for its calls' idempotency keys: its id, and when its first
        # life started (a run of the same id in another store is another run).
        self.scope = f"{run.run_id}\0{run.started_at!r}"
        if phase:
            self.scope += f"\0{worker}"

    @property
    def written(self) -> bool:
        """Whether anything of the worker is in the store: a checkpoint, or a journaled
        call (of this life or an earlier one)."""
        return self._saved > 0 or bool(self._entries)

    # --- Checkpoint -----------------------------------------------------------------

    def save(self, state: LoopState) -> None:
        run_id, worker, messages = self._run.run_id, self._worker, state.messages
        start = self._saved if len(messages) >= self._saved else 0
        # The turn's new messages go in one row: one insert per turn, not per message.
        new = dump_messages_json(_kept_apart(messages[start:]))
        self._saved = len(messages)
        row = (
            run_id,
            worker,
            time.time(),
            state.task,
            len(messages),
            _index_of(state.previous_calls, messages),
            state.turn,
            state.input_tokens,
            state.output_tokens,
            state.cost,
            state.tool_calls,
            state.nudged,
            state.output_attempts,
            state.wrapped_up,
            state.repeats,
            state.cached_input_tokens,
            state.reasoning_tokens,
            state.summary,
            state.summarized,
            state.compactions,
            state.context_tokens,
            state.context_messages,
        )
        self._run.store.save(
            (_SAVE_MESSAGES, (run_id, worker, start, new)),
            (_SAVE_STATE, row),
            lease=self._run.lease,
        )

    def cut_off(self, status: str) -> None:
        """Mark the worker ``status`` (``cancelled``; ``over_budget`` when a budget
        stopped its run), as its trace says it: its call cut it off (a tool time limit,
        the end of its run), and nothing runs it now. Its checkpoint stays: a caller
        that makes the call again continues it (:meth:`going_on`). Queued in order with
        the run's writes (a checkpoint leaves the status as it is)."""
        run = self._run
        run.store.write(self._status(status), lease=run.lease)

    async def going_on(self) -> None:
        """Mark the worker ``running`` again, as a call continues it; return once that
        is committed.

        Raises:
            RunBusy: when the run was taken over (its writes are refused).
            StoreError: when the store cannot be written.
        """
        await self._run.store.commit(self._status("running"), lease=self._run.lease)

    def _status(self, status: str) -> tuple[str, tuple[str, str, str, float]]:
        return _STATUS, (self._run.run_id, self._worker, status, time.time())

    async def flush(self) -> None:
        """Return once every state saved so far is committed, with what the run has
        spent.

        Raises:
            RunBusy: when the run was taken over (its writes are refused).
            StoreError: when the store cannot be written.
        """
        self._run.spent_so_far()
        await self._run.store.commit(lease=self._run.lease)

    # --- Journal ----------------------------------------------------------------------

    def recorded(self, turn: int, call_id: str) -> JournalEntry | None:
        return self._entries.get((turn, call_id))

    @property
    def entries(self) -> Mapping[tuple[int, str], JournalEntry]:
        """The journal so far, by turn and call id: its earlier lives', then this
        one's (what a worker that moves to another process takes along)."""
        return self._entries

    async def intent(self, turn: int, call: ToolCall, arguments: Mapping[str, Any]) -> None:
        self._run.spent_so_far()
        await self._run.store.commit(
            (
                _INTENT,
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
        self._entries[turn, call.id] = JournalEntry(
            tool=call.name, arguments=arguments_text(arguments)
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
        key = (turn, observation.tool_call_id)
        before = self._entries.get(key)
        self._entries[key] = JournalEntry(
            tool=observation.name,
            arguments=before.arguments if before is not None else "{}",
            status=observation.status,
            content=observation.content,
        )

    async def judged(self, turn: int, verdicts: Sequence[Verdict]) -> None:
        run, now = self._run, time.time()
        kept = {call.id: judged_entry(call, arguments, text) for call, arguments, text in verdicts}
        rows = [
            (run.run_id, self._worker, turn, call_id, e.tool, e.arguments, e.status, e.content)
            for call_id, e in kept.items()
        ]
        run.spent_so_far()
        await run.store.commit(*((_JUDGED, (*row, now, now)) for row in rows), lease=run.lease)
        self._entries.update(((turn, call_id), entry) for call_id, entry in kept.items())

    # --- ApprovalLog ------------------------------------------------------------------

    async def record_approval(self, entry: ApprovalEntry) -> ApprovalEntry:
        """Keep ``entry``, under this worker's name in the run; the entry that stands (a
        decision recorded first, by a person meanwhile, stands over this one)."""
        run = self._run
        entry = replace(entry, pending=replace(entry.pending, worker=self._worker))
        run.spent_so_far()
        try:
            await run.store.keep_approval(run.run_id, entry, lease=run.lease)
        except AlreadyDecided:
            called = _call(entry.pending)
            found = await run.store.approvals_of(run.run_id)
            entry = next(e for e in found if _call(e.pending) == called)
        self.decisions[entry.pending.turn, entry.pending.call_id] = entry
        return entry

    async def decided_elsewhere(self, pending: PendingApproval) -> ApprovalEntry:
        """The entry of ``pending`` once the store holds a decision on it, made by
        another decider (a person on the page of ``honeycomb serve``, ``honeycomb
        approve``, ``Executor.decide`` here): read every :data:`LOOK_EVERY_S` and at
        each ring of the run's bell, as a paused worker reads it (a
        read that fails is tried again)."""
        called = _call(replace(pending, worker=self._worker))

        def decided(entries: list[ApprovalEntry]) -> ApprovalEntry | None:
            found = (e for e in entries if e.decision is not None and _call(e.pending) == called)
            return next(found, None)

        entry = await watched(self._run, decided)
        assert entry is not None  # it never gives up: its wait is cancelled
        self.decisions[entry.pending.turn, entry.pending.call_id] = entry
        return entry


def _call(pending: PendingApproval) -> tuple[str, int, str]:
    """Which call a question is about: its worker's, in its turn, of its id."""
    return pending.worker, pending.turn, pending.call_id


class _ApprovalLog:
    """A worker record seen as its approval log (its ``recorded`` is the journal's)."""

    def __init__(self, record: WorkerRecord) -> None:
        self._record = record
        self._entries = record.decisions  # updated in place, never replaced

    def recorded(self, turn: int, call_id: str) -> ApprovalEntry | None:
        return self._entries.get((turn, call_id))  # asked of every call of every turn

    async def record(self, entry: ApprovalEntry) -> ApprovalEntry:
        return await self._record.record_approval(entry)

    async def decided(self, pending: PendingApproval) -> ApprovalEntry:
        return await self._record.decided_elsewhere(pending)


def _kept_apart(messages: Sequence[Message]) -> Sequence[Message]:
    """``messages`` with their calls' arguments as the store is to keep them: a mask
    that is their text told apart from the secrets the store masks (a call resumed
    from the store runs with its secrets again: :mod:`runtime.tools.unmasking`)."""
    if not any(map(_holds_mask, messages)):  # nearly always: nothing made
        return messages
    return [_calls_kept_apart(m) if _holds_mask(m) else m for m in messages]


def _holds_mask(message: Message) -> bool:
    return isinstance(message, AssistantMessage) and any(
        "hidden]" in c.arguments for c in message.tool_calls
    )


def _calls_kept_apart(message: Message) -> Message:
    assert isinstance(message, AssistantMessage)
    calls = tuple(replace(c, arguments=kept_apart(c.arguments)) for c in message.tool_calls)
    return replace(message, tool_calls=calls)


def _index_of(calls: tuple[ToolCall, ...], messages: tuple[Message, ...]) -> int:
    """Where the message holding ``calls`` is (-1: none), so they are stored once."""
    if calls:
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if isinstance(message, AssistantMessage) and message.tool_calls is calls:
                return index
    return -1
