"""One call of :meth:`honeycomb.Executor.run`: its phases (plan, workers, aggregate),
its record in the run store, and its result."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from honeycomb.run.context import RunContext
from honeycomb.run.events import (
    AggregationFinished,
    AggregationStarted,
    PlanReady,
    RunFinished,
    RunStarted,
)
from honeycomb.run.plan import Plan, critical_path
from honeycomb.run.planner import StaticPlanner, SubtaskSpec
from honeycomb.run.result import RunResult, RunTimings, SubtaskResult, answer_as_text
from honeycomb.run.scheduler import Scheduler, stopped_status
from honeycomb.trace.spans import SpanRecorder
from runtime import (
    Budget,
    BudgetExceeded,
    ConfigError,
    EventHandler,
    HoneycombError,
    RunFailed,
    Tracer,
)
from runtime._concurrency import shielded
from runtime._text import valid_text

if TYPE_CHECKING:
    from honeycomb.run.record import RunRecord
    from honeycomb.run.restore import Resumed
    from honeycomb.run.shared import Shared

__all__ = ["Run"]


class Run:
    """One call of :meth:`Executor.run`: its phases, record and result.

    Args:
        shared: What the Executor's runs share (roles, models, policy, store ...).
        task: The task.
        run_id: The run's id.
        handlers: Called with every event of this run, after the Executor's own.
        text: The handlers also get the answers' text as it is written (models that
            can stream do, as :class:`~runtime.events.TextDelta` events).
    """

    def __init__(
        self,
        shared: Shared,
        task: str,
        run_id: str,
        handlers: Sequence[EventHandler],
        *,
        text: bool = False,
    ) -> None:
        self.shared = shared
        self.task = task
        self.run_id = run_id
        policy = shared.policy
        store = shared.store
        self.record: RunRecord | None = None
        if store is not None:
            # The run store's modules (and sqlite3) load with the first run that keeps one.
            from honeycomb.run.record import RunRecord

            self.record = RunRecord(store, run_id, policy.on_unknown_outcome)
        # The span recorder takes every event last, after the callers' handlers.
        recorder = [SpanRecorder(self.record.span if self.record is not None else None)]
        self.tracer = Tracer(
            *shared.handlers, *handlers, *(recorder if shared.trace else ()),
            log=shared.log_events, text=text,
        )  # fmt: skip
        self.context = RunContext(
            run_id=run_id,
            roles=shared.roles,
            max_subtasks=policy.max_subtasks,
            plan_attempts=policy.plan_attempts,
            budget=Budget(policy.budgets.limits()),
            tracer=self.tracer,
            locks=shared.locks,
            tool_limiter=shared.tool_limiter,
            model_for=shared.model_for,
            setup_for=shared.setup_for,
            summarizer_for=shared.summarizer_for,
            prepare=shared.prepare,
            approver=shared.approver,
            approval_timeout_s=policy.approval_timeout_s,
            backend=shared.backend,
        )
        self.plan = Plan(subtasks=())
        self.scheduler: Scheduler | None = None
        self.times = {"plan": 0.0, "workers": 0.0, "aggregate": 0.0}
        self.started = time.perf_counter()
        self.resumed: Resumed | None = None

    async def execute(
        self, subtasks: Plan | Sequence[SubtaskSpec] | None, *, resumable: bool, steal: bool
    ) -> RunResult:
        if self.record is not None:
            done = await self._open_record(resumable, steal)
            if done is not None:
                return done
        self.tracer.emit(RunStarted(run_id=self.run_id, task=self.task))
        try:
            result = await self._within_wall_time(subtasks)
        except (BudgetExceeded, RunFailed) as exc:
            await self._fail(exc)
            raise
        except HoneycombError as exc:
            await self._finished("failed", None, exc)
            raise
        except asyncio.CancelledError as exc:
            await self._interrupted(exc)
            raise
        except BaseException as exc:  # KeyboardInterrupt, SystemExit ... from a tool or model
            stopped = _original(exc)
        else:
            await self._finished(result.status, result, None)
            return result
        if isinstance(stopped, Exception):  # an error that came out of a task group
            await self._finished("failed", None, stopped)
        else:
            await self._interrupted(stopped)
        raise stopped  # itself, not the exception group of a task it was raised in

    async def _within_wall_time(self, subtasks: Plan | Sequence[SubtaskSpec] | None) -> RunResult:
        """The run's phases under its wall-time budget, if it has one.

        Raises:
            BudgetExceeded: when the budget's own deadline passed (a TimeoutError raised
                inside the run, by a planner, an aggregator or a store, stays itself).
        """
        wall = self.shared.policy.budgets.wall_time_s
        deadline = asyncio.timeout(wall)
        try:
            async with deadline:
                return await self._phases(subtasks)
        except TimeoutError:
            if not deadline.expired():
                raise
        raise BudgetExceeded("wall_time_s", wall or 0.0, round(self._elapsed(), 3))

    async def _interrupted(self, exc: BaseException) -> None:
        """Record the run as interrupted, whatever stops it (cancellation, Ctrl-C, a
        tool's SystemExit ...): every finished worker is kept, and a resume continues."""
        try:
            await shielded(self._finished("interrupted", None, None))
        except HoneycombError as error:  # the run stops anyway, for what stops it
            exc.add_note(f"Honeycomb could not record the run as interrupted: {error}")

    async def _open_record(self, resumable: bool, steal: bool) -> RunResult | None:
        """Take the run's lease and start its record, or pick up the stored run of the
        same id: return its result if it ended with one, else remember what to
        continue from."""
        record = self.record
        assert record is not None
        await record.store.open()
        await record.take(steal=steal)
        try:
            done = await self._pick_up(record, resumable)
        except BaseException:
            await shielded(record.release())
            raise
        if done is not None:
            await record.release()
        return done

    async def _pick_up(self, record: RunRecord, resumable: bool) -> RunResult | None:
        from honeycomb.run.restore import restore, retyped, stored_result

        stored = await record.store.load(self.run_id) if resumable else None
        if stored is not None:
            if stored.task != valid_text(self.task):  # as the store keeps text
                raise ConfigError(
                    f"run {self.run_id!r} in {record.store.path} was started with another "
                    f"task ({stored.task[:60]!r}); resume it with its own task, or use a "
                    "new run_id"
                )
            done = stored_result(stored)
            if done is not None:
                return retyped(done, "answer", self.shared.output_type)
            self.resumed = restore(stored)
            record.use_journals(self.resumed.journals)
            record.use_approvals(self.resumed.approvals)
            self.context.budget.restore(self.resumed.spent)
        record.started(self.task, self.shared.source, resumed=stored is not None)
        return None

    async def _phases(self, subtasks: Plan | Sequence[SubtaskSpec] | None) -> RunResult:
        if self.resumed is not None and self.resumed.plan is not None:
            subtasks = self.resumed.plan  # the plan of the earlier life: never re-planned
        planner = self.shared.planner if subtasks is None else StaticPlanner(subtasks)
        if planner is None:
            raise ConfigError(
                "no planner: pass subtasks=..., define a role named 'planner', or give "
                "the Executor a planner"
            )
        began = time.perf_counter()
        self.plan = await planner.plan(self.task, self.context)
        self.times["plan"] = time.perf_counter() - began
        self.tracer.emit(
            PlanReady(run_id=self.run_id, plan=self.plan, duration_s=self.times["plan"])
        )
        if self.record is not None:
            self.record.planned(self.plan)

        self.scheduler = Scheduler(
            self.plan, self.context, self.shared.policy, record=self.record,
            resumed=self.resumed,
        )  # fmt: skip
        began = time.perf_counter()
        self.shared.paused[self.run_id] = self.scheduler.notify
        try:
            outcomes = await self.scheduler.run()
        finally:
            self.shared.paused.pop(self.run_id, None)
            self.times["workers"] = time.perf_counter() - began
        if any(o.status == "waiting" for o in outcomes.values()):
            return self._result("waiting", outcomes)  # nothing else can proceed: no answer yet
        if not any(o.ok for o in outcomes.values()):
            raise RunFailed(f"all {len(outcomes)} subtasks failed; nothing to aggregate")

        began = time.perf_counter()
        self.tracer.emit(AggregationStarted(run_id=self.run_id, results=len(outcomes)))
        answer = await self.shared.aggregator.aggregate(
            self.task, list(outcomes.values()), self.context
        )
        self.times["aggregate"] = time.perf_counter() - began
        self.tracer.emit(
            AggregationFinished(run_id=self.run_id, duration_s=self.times["aggregate"])
        )
        status = "ok" if all(o.ok for o in outcomes.values()) else "partial"
        return self._result(status, outcomes, answer)

    def _result(
        self, status: str, outcomes: Mapping[str, SubtaskResult], answer: Any = None
    ) -> RunResult:
        durations = {k: o.duration_s for k, o in outcomes.items()}
        worker_sum = sum(durations.values())
        wall = self._elapsed()
        fixed = self.times["plan"] + self.times["aggregate"]
        path = fixed + (critical_path(self.plan, durations) if self.plan.subtasks else 0.0)
        serial = fixed + worker_sum
        pending = [p for o in outcomes.values() if o.worker is not None for p in o.worker.pending]
        return RunResult(
            run_id=self.run_id,
            pending=pending,
            task=self.task,
            status=status,
            answer=answer,
            answer_text=answer_as_text(answer),
            plan=self.plan,
            subtasks=dict(outcomes),
            usage=self.context.budget.usage,
            max_workers=self.shared.policy.max_workers,
            timings=RunTimings(
                wall_s=wall,
                plan_s=self.times["plan"],
                workers_s=self.times["workers"],
                aggregate_s=self.times["aggregate"],
                critical_path_s=path,
                sum_worker_s=worker_sum,
                serial_s=serial,
                speedup=serial / wall if wall > 0 else 1.0,
            ),
        )

    async def _fail(self, exc: BudgetExceeded | RunFailed) -> None:
        outcomes = self.scheduler.outcomes if self.scheduler is not None else {}
        if self.scheduler is not None:
            stopped = stopped_status(exc)
            for subtask in self.plan.subtasks:  # the wall-time budget interrupts mid-phase
                outcomes.setdefault(subtask.id, SubtaskResult(subtask=subtask, status=stopped))
        status = "over_budget" if isinstance(exc, BudgetExceeded) else "failed"
        exc.partial = self._result(status, outcomes)
        await self._finished(status, exc.partial, exc)

    async def _finished(self, status: str, result: RunResult | None, exc: Exception | None) -> None:
        error = None if exc is None else f"{type(exc).__name__}: {exc}"
        self.tracer.emit(
            RunFinished(
                run_id=self.run_id,
                status=status,
                wall_s=self._elapsed(),
                result=result,
                error=error,
            )
        )
        await self._close_record(status, result, error)  # after the last span is queued

    async def _close_record(self, status: str, result: RunResult | None, error: str | None) -> None:
        if self.record is not None:
            await self.record.finished(status, result, self.context.budget.usage, error)

    def _elapsed(self) -> float:
        return time.perf_counter() - self.started


def _original(exc: BaseException) -> BaseException:
    """What was raised, out of the exception groups of the tasks it went through."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
