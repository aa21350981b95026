"""The worker phase of a run: the plan's DAG, scheduled under the failure policy.

Every subtask gets a task at once; it waits for the subtasks it depends on, then for
one of ``max_workers`` slots, then runs its worker under the worker timeout. A
subtask whose dependency failed is skipped as soon as that one ends. The failure
policy may stop the phase early, cancelling whatever still runs; under ``quorum``, a
plan with fewer subtasks than the quorum stops it before any worker starts.

In a resumed run, subtasks that finished before are not run again (their stored
results stand), and those that had started continue from their saved loop state.

A worker whose role says ``memory: {store_result: true}`` has its answer kept in the
memory once it ends well, before it is reported finished.

A worker whose calls wait for a person's approval pauses, out of its slot: the others
go on, and subtasks that depend on it wait. So does one whose approver asks a person in
the run, once nothing else of it works (its nested workers, whose slot is its own): its
slot is another's until the person has decided (:mod:`runtime.limits.room`). A decision
recorded by this process (its run's bell rings) or elsewhere (found in the store) lets it go
on; once nothing else can proceed, the paused workers end ``waiting`` (not a failure),
and so do the subtasks after them: a resumed run continues them.

In a run planned in rounds, each round's scheduler gets the whole plan so far and the
outcomes of the rounds before (``earlier``): those stand as they are (no worker, no
event), and the new subtasks may wait for them.

With a store, a subtask is reported finished (``worker.finished``) once its result is
committed, so the event never runs ahead of what a resume would find.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING

from honeycomb.run.context import RunContext
from honeycomb.run.events import WorkerFinished, WorkerStarted
from honeycomb.run.handing import fitted_inputs, reader_of
from honeycomb.run.plan import Plan, Subtask
from honeycomb.run.policy import Policy
from honeycomb.run.result import SubtaskResult, SubtaskStatus, why_failed
from runtime import BudgetExceeded, HoneycombError, RunFailed
from runtime.concurrency import TimedOut, innermost, run_together, stoppable
from runtime.events import event_time, tell_as_of
from runtime.limits.budget import InFlight
from runtime.limits.cut import keep_cut, worker_cut
from runtime.limits.room import Room, in_room, nested_work
from runtime.limits.worktime import OwnTime, in_clock
from workers import Worker, WorkerError, WorkerResult

if TYPE_CHECKING:
    from honeycomb.run.record import RunRecord
    from honeycomb.run.restore import Resumed
    from honeycomb.run.worker_record import WorkerRecord
    from workers.state import LoopState

__all__ = ["Scheduler", "stopped_error", "stopped_status", "why_stopped"]


class Scheduler:
    """Runs one plan's subtasks; :attr:`outcomes` fills in as they finish."""

    def __init__(
        self,
        plan: Plan,
        context: RunContext,
        policy: Policy,
        *,
        record: RunRecord | None = None,
        resumed: Resumed | None = None,
        earlier: dict[str, SubtaskResult] | None = None,
        most: int | None = None,
    ) -> None:
        self.plan = plan
        # The most subtasks the run's plan can come to: later rounds may add to it (up
        # to ``most``, which a plan of the caller's own may already be past).
        self._most = max(most or 0, len(plan.subtasks))
        self.record = record
        self._before = resumed.finished if resumed is not None else {}
        self._states = resumed.states if resumed is not None else {}
        self.context = context
        self.policy = policy
        self.outcomes: dict[str, SubtaskResult] = dict(earlier or {})
        self.stopped: HoneycombError | None = None
        # The phase of the run whose worker's call this one's run is part of (a hive
        # called as a tool): what stops that phase stops this one too.
        self._caller = _running.get()
        self._by_id = {s.id: s for s in plan.subtasks}
        self._new = [s for s in plan.subtasks if s.id not in self.outcomes]
        # A subtask with dependencies waits for its event: set once they have all
        # finished, or as soon as one did not succeed (it is skipped then, and those
        # after it: a quorum knows at once what can no longer succeed).
        self._ready: dict[str, asyncio.Event] = {}
        self._left: dict[str, int] = {}  # its dependencies not finished yet
        self._after: dict[str, list[str]] = {}  # the subtasks waiting for one
        for waiting in self._new:
            if not waiting.depends_on:
                continue
            ready = self._ready[waiting.id] = asyncio.Event()
            ended = [d for d in waiting.depends_on if d in self.outcomes]  # earlier rounds
            left = set(waiting.depends_on) - set(ended)
            self._left[waiting.id] = len(left)
            for dep in left:
                self._after.setdefault(dep, []).append(waiting.id)
            if not left or any(_lost(self.outcomes[d]) for d in ended):
                ready.set()
        # No limiter when every subtask fits: acquiring one costs time per worker.
        fits = policy.max_workers >= len(self._new)
        self._slots = None if fits else asyncio.Semaphore(policy.max_workers)
        self._started = time.perf_counter()
        self._cancel: Callable[[], None] = lambda: None
        self._lost = sum(1 for o in self.outcomes.values() if _lost(o))
        self._fatal: BaseException | None = None  # what a worker's task raised (see run)
        self._paused: set[str] = set()  # waiting for decisions on their calls
        self._began: dict[str, float] = {}  # when each started worker started
        self._idle = False  # some are paused, and nothing else can proceed

    async def run(self) -> dict[str, SubtaskResult]:
        """Run every subtask; raise what stopped the phase early, if anything did.

        Raises:
            RunFailed: when the failure policy gave up.
            BudgetExceeded: when a worker's next call would go past the run's budget,
                or its workers' calls went past ``total_tokens`` or ``cost``.
            BaseException: what a subtask's task raised rather than a result (a tool's or
                model's KeyboardInterrupt or SystemExit ...), once every other worker is
                cancelled.
        """
        self._started = time.perf_counter()
        self._check_plan_size()
        if self.stopped is None:
            running = _running.set(self)  # its workers' tasks, and their nested workers'
            try:
                async with stoppable() as stop:
                    self._cancel = stop
                    await run_together(None, [self._run_subtask(s) for s in self._new])
            finally:
                _running.reset(running)
        if self._fatal is not None:
            raise self._fatal
        if self.stopped is None:
            # Workers' calls under way together can take the run past its tokens or
            # cost: it ends over budget, the workers that finished keeping their results.
            self.stopped = self.context.budget.overspent()
        stopped = stopped_status(self.stopped)
        if self.stopped is None and self._waiting():
            stopped = "waiting"  # blocked behind a subtask that waits
        why = stopped_error(self.stopped)
        for subtask in self.plan.subtasks:
            if subtask.id not in self.outcomes:
                self.outcomes[subtask.id] = SubtaskResult(
                    subtask=subtask, status=stopped, error=why
                )
        ordered = {s.id: self.outcomes[s.id] for s in self.plan.subtasks}
        self.outcomes = ordered
        if self.stopped is not None:
            raise self.stopped
        return ordered

    async def _inputs(self, subtask: Subtask) -> dict[str, str] | None:
        """The results of the subtasks ``subtask`` depends on, once they have all
        finished; None, and ``subtask`` is skipped, as soon as one of them did not
        succeed."""
        await self._ready[subtask.id].wait()
        by_id, outcomes = self._by_id, self.outcomes
        failed = [d for d in subtask.depends_on if d in outcomes and _lost(outcomes[d])]
        if failed:
            why = f"not run: it depends on {', '.join(failed)}, which did not succeed"
            await self._finish(
                subtask, "skipped", None, WorkerError(type="DependencyFailed", message=why)
            )
            return None
        if any(outcomes[d].status == "waiting" for d in subtask.depends_on):
            # It waits too, and so do those after it: not finished (no event, nothing
            # stored), a resumed run runs it.
            outcomes[subtask.id] = SubtaskResult(subtask=subtask, status="waiting")
            self._release(subtask.id, lost=False)
            return None
        return {f"{d} ({by_id[d].role})": outcomes[d].handed_on for d in subtask.depends_on}

    @property
    def elapsed_s(self) -> float:
        return time.perf_counter() - self._started

    async def _run_subtask(self, subtask: Subtask) -> None:
        """A subtask's whole life. Its worker runs in this coroutine itself, not in one
        it awaits: while they run, workers hold one frame of the scheduler's each."""
        prepared = await self._prepared(subtask)
        if prepared is None:
            return  # finished before, skipped, or failed to start
        worker, inputs, state, record = prepared
        del prepared  # the tuple would be held as long as the worker runs
        limit = self.policy.worker_timeout_s
        # Its slot, which it leaves while its approver asks a person (runtime.limits.room).
        room = Room(self._slots) if self._slots is not None else None
        result: WorkerResult | None = None
        cut_off: list[InFlight] = []  # what it had under way as its time limit cut it off
        # One clock for the whole life: a pause for a decision (between two stretches
        # of its run) does not give it its limit anew.
        own = OwnTime(limit) if limit is not None else None
        try:
            while True:  # in one of the slots, under the worker timeout (None: past it)
                if room is not None:
                    await room.take()
                try:
                    running = self._running(subtask, worker, inputs, state)
                    if own is None:
                        result = await running
                    else:
                        try:
                            # A person's time deciding on its calls is not its own.
                            with own.stretch() as deadline:
                                self._keep_cut_off(subtask, cut_off)
                                result = await running
                        except TimedOut:
                            if not deadline.expired:
                                raise
                            result = None
                finally:
                    if room is not None:
                        room.give_back()
                # Paused for approval: on again once its calls are decided in this
                # process, unless nothing else can proceed first (then it ends waiting).
                if result is None or result.status != "waiting" or record is None:
                    break
                if not await self._decided(subtask, result, record):
                    break
                state = result.state
        except asyncio.CancelledError:
            started = self._began.get(subtask.id)
            if started is not None:  # its end is the run's (it is stopped, or cancelled)
                self._stopped_now(subtask, started)
            raise
        except BaseException as exc:  # no result: KeyboardInterrupt, SystemExit ... stop all
            if self._fatal is None:
                self._fatal = exc
            started = self._began.get(subtask.id)
            if started is not None:  # its end is the run's, which it stops
                self._stopped_now(subtask, started, raised=innermost(exc))
            self._cancel()
            # Raised by run(), in the run's own task: out of a task of its own, asyncio
            # would let a KeyboardInterrupt or SystemExit escape its event loop.
            return
        await self._ended(subtask, worker, result, self._began.get(subtask.id), cut_off)

    async def _prepared(
        self, subtask: Subtask
    ) -> tuple[Worker, dict[str, str] | None, LoopState | None, WorkerRecord | None] | None:
        """The subtask's worker, its inputs, the state it resumes from and its record;
        None when it is not to run: it finished in an earlier life of this run, a
        dependency did not succeed, or its tools cannot be had (it has its outcome)."""
        before = self._before.get(subtask.id)
        if before is not None:  # finished in an earlier life of this run
            await self._finish(
                subtask,
                before.status,
                self._revalidated(subtask, before.worker),
                before.error,
                before.started_s,
                stored=True,
            )
            return None
        inputs = None
        if subtask.depends_on:
            inputs = await self._inputs(subtask)
            if inputs is None:
                return None  # skipped
        ctx = self.context
        try:
            await ctx.crew.prepare([ctx.roles[subtask.role]])
        except HoneycombError as exc:  # its MCP tools cannot be had: it fails alone
            error = WorkerError(type=type(exc).__name__, message=str(exc))
            # Not finished: it never started (a server down, a tool it no longer lists),
            # so a resumed run starts it again, from where an earlier life left it.
            await self._finish(subtask, "failed", None, error, self.elapsed_s, again=True)
            return None
        state = self._states.get(subtask.id)
        record = None
        if self.record is not None:
            record = self.record.worker(subtask.id, len(state.messages) if state else 0)
        worker = ctx.worker(subtask.role, name=subtask.id, store=record)
        if inputs is not None and state is None:  # within what its model holds
            shown = ctx.shown_to(subtask.role)  # under its instruction, as its worker says it
            told = f"{subtask.instruction}\n\n{shown}" if shown else subtask.instruction
            try:
                inputs = fitted_inputs(told, inputs, subtask.depends_on, reader_of(ctx, worker))
            except HoneycombError as exc:  # its role's token counter failed: it fails alone,
                # as its worker does when the counter fails on what it holds.
                error = WorkerError(type=type(exc).__name__, message=str(exc))
                await self._finish(subtask, "failed", None, error, self.elapsed_s)
                return None
        return worker, inputs, state, record

    @property
    def reason(self) -> HoneycombError | None:
        """What stopped its phase (:attr:`stopped`), or, for a sub-run's (a hive called
        as a tool), the phase of the run that called it, whose budget it spends."""
        if self.stopped is not None or self._caller is None:
            return self.stopped
        return self._caller.reason

    def _stopped_now(
        self, subtask: Subtask, started: float, *, raised: BaseException | None = None
    ) -> None:
        """A started subtask's worker cut off by the end of its run (or ending it, with
        what it ``raised``: a KeyboardInterrupt, a SystemExit), reported as an event:
        every ``worker.started`` has its ``worker.finished``."""
        ctx = self.context
        if ctx.tracer.enabled:
            reason = self.reason
            why = stopped_error(reason if raised is None else raised)
            ctx.tracer.emit(
                WorkerFinished(
                    worker=subtask.id,
                    run_id=ctx.run_id,
                    role=subtask.role,
                    status=stopped_status(reason),
                    duration_s=self.elapsed_s - started,
                    error=str(why) if why is not None else None,
                )
            )

    def _started_now(self, subtask: Subtask) -> None:
        """The subtask's worker starts (now, or, on the run's backend, when it began
        there, which :data:`~runtime.events.told_at` says; the first time only: not
        again as it goes on after a pause), reported as an event; :attr:`_began` keeps
        when."""
        if subtask.id in self._began:
            return
        ctx = self.context
        if ctx.tracer.enabled:
            ctx.tracer.emit(WorkerStarted(worker=subtask.id, run_id=ctx.run_id, role=subtask.role))
        self._began[subtask.id] = self.elapsed_s - (time.time() - event_time())

    def _running(
        self,
        subtask: Subtask,
        worker: Worker,
        inputs: dict[str, str] | None,
        state: LoopState | None,
    ) -> Awaitable[WorkerResult]:
        """The worker's run, from ``state`` if given, here (it starts now) or on the run's
        backend (it starts once the backend has room for it: not its wait for that)."""
        ctx = self.context
        backend = ctx.backend
        task, shown = subtask.instruction, ctx.shown_to(subtask.role)
        keep = not ctx.holds_answers  # else kept once the run's output guards pass them
        if backend is None:
            self._started_now(subtask)
            running = worker.run(task, inputs=inputs, resume=state, conversation=shown, keep=keep)
        else:
            running = backend.run_worker(
                worker,
                task,
                inputs=inputs,
                resume=state,
                conversation=shown,
                keep=keep,
                started=functools.partial(self._started_now, subtask),
            )
        if in_clock() or (self._slots is None and in_room()):  # a sub-run's worker
            return _nested(running)
        return running

    def _keep_cut_off(self, subtask: Subtask, found: list[InFlight]) -> None:
        """Keep in ``found`` the calls the subtask's worker has under way when its time
        limit cuts it off (a judge's, say), which its error names; and a recording's
        cassette keeps where it falls, whether or not a call was made under it."""
        cut, budget = worker_cut.get(), self.context.budget
        if cut is not None:
            cut.tell(lambda _: found.extend(budget.in_flight_of(subtask.id)), found)
            keep_cut(self.context.services.tracer.handlers, cut, subtask.id)

    async def _ended(
        self,
        subtask: Subtask,
        worker: Worker,
        result: WorkerResult | None,
        started: float | None,
        cut_off: Sequence[InFlight] = (),
    ) -> None:
        """Record how the worker ended: its result (None: past the worker timeout, with
        what it had under way then, ``cut_off``)."""
        if result is None:
            limit = self.policy.worker_timeout_s or 0.0
            said = f"the worker ran past {limit:g}s, its policy's worker_timeout_s (raise it)"
            if cut_off:
                said += f"; cut off in flight: {'; '.join(map(str, cut_off))}"
            error = WorkerError(type="WorkerTimeout", message=said)
            await self._finish(subtask, "failed", None, error, started)
            return
        refused = result.exception
        if isinstance(refused, BudgetExceeded):
            self._stop(refused)
        await self._finish(subtask, result.status, result, self._error_of(result), started)

    async def _decided(self, subtask: Subtask, result: WorkerResult, record: WorkerRecord) -> bool:
        """Wait, paused, until every call ``result`` waits on is decided (True), or
        until nothing else in the run can proceed (False). A decision of this process
        wakes it at once (the run record's bell rings); one recorded elsewhere (another
        process: a web page's server, ``honeycomb approve``) is found in the store,
        which it reads every :data:`~honeycomb.run.worker_record.LOOK_EVERY_S`, and once
        more before it gives up."""
        from honeycomb.run.decide import decided_among, waits_on
        from honeycomb.run.worker_record import watched

        assert self.record is not None
        # By worker too: a call it waits on may be a nested worker's (agent:ROLE).
        wanted = waits_on(result.pending)
        self._paused.add(subtask.id)
        try:
            entries = await watched(
                self.record, lambda found: decided_among(found, wanted) or None, self._gave_up
            )
        finally:
            self._paused.discard(subtask.id)
        if entries is None:
            return False
        record.decisions.update(
            {
                (e.pending.turn, e.pending.call_id): e
                for e in entries
                if e.pending.worker == subtask.id
            }
        )
        self.record.decided(entries)  # a nested worker's record reads them
        return True

    def _gave_up(self) -> bool:
        """Whether the paused workers give up waiting: nothing else can proceed."""
        self._check_idle()
        return self._idle

    def _check_idle(self) -> None:
        """Once some workers are paused and no other subtask can proceed, the phase
        is over: the paused ones end waiting."""
        if self._idle or not self._paused:
            return
        for subtask in self._new:
            if subtask.id in self.outcomes or subtask.id in self._paused:
                continue
            if all(d in self.outcomes for d in subtask.depends_on):
                return  # it runs, or is about to
        self._idle = True
        assert self.record is not None  # only a kept worker pauses
        self.record.bell.ring()  # the paused ones give up

    def _error_of(self, result: WorkerResult) -> WorkerError | None:
        """A worker's error; for one the store failed, the store's error, not that of
        the task group it came out of."""
        if self.record is None or result.exception is None:
            return result.error
        from honeycomb.run.record import store_failure

        failure = store_failure(result.exception)
        if failure is None:
            return result.error
        return WorkerError(type=type(failure).__name__, message=str(failure))

    async def _finish(
        self,
        subtask: Subtask,
        status: SubtaskStatus,
        result: WorkerResult | None,
        error: WorkerError | None,
        started: float | None = None,
        *,
        stored: bool = False,
        again: bool = False,
    ) -> None:
        now = self.elapsed_s
        duration = result.duration_s if result is not None else now - (started or now)
        outcome = self.outcomes[subtask.id] = SubtaskResult(
            subtask=subtask,
            status=status,
            worker=result,
            error=error,
            started_s=started if started is not None else now,
            duration_s=duration,
        )
        ended_at = None if stored else self._ended_at(result)
        if self.record is not None and not stored:
            try:
                await self.record.subtask_finished(outcome, again=again)  # durable, then reported
            except asyncio.CancelledError:
                # The run stops as it is written: its record keeps it with the run's end,
                # and its worker's end is told all the same.
                self._reported(outcome, ended_at)
                raise
        self._reported(outcome, ended_at)
        lost = _lost(outcome)
        self._release(subtask.id, lost=lost)
        if lost:
            self._lost += 1
            self._apply_failure_policy(subtask, error)
        self._check_idle()

    def _ended_at(self, result: WorkerResult | None) -> float | None:
        """When a worker that ran on the run's backend ended there (its result's start
        and duration, in this process's clock), which its span ends at, not as its
        result came; None: here, now."""
        if self.context.backend is None or result is None or not result.started_at:
            return None
        return result.started_at + result.duration_s

    def _reported(self, outcome: SubtaskResult, at: float | None = None) -> None:
        """Tell of a subtask's end (``worker.finished``), which happened at ``at``
        (:data:`~runtime.events.told_at`; None: now)."""
        ctx, subtask, error = self.context, outcome.subtask, outcome.error
        if ctx.tracer.enabled:
            finished = WorkerFinished(
                worker=subtask.id,
                run_id=ctx.run_id,
                role=subtask.role,
                status=outcome.status,
                duration_s=outcome.duration_s,
                error=str(error) if error is not None else None,
            )
            tell_as_of(at, ctx.tracer.emit, finished)

    def _release(self, subtask_id: str, *, lost: bool) -> None:
        """Tell the subtasks waiting for ``subtask_id`` that it ended (``lost``: without
        success, and they are skipped)."""
        for after in self._after.get(subtask_id, ()):
            self._left[after] -= 1
            if lost or not self._left[after]:
                self._ready[after].set()

    def _waiting(self) -> bool:
        return any(o.status == "waiting" for o in self.outcomes.values())

    def _revalidated(self, subtask: Subtask, result: WorkerResult | None) -> WorkerResult | None:
        """A stored result, its output made the role's output type again (as it was
        kept, when the role is gone since)."""
        role = self.context.roles.get(subtask.role)
        if result is None or role is None:
            return result
        from honeycomb.run.restore import retyped

        setup = self.context.crew.setup_for(role, None)
        return retyped(result, "output", setup.settings.output_type)

    def _check_plan_size(self) -> None:
        """Under ``failure: quorum``, stop before any worker starts when the plan has,
        and can come to, fewer subtasks than the quorum: not even all of them
        succeeding would reach it."""
        needed = self.policy.quorum
        if self.policy.failure == "quorum" and needed is not None and self._most < needed:
            has = "has only" if self._most == len(self.plan.subtasks) else "can come to only"
            self._stop(
                RunFailed(
                    f"a quorum of {needed} successful subtasks cannot be reached: the plan "
                    f"{has} {self._most}"
                )
            )

    def _apply_failure_policy(self, subtask: Subtask, error: WorkerError | None) -> None:
        policy = self.policy
        if policy.failure == "fail_fast":
            self._stop(
                RunFailed(f"subtask {subtask.id!r} failed ({error}); failure policy is fail_fast")
            )
        elif policy.failure == "quorum":
            needed = policy.quorum or 0
            lost = self._lost
            if self._most - lost < needed:
                self._stop(
                    RunFailed(
                        f"a quorum of {needed} successful subtasks out of {self._out_of} "
                        f"cannot be reached: {lost} did not succeed"
                        f"{why_failed(self.outcomes.values())}"
                    )
                )

    @property
    def _out_of(self) -> str:
        """How many subtasks the run's plan has, or can come to."""
        if self._most == len(self.plan.subtasks):
            return str(self._most)
        return f"at most {self._most}"

    def _stop(self, reason: HoneycombError) -> None:
        if self.stopped is None:
            self.stopped = reason
        self._cancel()


_running: ContextVar[Scheduler | None] = ContextVar("honeycomb_scheduler", default=None)
"""The scheduler whose worker phase the current task is part of."""


def why_stopped() -> HoneycombError | None:
    """What stopped the worker phase the current task is part of (a budget, its wall
    time, the failure policy), if anything did: what a nested worker cut off with its
    caller ends of (:func:`stopped_status`)."""
    scheduler = _running.get()
    return scheduler.reason if scheduler is not None else None


async def _nested(running: Awaitable[WorkerResult]) -> WorkerResult:
    """A sub-run's worker: one of the nested workers of the work its caller's call is
    part of, as an agent tool's is (:func:`~runtime.limits.room.nested_work`), in its
    caller's room when the sub-run has no ``max_workers`` slots of its own to share,
    and beside its caller's other work against their time limits."""
    async with nested_work():
        return await running


def _lost(outcome: SubtaskResult) -> bool:
    """Whether a subtask ended without success: neither ``ok`` nor ``waiting`` (which
    a resumed run goes on with)."""
    return outcome.status not in ("ok", "waiting")


def stopped_error(reason: BaseException | None) -> WorkerError | None:
    """Why a subtask that the end of its run stopped did not finish: what ended the
    run (None: nothing did, it waits)."""
    if reason is None:
        return None
    return WorkerError(type=type(reason).__name__, message=f"the run stopped: {reason}")


def stopped_status(reason: BaseException | None) -> SubtaskStatus:
    """The status of a subtask that the end of its run stopped: ``over_budget`` when a
    budget ended the run, so every worker it stopped has the same status, else
    ``cancelled``."""
    return "over_budget" if isinstance(reason, BudgetExceeded) else "cancelled"
