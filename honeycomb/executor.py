"""``Executor``: plan a task, run one worker per subtask in parallel, aggregate.

One Executor serves many concurrent :meth:`Executor.run` calls, each isolated (its
own budget, plan and workers); they share the models, the exclusive-lock table and
the global model and tool limiters.

With a run store, every run is kept turn by turn, and ``run(task, run_id=...)`` (or
:meth:`Executor.resume`) of a run that did not finish continues it: finished workers
are not run again, started ones continue from their last turn, and no completed
side-effecting call is executed twice.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel

from honeycomb.aggregator import AggregatorLike, as_aggregator
from honeycomb.context import RunContext
from honeycomb.durable import Resumed, RunRecord, restore, stored_result
from honeycomb.events import (
    AggregationFinished,
    AggregationStarted,
    PlanReady,
    RunFinished,
    RunStarted,
)
from honeycomb.plan import Plan, critical_path
from honeycomb.planner import PlannerLike, StaticPlanner, SubtaskSpec, as_planner
from honeycomb.policy import Policy
from honeycomb.result import RunResult, RunTimings, SubtaskResult, answer_as_text
from honeycomb.scheduler import Scheduler
from honeycomb.spans import SpanRecorder
from honeycomb.store import RunStore
from honeycomb.stream import RunStream
from runtime import (
    Budget,
    BudgetExceeded,
    ConfigError,
    ConfigErrors,
    EventHandler,
    HoneycombError,
    LimitedModel,
    LockTable,
    Model,
    RunFailed,
    StoreError,
    Tool,
    ToolRegistry,
    Tracer,
    did_you_mean,
)
from workers import Role, WorkerSetup

__all__ = ["Executor"]


class Executor:
    """Plans a task into subtasks, runs them in parallel, and merges the results.

    Args:
        roles: The worker roles (and the planner and aggregator roles).
        models: One model for every role, or models by name (roles pick one with
            ``model:``; ``default_model`` names the one for the rest).
        tools: Where the roles' tool names are looked up (import paths need none).
        planner: A planner role's name, a Planner, a splitter ``fn(task)``, or a fixed
            list of subtasks. Default: the role named ``planner``, if there is one.
        aggregator: An aggregator role's name, ``"concat"``, an Aggregator, or a
            callable ``fn(task, results)``. Default: the role named ``aggregator``, if
            there is one, else ``concat``.
        policy: Parallelism, failure policy, budgets, timeouts and limiters.
        output_type: A pydantic model the aggregator's answer must validate against.
        default_model: The model for roles that name none.
        on_event: Called with every event of every run.
        log_events: Also log events through structlog (when it is configured).
        store: Keep every run in this SQLite file (or :class:`RunStore`), so that a
            run that stopped can be resumed.
        source: Where this Executor was declared (a hive file), kept with each run
            so ``honeycomb resume`` can rebuild it.
        trace: Record each run's spans (:mod:`honeycomb.spans`) in the store.
            Default: when there is a store.

    Raises:
        ConfigErrors: naming every unknown model, role or tool.
    """

    def __init__(
        self,
        roles: Iterable[Role] | Mapping[str, Role],
        models: Model | Mapping[str, Model],
        *,
        tools: ToolRegistry | Sequence[Tool[Any, Any] | Callable[..., Any]] = (),
        planner: PlannerLike | None = None,
        aggregator: AggregatorLike | None = None,
        policy: Policy | None = None,
        output_type: type[BaseModel] | None = None,
        default_model: str | None = None,
        on_event: Sequence[EventHandler] = (),
        log_events: bool = True,
        store: RunStore | str | Path | None = None,
        source: str | None = None,
        trace: bool | None = None,
    ) -> None:
        role_list = list(roles.values()) if isinstance(roles, Mapping) else list(roles)
        self.roles: dict[str, Role] = {r.name: r for r in role_list}
        self.policy = policy or Policy()
        model_map = dict(models) if isinstance(models, Mapping) else {"default": models}
        self.default_model = default_model or next(iter(model_map), "default")
        registry = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        self._tools = self._check(role_list, model_map, registry, planner, aggregator)
        self._model_limiter = _limiter(self.policy.model_concurrency)
        self._tool_limiter = _limiter(self.policy.tool_concurrency)
        limiter = self._model_limiter
        self.models: dict[str, Model] = {
            name: LimitedModel(m, limiter) if limiter is not None else m
            for name, m in model_map.items()
        }
        self._setups: dict[tuple[Role | str, type[BaseModel] | None], WorkerSetup] = {}
        self._locks = LockTable()
        self._handlers = tuple(on_event)
        self._log = log_events
        self.store = store if isinstance(store, RunStore | None) else RunStore(store)
        self.source = source
        self.trace = trace if trace is not None else self.store is not None
        self.output_type = output_type
        self.planner = as_planner(planner, self.roles)
        self.aggregator = as_aggregator(aggregator, self.roles, output_type)

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> Executor:
        """An Executor from a hive file (see :mod:`honeycomb.hive`).

        Raises:
            ConfigErrors: every mistake in the file, with line, column and field.
        """
        from honeycomb.hive import load_hive

        return load_hive(path).executor(**overrides)

    def __repr__(self) -> str:
        return f"Executor(roles={list(self.roles)}, models={list(self.models)})"

    async def run(
        self,
        task: str,
        *,
        subtasks: Plan | Sequence[SubtaskSpec] | None = None,
        run_id: str | None = None,
        on_event: Sequence[EventHandler] = (),
    ) -> RunResult:
        """Plan (unless ``subtasks`` is given), run the workers, aggregate.

        Raises:
            PlanError: when no valid plan could be made.
            RunFailed: when the failure policy gave up or aggregation failed;
                ``.partial`` holds the partial result.
            BudgetExceeded: when the run went past a budget; ``.partial`` holds the
                partial result.
        """
        run = _Run(self, task, run_id or os.urandom(6).hex(), on_event)
        return await run.execute(subtasks, resumable=run_id is not None)

    async def resume(self, run_id: str, *, on_event: Sequence[EventHandler] = ()) -> RunResult:
        """Continue the stored run ``run_id`` (or return its result, if it finished).

        Raises:
            StoreError: when there is no store, or it has no such run.
            PlanError, RunFailed, BudgetExceeded: as :meth:`run`.
        """
        if self.store is None:
            raise StoreError("no run store: give the Executor store=...", path="-")
        stored = await self.store.load(run_id)
        if stored is None:
            raise StoreError(f"no run {run_id!r} in this store", path=str(self.store.path))
        return await self.run(stored.task, run_id=run_id, on_event=on_event)

    @asynccontextmanager
    async def stream(
        self,
        task: str,
        *,
        subtasks: Plan | Sequence[SubtaskSpec] | None = None,
        run_id: str | None = None,
    ) -> AsyncIterator[RunStream]:
        """Run in the background and yield its events as they happen.

        ``async with executor.stream(task) as events: async for event in events: ...``
        The last event is :class:`~honeycomb.events.RunFinished`; afterwards
        ``events.result`` holds the result. Leaving the block early cancels the run.
        """
        send, receive = anyio.create_memory_object_stream[Any](max_buffer_size=math.inf)
        stream = RunStream(receive)
        body_error: Exception | None = None
        async with anyio.create_task_group() as tg:

            async def produce() -> None:
                async with send:
                    try:
                        stream.result = await self.run(
                            task, subtasks=subtasks, run_id=run_id, on_event=[send.send_nowait]
                        )
                    except HoneycombError as exc:
                        stream.error = exc

            tg.start_soon(produce)
            try:
                yield stream
            except Exception as exc:
                # Raised by the caller's block: re-raise it as itself, not wrapped in
                # the task group's ExceptionGroup.
                body_error = exc
            finally:
                tg.cancel_scope.cancel()
        if body_error is not None:
            raise body_error

    # --- construction helpers -------------------------------------------------------

    def _check(
        self,
        roles: list[Role],
        models: Mapping[str, Model],
        registry: ToolRegistry,
        planner: object,
        aggregator: object,
    ) -> dict[str, ToolRegistry]:
        """Every role's tools, resolved; or every mistake at once."""
        errors: list[ConfigError] = []
        tools: dict[str, ToolRegistry] = {}
        names = [r.name for r in roles]
        if len(set(names)) != len(names):
            twice = sorted({n for n in names if names.count(n) > 1})
            errors.append(ConfigError(f"roles defined twice: {', '.join(twice)}"))
        if self.default_model not in models:
            errors.append(ConfigError(f"default model {self.default_model!r} is not defined"))
        for role in roles:
            ref = role.model
            if ref is not None and ref not in models:
                errors.append(
                    ConfigError(
                        f"role {role.name!r} uses model {ref!r}, which is not defined"
                        f"{did_you_mean(ref, models)}; models: {', '.join(models)}"
                    )
                )
            try:
                tools[role.name] = role.resolve_tools(registry)
                role.resolve_output()
            except HoneycombError as exc:
                errors.append(ConfigError(f"role {role.name!r}: {exc}"))
        for what, spec in (("planner", planner), ("aggregator", aggregator)):
            if isinstance(spec, str) and spec != "concat" and spec not in self.roles:
                errors.append(
                    ConfigError(
                        f"the {what} role {spec!r} is not defined{did_you_mean(spec, self.roles)}"
                    )
                )
        if errors:
            raise ConfigErrors(errors)
        return tools

    def _model_for(self, role: Role) -> Model:
        return self.models[role.model or self.default_model]

    def _tools_for(self, role: Role) -> ToolRegistry:
        found = self._tools.get(role.name)
        return found if found is not None else role.resolve_tools()

    def _setup_for(self, role: Role, output_type: type[BaseModel] | None) -> WorkerSetup:
        """A role's resolved setup, made once and shared by all its workers and runs."""
        # Key registered roles by name: hashing a role hashes all its fields.
        key = (role.name if self.roles.get(role.name) is role else role, output_type)
        found = self._setups.get(key)
        if found is None:
            found = self._setups[key] = WorkerSetup.of(role, self._tools_for(role), output_type)
        return found


class _Run:
    """One call of :meth:`Executor.run`."""

    def __init__(
        self, executor: Executor, task: str, run_id: str, handlers: Sequence[EventHandler]
    ) -> None:
        self.executor = executor
        self.task = task
        self.run_id = run_id
        policy = executor.policy
        store = executor.store
        self.record = RunRecord(store, run_id, policy.on_unknown_outcome) if store else None
        if executor.trace:
            on_close = self.record.span if self.record is not None else None
            handlers = (*handlers, SpanRecorder(on_close))
        self.tracer = Tracer(*executor._handlers, *handlers, log=executor._log)
        self.context = RunContext(
            run_id=run_id,
            roles=executor.roles,
            max_subtasks=policy.max_subtasks,
            plan_attempts=policy.plan_attempts,
            budget=Budget(policy.budgets.limits()),
            tracer=self.tracer,
            locks=executor._locks,
            tool_limiter=executor._tool_limiter,
            model_for=executor._model_for,
            setup_for=executor._setup_for,
        )
        self.plan = Plan(subtasks=())
        self.scheduler: Scheduler | None = None
        self.times = {"plan": 0.0, "workers": 0.0, "aggregate": 0.0}
        self.started = time.perf_counter()
        self.resumed: Resumed | None = None

    async def execute(
        self, subtasks: Plan | Sequence[SubtaskSpec] | None, *, resumable: bool
    ) -> RunResult:
        if self.record is not None:
            done = await self._open_record(resumable)
            if done is not None:
                return done
        self.tracer.emit(RunStarted(run_id=self.run_id, task=self.task))
        wall = self.executor.policy.budgets.wall_time_s
        try:
            with anyio.fail_after(wall):
                result = await self._phases(subtasks)
        except TimeoutError:
            exc = BudgetExceeded("wall_time_s", wall or 0.0, round(self._elapsed(), 3))
            await self._fail(exc)
            raise exc from None
        except (BudgetExceeded, RunFailed) as exc:
            await self._fail(exc)
            raise
        except HoneycombError as exc:
            await self._finished("failed", None, exc)
            raise
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._finished("interrupted", None, None)
            raise
        await self._finished(result.status, result, None)
        return result

    async def _open_record(self, resumable: bool) -> RunResult | None:
        """Start the run's record, or pick up the stored run of the same id: return
        its result if it ended with one, else remember what to continue from."""
        record = self.record
        assert record is not None
        stored = await record.store.load(self.run_id) if resumable else None
        if stored is not None:
            if stored.task != self.task:
                raise ConfigError(
                    f"run {self.run_id!r} in {record.store.path} was started with another "
                    f"task ({stored.task[:60]!r}); resume it with its own task, or use a "
                    "new run_id"
                )
            done = stored_result(stored)
            if done is not None:
                return self._with_output_type(done)
            self.resumed = restore(stored)
            record.use_journals(self.resumed.journals)
            self.context.budget.restore(self.resumed.spent)
        record.started(self.task, self.executor.source, resumed=stored is not None)
        return None

    def _with_output_type(self, result: RunResult) -> RunResult:
        wanted = self.executor.output_type
        if wanted is None or result.answer is None or isinstance(result.answer, wanted):
            return result
        return result.model_copy(update={"answer": wanted.model_validate(result.answer)})

    async def _phases(self, subtasks: Plan | Sequence[SubtaskSpec] | None) -> RunResult:
        if self.resumed is not None and self.resumed.plan is not None:
            subtasks = self.resumed.plan  # the plan of the earlier life: never re-planned
        planner = self.executor.planner if subtasks is None else StaticPlanner(subtasks)
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
            self.plan, self.context, self.executor.policy, record=self.record,
            resumed=self.resumed,
        )  # fmt: skip
        began = time.perf_counter()
        try:
            outcomes = await self.scheduler.run()
        finally:
            self.times["workers"] = time.perf_counter() - began
        if not any(o.ok for o in outcomes.values()):
            raise RunFailed(f"all {len(outcomes)} subtasks failed; nothing to aggregate")

        began = time.perf_counter()
        self.tracer.emit(AggregationStarted(run_id=self.run_id, results=len(outcomes)))
        answer = await self.executor.aggregator.aggregate(
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
        return RunResult(
            run_id=self.run_id,
            task=self.task,
            status=status,
            answer=answer,
            answer_text=answer_as_text(answer),
            plan=self.plan,
            subtasks=dict(outcomes),
            usage=self.context.budget.usage,
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
            for subtask in self.plan.subtasks:  # the wall-time budget interrupts mid-phase
                outcomes.setdefault(subtask.id, SubtaskResult(subtask=subtask, status="cancelled"))
        exc.partial = self._result("failed", outcomes)
        await self._finished("failed", exc.partial, exc)

    async def _finished(self, status: str, result: RunResult | None, exc: Exception | None) -> None:
        error = None if exc is None else f"{type(exc).__name__}: {exc}"
        await self._close_record(status, result, error)
        self.tracer.emit(
            RunFinished(
                run_id=self.run_id,
                status=status,
                wall_s=self._elapsed(),
                result=result,
                error=error,
            )
        )
        if self.record is not None and self.executor.trace:
            # The run's span closes on RunFinished, after the record was committed:
            # wait for it too, or a process that exits now loses it.
            await self.record.store.flush()

    async def _close_record(self, status: str, result: RunResult | None, error: str | None) -> None:
        if self.record is not None:
            await self.record.finished(status, result, self.context.budget.usage, error)

    def _elapsed(self) -> float:
        return time.perf_counter() - self.started


def _limiter(capacity: int | None) -> anyio.CapacityLimiter | None:
    return anyio.CapacityLimiter(capacity) if capacity is not None else None
