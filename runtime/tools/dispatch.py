"""Tool dispatch: which calls of one model turn run together, which one at a time,
and one observation per call, in call order. What happens to a call on its way to
its tool and back (guards, approval, locks, the journal, tracing, its time limit)
is the layers' (:mod:`runtime.tools.layers`), composed in
:func:`workers.calls.tool_calls`; the dispatcher hands each call to them.

- A call to an unknown tool, or whose arguments are not JSON or fail validation,
  gets an ``error`` observation, and an identical repeat of a call of the previous
  turn that ended ``ok`` a ``skipped`` one; neither reaches the layers. (A repeat of
  a call that failed, timed out or was refused runs: the model may try it again.) A
  call of an earlier life that the journal knows gets the journal's answer instead
  (its tool may be gone now), and one that waited for approval stops waiting (it is
  recorded denied: nobody is to decide a call that will not be made).
- Every other call of the turn is admitted by the layers, all together, before any
  of them runs: a refused call gets its observation there and then.
- Parallel-safe calls start together, at most ``max_concurrency`` of them at once.
  Side-effecting calls (``side_effects=True`` or ``exclusive=...``) run one at a time
  in the order the model emitted them, alongside the parallel-safe ones.
- Observations come back in the order of the calls, exactly one per call.
- A call whose own calls wait for a person (a nested worker's) does not cut off the
  turn's other calls: they run to their end, their outcomes kept, and then the turn
  waits (``ApprovalNeeded``), to run again once decided. They work in the worker's room
  (its ``max_workers`` slot) as its nested workers do
  (:func:`~runtime.limits.room.nested_work`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from contextlib import nullcontext
from typing import Any

import anyio
import anyio.from_thread

from runtime.concurrency import require_asyncio
from runtime.errors import BudgetExceeded, NotStarted
from runtime.events import Caller, ToolCallFinished
from runtime.limits.room import nested_work
from runtime.messages import ObservationStatus, ToolCall, ToolMessage
from runtime.tools.approval_gate import withdraw
from runtime.tools.approvals import ApprovalLog, ApprovalNeeded
from runtime.tools.define import ArgumentsError, ToolRegistry
from runtime.tools.journal import Journal
from runtime.tools.layers import (
    LockTable,
    Outcome,
    Prepared,
    RunTool,
    ToolHandler,
    Traced,
)
from runtime.tools.layers.journal import journal_answer
from runtime.tools.layers.run import STOPS, Stopped
from runtime.tools.layers.trace import finished
from runtime.value import Value

__all__ = ["DispatchPolicy", "Dispatcher", "LockTable", "check_cancelled"]

check_cancelled = anyio.from_thread.check_cancelled
"""Call from a long-running sync tool to stop early once its call is cancelled."""


class DispatchPolicy(Value, frozen=True, kw_only=True):
    """How one worker runs its tool calls.

    Attributes:
        max_concurrency: Parallel-safe calls of one worker in flight at once.
        default_timeout: Seconds a call may take when its tool sets no timeout
            (None: unlimited).
        max_output_chars: Longer tool output is cut, with a marker saying how much.
        skip_repeats: Do not execute an identical repeat of a previous turn's call
            that ended ``ok``.
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


_HOLDS_NOTHING = nullcontext()
"""A block that holds nothing: no slot of a cap, no strand of a room."""

CUT_SHORT = (
    "Error: {error}. Your answer was cut off at its output limit ({limit} tokens) while "
    "writing them: call again with shorter arguments, or do the work in smaller calls."
)
"""The observation of a call whose arguments an output limit cut short."""

Seen = list[Prepared]
"""The calls of a batch whose arguments validated, with those arguments as the model
gave them (a repeat of one in the next turn is not run). A call that does not end
``ok`` is taken out once it ends: there is no result to point the model back to."""

Results = list[ToolMessage | Stopped | None]
"""A turn's observations in call order (a call that stopped: why)."""


def _nesting(*lanes: list[Prepared]) -> bool:
    """Whether a call of the turn's lanes runs nested workers."""
    return any(call.tool.nests for lane in lanes for call in lane)


def _repeats(call: Prepared, earlier: Seen) -> bool:
    """Whether ``call`` repeats one of ``earlier``: the same tool, with the same
    arguments."""
    for other in earlier:
        if other.kwargs == call.kwargs and other.call.name == call.call.name:
            return True
    return False


def _observations(results: Results) -> tuple[ToolMessage, ...]:
    """The observations of a turn whose calls all ended, in call order.

    Raises:
        BudgetExceeded, NotStarted: when a call's nested workers stopped the worker.
        ApprovalNeeded: when calls a call's nested workers made wait for a decision.
    """
    observed = tuple([r for r in results if isinstance(r, ToolMessage)])
    if len(observed) == len(results):
        return observed
    # A call stopped, once the turn's other calls ended (their outcomes kept: none is
    # cut off in mid-effect): a budget its nested workers spent stops the worker, as at
    # its own next call, and so does a nested worker that cannot start again; else the
    # calls they made wait for approval, and the turn waits.
    stops = [r for r in results if isinstance(r, BudgetExceeded | NotStarted)]
    if stops:
        raise stops[0]
    waiting = [r for r in results if isinstance(r, ApprovalNeeded)]
    if not waiting:  # none stopped: each call has its observation
        return observed
    raise ApprovalNeeded(tuple(p for paused in waiting for p in paused.pending))


class Dispatcher:
    """Runs the tool calls of one worker, turn by turn.

    Args:
        tools: The tools this worker may call.
        policy: Concurrency cap, timeouts and output size.
        calls: The layers each call goes through, the tool last
            (:func:`workers.calls.tool_calls`). Default: each call traced, under its
            time limit, and nothing else.
        caller: The worker and run making the calls; refusals are reported to its
            tracer.
        journal: The worker's journal (the one its calls' layers keep), which answers
            a call of an earlier life that cannot be run now (its tool gone, its
            arguments no longer valid) instead of a refusal.
        approvals: The worker's approval log (the one its calls' layers keep), where
            a call that waited for a decision and cannot be made now stops waiting.
    """

    # benchmark E: one per worker (A at N=10000 has 10,000 at once), no instance dict
    __slots__ = ("_last", "_seen", "approvals", "caller", "calls", "journal", "policy", "tools")

    def __init__(
        self,
        tools: ToolRegistry,
        *,
        policy: DispatchPolicy | None = None,
        calls: ToolHandler | None = None,
        caller: Caller | None = None,
        journal: Journal | None = None,
        approvals: ApprovalLog | None = None,
    ) -> None:
        self.tools = tools
        self.journal = journal
        self.approvals = approvals
        self.policy = policy = policy or DispatchPolicy()
        self.caller = caller = caller or Caller()
        if calls is None:  # workers.calls.tool_calls with no layer of a run's
            calls = RunTool(caller, policy.max_output_chars, policy.default_timeout)
            if caller.tracer.enabled:
                calls = Traced(calls, caller)
        self.calls = calls
        # The last batch and those of its calls that ended ok, so the next turn spots
        # a repeat without validating those calls again.
        self._last: Sequence[ToolCall] = ()
        self._seen: Seen = []

    async def dispatch(
        self,
        calls: Sequence[ToolCall],
        *,
        turn: int = 0,
        previous: Sequence[ToolCall] = (),
        cut_at: int | None = None,
    ) -> tuple[ToolMessage, ...]:
        """Run ``calls`` and return one observation per call, in call order.
        ``cut_at``: the output limit the answer asking for them was cut off at (None: it
        was not), so that arguments that are not JSON are told cut short, not malformed.

        Raises:
            ApprovalNeeded: when calls wait for a person's decision (none of the
                batch ran), or calls a tool made (a nested worker's) do.
            BudgetExceeded: when a tool's nested workers spent the run's budget.
            NotStarted: when a nested worker an earlier life left paused cannot start.
        """
        require_asyncio("Dispatcher.dispatch")
        results: Results = [None] * len(calls)
        # What a worker holds while its calls run is kept short (benchmark A at
        # N=10000): the turn's calls in their two lanes, their observations, no more.
        serial, parallel = await self._admitted(calls, previous, results, turn, cut_at)
        cap = self._cap_for(len(parallel))
        # A call beside calls that nest works in its worker's room as their nested
        # workers do: its worker does not leave its slot while it works.
        beside = self.tools.nests and _nesting(serial, parallel)
        ended: list[Outcome | Stopped]
        if not serial and len(parallel) < 2:  # no call needs a task of its own
            ended = [await self._run(parallel[0], cap, beside)] if parallel else []
        else:
            # The serial lane (or else the last parallel call) runs in this task, every
            # other call in a task of its own; a parallel call's value is how it ended.
            # The task group is this frame's, not a helper's: a worker holds every frame
            # it waits in (benchmark E).
            async with asyncio.TaskGroup() as group:
                tasks = self._started(group, parallel if serial else parallel[:-1], cap, beside)
                last = await (
                    self._serial(serial, results, beside)
                    if serial
                    else self._run(parallel[-1], cap, beside)
                )
            ended = [task.result() for task in tasks]
            if last is not None:
                ended.append(last)
        for call, outcome in zip(parallel, ended, strict=True):
            results[call.position] = self._observed(call, outcome)
        return _observations(results)

    async def _admitted(
        self,
        calls: Sequence[ToolCall],
        previous: Sequence[ToolCall],
        results: Results,
        turn: int,
        cut_at: int | None,
    ) -> tuple[list[Prepared], list[Prepared]]:
        """The calls that can run and that the layers admit, all of them before any
        runs, in two lanes: the side-effecting calls and the parallel-safe ones. Each
        other call's observation is put in ``results``."""
        ready = self._ready(calls, previous, results, turn, cut_at)
        if self.approvals is not None and len(ready) < len(calls):
            refused = [
                (call, r.content)
                for call, r in zip(calls, results, strict=True)
                if isinstance(r, ToolMessage) and r.status == "error"
            ]
            await withdraw(self.approvals, refused, turn)
        serial: list[Prepared] = []
        parallel: list[Prepared] = []
        if ready:
            for call, verdict in zip(ready, await self.calls.admit(ready), strict=True):
                if isinstance(verdict, Outcome):
                    results[call.position] = self._refused(call, verdict)
                else:
                    (serial if verdict.tool.side_effects else parallel).append(verdict)
        return serial, parallel

    def _ready(
        self,
        calls: Sequence[ToolCall],
        previous: Sequence[ToolCall],
        results: Results,
        turn: int,
        cut_at: int | None,
    ) -> list[Prepared]:
        """The calls that can run; the others get their observation now."""
        # A repeat is one of a call of the batch this dispatcher ran last that ended ok.
        # A batch it did not run (a resumed state's) has no repeats: how its calls ended
        # is not known here, and a call that failed may be made again.
        repeats: Seen | None = None
        if previous and previous is self._last and self.policy.skip_repeats:
            repeats = self._seen
        ready: list[Prepared] = []
        seen: Seen = []
        for index, call in enumerate(calls):
            found = self._prepare(index, call, repeats, seen, results, turn, cut_at)
            if found is not None:
                ready.append(found)
        self._last, self._seen = calls, seen
        return ready

    def _prepare(
        self,
        index: int,
        call: ToolCall,
        repeats: Seen | None,
        seen: Seen,
        results: Results,
        turn: int,
        cut_at: int | None,
    ) -> Prepared | None:
        """The call, ready to run; or None, and its observation is in ``results``.
        Calls whose arguments validate are added to ``seen`` (repeats included: a
        repeat of a repeat is one too; :meth:`_forget` takes out a call that does not
        end ok)."""
        found = self.tools.get(call.name)
        if found is None:
            available = ", ".join(self.tools.names) or "none"
            text = f"Error: unknown tool {call.name!r}. Available tools: {available}."
            results[index] = self._refuse(call, "error", text, turn)
            return None
        try:
            kwargs = found.parse_arguments(call.arguments)
        except ArgumentsError as exc:
            if exc.not_json and cut_at is not None:
                text = CUT_SHORT.format(error=exc, limit=cut_at)
            else:
                text = f"Error: {exc}. Fix the arguments and call again."
            results[index] = self._refuse(call, "error", text, turn)
            return None
        prepared = Prepared(position=index, call=call, tool=found, kwargs=kwargs, turn=turn)
        seen.append(prepared)
        if repeats is not None and _repeats(prepared, repeats):
            text = (
                f"Not executed: this repeats your previous call to {call.name!r} with the same "
                "arguments; its result is above. Use that result, change the arguments, or "
                "give your answer."
            )
            results[index] = self._refuse(call, "skipped", text, turn)
            return None
        return prepared

    def _refuse(
        self, call: ToolCall, status: ObservationStatus, content: str, turn: int
    ) -> ToolMessage:
        """The observation for a call that was not prepared, also reported as an event.
        A call of an earlier life that the journal knows is not refused: it gets the
        journal's answer, whatever became of its tool (gone, or its arguments no
        longer valid), as it would from the layers."""
        error: str | None = content
        known = journal_answer(self.journal, turn, call) if self.journal is not None else None
        if known is not None:
            status, content, error = known.status, known.content, known.error
        caller = self.caller
        if caller.tracer.enabled:
            caller.tracer.emit(
                ToolCallFinished(
                    worker=caller.worker,
                    run_id=caller.run_id,
                    turn=turn,
                    call_id=call.id,
                    tool=call.name,
                    status=status,
                    duration_s=0.0,
                    error=error,
                )
            )
        return ToolMessage(tool_call_id=call.id, name=call.name, status=status, content=content)

    def _refused(self, call: Prepared, outcome: Outcome) -> ToolMessage:
        """The observation for a call the layers refused, also reported as an event, as
        every call the model has the observation of is."""
        self._forget(call)  # refused: its repeat may be allowed next turn
        if self.caller.tracer.enabled:
            finished(self.caller, call, outcome, 0.0)
        return outcome.observation(call.call)

    def _cap_for(self, parallel: int) -> anyio.CapacityLimiter | None:
        """A limiter for this batch, only when it has more calls than the cap allows."""
        cap = self.policy.max_concurrency
        return anyio.CapacityLimiter(cap) if parallel > cap else None

    def _started(
        self,
        group: asyncio.TaskGroup,
        calls: Sequence[Prepared],
        cap: anyio.CapacityLimiter | None,
        beside: bool,
    ) -> list[asyncio.Task[Outcome | Stopped]]:
        """Each call's run started in a task of ``group`` (here, not in :meth:`dispatch`:
        a comprehension there would keep what it uses in cells for as long as the turn
        runs)."""
        return [group.create_task(self._run(call, cap, beside)) for call in calls]

    def _run(
        self, call: Prepared, cap: anyio.CapacityLimiter | None, beside: bool
    ) -> Coroutine[Any, Any, Outcome | Stopped]:
        """One call through the layers: their own awaitable, unless the call holds a
        slot of the batch's cap, or may wait for a person (a call of a tool that
        nests: the turn's other calls go on), or works ``beside`` such calls, and so
        needs a frame of its own."""
        if cap is None and not call.tool.nests and not beside:
            return self.calls(call)
        return self._caught(call, cap, beside)

    async def _caught(
        self, call: Prepared, cap: anyio.CapacityLimiter | None, beside: bool
    ) -> Outcome | Stopped:
        # A call beside calls that nest works in the worker's room while they may wait.
        strand = nested_work() if beside and not call.tool.nests else _HOLDS_NOTHING
        try:
            async with cap or _HOLDS_NOTHING, strand:
                return await self.calls(call)
        except STOPS as stopped:  # the turn's others go on
            return stopped

    def _observed(self, call: Prepared, ended: Outcome | Stopped) -> ToolMessage | Stopped:
        """What is in the turn's results for ``call``, which ended as ``ended``."""
        if isinstance(ended, STOPS):
            return ended
        if ended.status != "ok":
            self._forget(call)
        if not ended.ran and self.caller.tracer.enabled:  # answered from the journal
            finished(self.caller, call, ended, 0.0)
        return ended.observation(call.call)

    def _forget(self, call: Prepared) -> None:
        """Take ``call`` out of the batch's calls a repeat of which is skipped: it did not
        end ok (an error, a timeout, a refusal, an unknown end), so the model has no
        result to use instead, and may make it again."""
        # By its place in the batch: what a repeat is compared with is its arguments as
        # the model gave them (a person may have edited those it ran with).
        self._seen = [p for p in self._seen if p.position != call.position]

    async def _serial(self, serial: list[Prepared], results: Results, beside: bool) -> None:
        """The side-effecting calls, one at a time, in the order the model gave them,
        each observation put in its place in ``results`` (none after one that waits:
        they run when the turn goes on)."""
        for call in serial:
            ended = await self._caught(call, None, beside)
            results[call.position] = self._observed(call, ended)
            if isinstance(ended, STOPS):
                return
