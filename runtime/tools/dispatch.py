"""Tool dispatch: run one model turn's tool calls with the semantics that must hold.

- Parallel-safe calls start together, bounded by the worker's cap and an optional
  limiter shared with other workers, each under its own timeout; a timed-out call is
  cancelled and becomes a ``timeout`` observation. A call of a tool that ``nests``
  (it runs nested workers, whose own calls take the shared limiter's tokens) takes
  none, so a nested call never waits for a token its ancestor holds.
- Side-effecting calls (``side_effects=True`` or ``exclusive=...``) run one at a time
  in the order the model emitted them, alongside the parallel-safe ones. Calls sharing
  an exclusive key also hold that key's lock in a :class:`LockTable` that several
  workers can share, so they never overlap anywhere.
- Observations come back in the order of the calls, exactly one per call. Unknown
  tools, arguments that are not JSON or fail validation, and tools that raise become
  ``error`` observations; an identical repeat of a previous turn's call is ``skipped``.
- Sync tools run in worker threads, so they never block the event loop.
- With a :class:`~runtime.tools.journal.Journal`, side-effecting calls are journaled (intent
  before, outcome after), and a resumed worker never runs a completed one again.
- With a :class:`CallGuard` (a role's argument guards), every call gets a verdict
  before any call of the turn runs: a refused one becomes an ``error`` observation.
- With an :class:`~runtime.tools.approvals.ApprovalGate`, the calls that need approval get
  a decision before any call of the turn runs (see :mod:`runtime.tools.approvals`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Awaitable, Coroutine, Sequence
from typing import Any, Protocol

import anyio
import anyio.from_thread
from msgspec.structs import replace

from runtime.concurrency import TimedOut, require_asyncio, run_together, within
from runtime.errors import ModelRetry
from runtime.events import NO_TRACE, ToolCallFinished, ToolCallStarted, Tracer
from runtime.messages import ObservationStatus, ToolCall, ToolMessage
from runtime.tools.approvals import ApprovalGate, ApprovalNeeded, PendingApproval
from runtime.tools.define import ArgumentsError, Tool, ToolContext, ToolRegistry, idempotency_key
from runtime.tools.journal import Journal, unknown_outcome_text
from runtime.tools.render import render
from runtime.tools.threads import run_tool
from runtime.value import Value

__all__ = ["CallGuard", "DispatchPolicy", "Dispatcher", "LockTable", "check_cancelled"]

_NOTHING = contextlib.nullcontext()

check_cancelled = anyio.from_thread.check_cancelled
"""Call from a long-running sync tool to stop early once its call is cancelled."""


class LockTable:
    """Named locks for ``exclusive`` tools; share one table between workers so that
    calls with the same key never overlap across them."""

    def __init__(self) -> None:
        self._locks: dict[str, anyio.Lock] = {}

    def lock(self, key: str) -> contextlib.AbstractAsyncContextManager[None]:
        """The lock of ``key``, to hold with ``async with`` (one made on first use)."""
        found = self._locks.get(key)
        if found is None:
            found = self._locks[key] = anyio.Lock()
        return found

    def __repr__(self) -> str:
        return f"LockTable({sorted(self._locks)})"


class DispatchPolicy(Value, frozen=True, kw_only=True):
    """How one worker runs its tool calls.

    Attributes:
        max_concurrency: Parallel-safe calls of one worker in flight at once.
        default_timeout: Seconds a call may take when its tool sets no timeout
            (None: unlimited).
        max_output_chars: Longer tool output is cut, with a marker saying how much.
        skip_repeats: Do not execute an identical repeat of a previous turn's call.
    """

    max_concurrency: int = 8
    default_timeout: float | None = 60.0
    max_output_chars: int = 20_000
    skip_repeats: bool = True

    def __post_init__(self) -> None:
        if self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {self.max_concurrency}")
        if self.default_timeout is not None and self.default_timeout <= 0:
            raise ValueError(f"default_timeout must be positive, got {self.default_timeout}")
        if self.max_output_chars < 100:
            raise ValueError(f"max_output_chars must be at least 100, got {self.max_output_chars}")


class CallGuard(Protocol):
    """Checks the calls of a turn, their arguments validated, before any of them runs."""

    async def check(
        self, calls: Sequence[tuple[ToolCall, Tool[Any, Any], dict[str, Any]]], turn: int
    ) -> list[str | None]:
        """For each call, None (it may run) or the text of its error observation."""
        ...


Seen = dict[str, list[dict[str, Any]]]
"""Calls of a batch by tool name: the validated arguments of each (a repeat of one in
the next turn is not run)."""


# benchmark B: made every model turn or tool call, never walked by the GC
class _Ready(Value, frozen=True, gc=False, kw_only=True):
    """A call that passed its checks, with its validated arguments: ready to run."""

    position: int
    call: ToolCall
    tool: Tool[Any, Any]
    kwargs: dict[str, Any]
    note: str = ""  # put before its observation (edited arguments)


class Dispatcher:
    """Runs the tool calls of one worker, turn by turn.

    Args:
        tools: The tools this worker may call.
        policy: Concurrency cap, timeouts and output size.
        limiter: Shared by workers to bound the leaf tool calls in flight (the
            Executor's); calls of a tool that ``nests`` take no token of it.
        locks: Shared by workers for ``exclusive`` keys (the Executor's).
        tracer: Receives a started and a finished event per call.
        worker: Worker name for events and :class:`ToolContext`.
        run_id: Run id for events and :class:`ToolContext`.
        journal: Where side-effecting calls are journaled, for a run that can resume.
        approvals: Decides on the calls that need a person's approval.
        guard: Checks every call's arguments before the turn's calls run.
    """

    # benchmark E: one per worker (A at N=10000 has 10,000 at once), no instance dict
    __slots__ = (
        "_last",
        "_limiter",
        "_run_id",
        "_scope",
        "_seen",
        "_tracer",
        "_tracing",
        "_worker",
        "approvals",
        "guard",
        "journal",
        "locks",
        "policy",
        "tools",
    )

    def __init__(
        self,
        tools: ToolRegistry,
        *,
        policy: DispatchPolicy | None = None,
        limiter: anyio.CapacityLimiter | None = None,
        locks: LockTable | None = None,
        tracer: Tracer = NO_TRACE,
        worker: str | None = None,
        run_id: str | None = None,
        journal: Journal | None = None,
        approvals: ApprovalGate | None = None,
        guard: CallGuard | None = None,
    ) -> None:
        self.tools = tools
        self.policy = policy or DispatchPolicy()
        self._limiter = limiter
        self.locks = locks if locks is not None else LockTable()
        self._tracer = tracer
        self._worker = worker
        self._run_id = run_id
        self._scope = ""  # its calls' idempotency keys' own, without a journal
        self.journal = journal
        self.approvals = approvals
        self.guard = guard
        # The last batch and what ran of it, so the next turn spots a repeat without
        # validating those calls again.
        self._last: Sequence[ToolCall] = ()
        self._seen: Seen = {}
        self._tracing = False  # whether the batch running now emits events

    async def dispatch(
        self, calls: Sequence[ToolCall], *, turn: int = 0, previous: Sequence[ToolCall] = ()
    ) -> tuple[ToolMessage, ...]:
        """Run ``calls`` and return one observation per call, in call order.

        Raises:
            ApprovalNeeded: when calls wait for a person's decision (none of the
                batch ran), or calls a tool made (a nested worker's) do.
        """
        require_asyncio("Dispatcher.dispatch")
        results: list[ToolMessage | None] = [None] * len(calls)
        self._tracing = self._tracer.enabled  # asked once a batch, not once a call
        ready = self._ready(calls, previous, results, turn)
        if self.guard is not None and ready:  # before a person is asked about a call
            ready = await self._guarded(ready, results, turn)
        gate = self.approvals
        if gate is not None and any(gate.involves(r.call, r.tool, turn) for r in ready):
            ready = await self._approved(ready, results, turn)
        inline, others = self._start(ready, results, turn)
        try:
            await run_together(inline, others)
        except ExceptionGroup as group:
            # A call's own calls wait for approval (a nested worker's): the batch waits.
            waiting, rest = group.split(ApprovalNeeded)
            if waiting is None or rest is not None:
                raise
            raise ApprovalNeeded(_pending_of(waiting)) from None
        return tuple([r for r in results if r is not None])

    def asks_approval(self, tool: Tool[Any, Any]) -> bool:
        """Whether a call to ``tool`` needs a person's approval."""
        return self.approvals is not None and self.approvals.asks(tool)

    def _ready(
        self,
        calls: Sequence[ToolCall],
        previous: Sequence[ToolCall],
        results: list[ToolMessage | None],
        turn: int,
    ) -> list[_Ready]:
        """The calls that can run; the others get their observation now."""
        repeats: Seen | None = None
        if previous and self.policy.skip_repeats:
            # The batch this dispatcher ran last, or a state's from elsewhere (resumed).
            repeats = self._seen if previous is self._last else _seen(previous, self.tools)
        ready: list[_Ready] = []
        seen: Seen = {}
        for index, call in enumerate(calls):
            found = self._prepare(index, call, repeats, seen, results, turn)
            if found is not None:
                ready.append(found)
        self._last, self._seen = calls, seen
        return ready

    async def _guarded(
        self, ready: list[_Ready], results: list[ToolMessage | None], turn: int
    ) -> list[_Ready]:
        """The calls the guard lets run; a refused one gets its observation now. A call
        the journal knows was checked before it ran (a resumed worker's): not again."""
        assert self.guard is not None
        journal = self.journal
        checked = [r for r in ready if journal is None or journal.recorded(turn, r.call.id) is None]
        verdicts = await self.guard.check([(r.call, r.tool, r.kwargs) for r in checked], turn)
        refusals = {
            item.position: text
            for item, text in zip(checked, verdicts, strict=True)
            if text is not None
        }
        kept: list[_Ready] = []
        for item in ready:
            text = refusals.get(item.position)
            if text is None:
                kept.append(item)
            else:
                results[item.position] = self._refuse(item.call, "error", text, turn)
        return kept

    async def _approved(
        self, ready: list[_Ready], results: list[ToolMessage | None], turn: int
    ) -> list[_Ready]:
        """The calls that may run, as the approval gate decided: a refused one gets
        its observation now; one approved with edited arguments runs with them."""
        assert self.approvals is not None
        verdicts = await self.approvals.decide([(r.call, r.tool, r.kwargs) for r in ready], turn)
        kept: list[_Ready] = []
        for item, verdict in zip(ready, verdicts, strict=True):
            if verdict is None:
                kept.append(item)
            elif verdict.refusal is not None:
                results[item.position] = self._refuse(item.call, "error", verdict.refusal, turn)
            else:
                kept.append(replace(item, kwargs=verdict.kwargs, note=verdict.note))
        return kept

    def _start(
        self, ready: list[_Ready], results: list[ToolMessage | None], turn: int
    ) -> tuple[Awaitable[None] | None, list[Coroutine[Any, Any, Any]]]:
        """Of the calls ready, the serial lane (or else one parallel call) is to run in
        the dispatching task, and every other call in a task of its own."""
        parallel: list[_Ready] = []
        serial: list[_Ready] = []
        for item in ready:
            (serial if item.tool.side_effects else parallel).append(item)
        cap = self._cap_for(len(parallel))
        inline: Awaitable[None] | None = None
        if serial:
            inline = self._serial(serial, turn, results)
        elif parallel:
            inline = self._call(parallel.pop(), turn, results, cap)
        return inline, [self._call(ready, turn, results, cap) for ready in parallel]

    def _cap_for(self, parallel: int) -> anyio.CapacityLimiter | None:
        """A limiter for this batch, only when it has more calls than the cap allows."""
        cap = self.policy.max_concurrency
        return anyio.CapacityLimiter(cap) if parallel > cap else None

    async def _serial(
        self, serial: list[_Ready], turn: int, results: list[ToolMessage | None]
    ) -> None:
        """The side-effecting calls, one at a time, in the order the model gave them."""
        for ready in serial:
            await self._call(ready, turn, results, None)

    # --- preparation: everything that fails before the tool runs --------------------

    def _prepare(
        self,
        index: int,
        call: ToolCall,
        repeats: Seen | None,
        seen: Seen,
        results: list[ToolMessage | None],
        turn: int,
    ) -> _Ready | None:
        """The call, ready to run; or None, and its observation is in ``results``.
        Calls whose arguments validate are added to ``seen`` (repeats included: a
        repeat of a repeat is one too)."""
        found = self.tools.get(call.name)
        if found is None:
            available = ", ".join(self.tools.names) or "none"
            text = f"Error: unknown tool {call.name!r}. Available tools: {available}."
            results[index] = self._refuse(call, "error", text, turn)
            return None
        try:
            kwargs = found.parse_arguments(call.arguments)
        except ArgumentsError as exc:
            text = f"Error: {exc}. Fix the arguments and call again."
            results[index] = self._refuse(call, "error", text, turn)
            return None
        seen.setdefault(call.name, []).append(kwargs)
        if repeats is not None and kwargs in repeats.get(call.name, ()):
            text = (
                f"Not executed: this repeats your previous call to {call.name!r} with the same "
                "arguments; its result is above. Use that result, change the arguments, or "
                "give your answer."
            )
            results[index] = self._refuse(call, "skipped", text, turn)
            return None
        return _Ready(position=index, call=call, tool=found, kwargs=kwargs)

    def _refuse(
        self, call: ToolCall, status: ObservationStatus, content: str, turn: int
    ) -> ToolMessage:
        """The observation for a call that is not run: refused, skipped, or answered
        from the journal (a side-effecting call a life before ran); also reported as
        an event, as every call the model has the observation of is."""
        if self._tracing:
            self._finished(call, turn, status, 0.0, content if status != "ok" else None)
        return _observe(call, status, content)

    def _finished(
        self, call: ToolCall, turn: int, status: str, duration_s: float, error: str | None
    ) -> None:
        self._tracer.emit(
            ToolCallFinished(
                worker=self._worker,
                run_id=self._run_id,
                turn=turn,
                call_id=call.id,
                tool=call.name,
                status=status,
                duration_s=duration_s,
                error=error,
            )
        )

    # --- execution --------------------------------------------------------------------

    def _call(
        self,
        ready: _Ready,
        turn: int,
        results: list[ToolMessage | None],
        cap: anyio.CapacityLimiter | None,
    ) -> Coroutine[Any, Any, Any]:
        """One call, to await; its observation goes to its place in ``results``
        (straight to :meth:`_execute` when there is nothing to hold or journal)."""
        journal = self.journal if ready.tool.side_effects else None
        # A call that only waits for nested workers holds no shared slot: theirs do.
        limiter = None if ready.tool.nests else self._limiter
        held = cap is not None or ready.tool.exclusive is not None or limiter is not None
        if held or journal is not None:
            return self._held(ready, turn, results, (cap, limiter), journal)
        return self._execute(ready, turn, results)

    async def _held(
        self,
        ready: _Ready,
        turn: int,
        results: list[ToolMessage | None],
        limiters: tuple[anyio.CapacityLimiter | None, anyio.CapacityLimiter | None],
        journal: Journal | None,
    ) -> None:
        """One call holding its slot in the batch's cap, its exclusive lock and a
        token of the shared limiter (``limiters``: the cap and the shared one, each if
        any), and journaled in ``journal`` if given."""
        key = ready.tool.exclusive
        lock = self.locks.lock(key) if key is not None else _NOTHING
        cap, shared = limiters
        async with cap or _NOTHING, lock, shared or _NOTHING:
            if journal is not None:
                await self._journaled(ready, turn, results, journal)
            else:
                await self._execute(ready, turn, results)

    async def _journaled(
        self, ready: _Ready, turn: int, results: list[ToolMessage | None], journal: Journal
    ) -> None:
        """A side-effecting call, run at most once across crashes and resumes."""
        call = ready.call
        entry = journal.recorded(turn, call.id)
        if entry is not None and entry.tool == call.name:
            if entry.status is not None:  # it ended before the crash: never run it again
                results[ready.position] = self._refuse(call, entry.status, entry.content, turn)
                return
            if not ready.tool.idempotent:  # it was running when the process died
                observation = self._refuse(call, "unknown", unknown_outcome_text(call), turn)
                results[ready.position] = observation
                await journal.outcome(turn, observation)
                return
        await journal.intent(turn, call, ready.kwargs)
        observation = await self._execute(ready, turn, results)
        await journal.outcome(turn, observation)

    def _key_scope(self) -> str:
        """What its calls' idempotency keys are made from: the journal's scope (the
        run's, in every life of it), or, with nothing to resume, one of its own."""
        if self.journal is not None:
            return self.journal.scope
        if not self._scope:
            self._scope = os.urandom(16).hex()
        return self._scope

    async def _execute(
        self, ready: _Ready, turn: int, results: list[ToolMessage | None]
    ) -> ToolMessage:
        """One call under its time limit; whatever happens becomes its observation,
        returned and put in its place in ``results``."""
        call, found = ready.call, ready.tool
        kwargs = ready.kwargs
        if found.context_param is not None:
            ctx = ToolContext(
                call_id=call.id,
                worker=self._worker,
                run_id=self._run_id,
                turn=turn,
                idempotency_key=idempotency_key(self._key_scope(), self._worker, turn, call.id),
            )
            kwargs = {**kwargs, found.context_param: ctx}
        limit = found.timeout if found.timeout is not None else self.policy.default_timeout
        if self._tracing:
            self._tracer.emit(
                ToolCallStarted(
                    worker=self._worker,
                    run_id=self._run_id,
                    turn=turn,
                    call_id=call.id,
                    tool=call.name,
                )
            )
        started = time.perf_counter()
        # Whether a sync side-effecting call's thread took it up (see _timeout_text).
        begun = threading.Event() if found.side_effects and not found.is_async else None
        try:
            running = run_tool(found, kwargs, begun)
            if limit is None:
                value = await running
            else:
                with within(limit):
                    value = await running
        except TimedOut:
            # Cancelled, or waited for to its end (a sync side-effecting tool's thread
            # is, see runtime.tools.threads).
            elapsed = time.perf_counter() - started
            text = _timeout_text(found, limit or 0.0, elapsed, begun)
            return self._ended(ready, results, turn, started, "timeout", text, text)
        except ApprovalNeeded:
            raise  # calls the tool made wait for a decision (a nested worker's): it pauses
        except ModelRetry as exc:
            return self._ended(
                ready, results, turn, started, "error", f"Error: {exc.message}", exc.message
            )
        except Exception as exc:  # a failing tool becomes an observation, never a crash
            error = f"{type(exc).__name__}: {exc}"
            text = f"Error: tool {found.name!r} raised {error}"
            return self._ended(ready, results, turn, started, "error", text, error)
        # Whatever the tool returned, rendering it is not its failure.
        text = render(value, self.policy.max_output_chars)
        return self._ended(ready, results, turn, started, "ok", text, None)

    def _ended(
        self,
        ready: _Ready,
        results: list[ToolMessage | None],
        turn: int,
        started: float,
        status: ObservationStatus,
        content: str,
        error: str | None,
    ) -> ToolMessage:
        call = ready.call
        if self._tracing:
            self._finished(call, turn, status, time.perf_counter() - started, error)
        observation = results[ready.position] = _observe(call, status, ready.note + content)
        return observation


def _pending_of(group: BaseExceptionGroup[ApprovalNeeded]) -> tuple[PendingApproval, ...]:
    """The calls waiting of every :class:`ApprovalNeeded` in ``group``, in order."""
    found: list[PendingApproval] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            found += _pending_of(exc)
        elif isinstance(exc, ApprovalNeeded):
            found += exc.pending
    return tuple(found)


def _timeout_text(
    found: Tool[Any, Any], timeout: float, elapsed: float, begun: threading.Event | None
) -> str:
    if begun is not None and not begun.is_set():  # it waited for a thread all along
        return (
            f"Error: tool {found.name!r} timed out after {timeout:g}s before it started: it "
            "did not run, so it had no effect. Call it again if it is still needed."
        )
    if begun is not None:
        # Such a thread is waited for (see runtime.tools.threads), so it ran to its end.
        return (
            f"Error: tool {found.name!r} timed out after {timeout:g}s. It is a synchronous "
            f"side-effecting tool, which cannot be interrupted: it ran to its end after "
            f"{elapsed:.1f}s, so its effects may have happened, but its result was dropped."
        )
    return f"Error: tool {found.name!r} timed out after {timeout:g}s and was cancelled."


def _observe(call: ToolCall, status: ObservationStatus, content: str) -> ToolMessage:
    return ToolMessage(tool_call_id=call.id, name=call.name, status=status, content=content)


def _seen(calls: Sequence[ToolCall], tools: ToolRegistry) -> Seen:
    """What :class:`Dispatcher` keeps of a batch it ran, for calls it did not run (a
    resumed state's): the same tool and the same validated arguments make a repeat
    (``{"a": 1, "b": 2}`` repeats ``{"b": 2, "a": 1}``)."""
    seen: Seen = {}
    for call in calls:
        found = tools.get(call.name)
        try:
            arguments = found.parse_arguments(call.arguments) if found else {}
        except ArgumentsError:
            continue
        seen.setdefault(call.name, []).append(arguments)
    return seen
