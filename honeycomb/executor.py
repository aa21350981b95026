"""``Executor``: plan a task, run one worker per subtask in parallel, aggregate.

One Executor serves many concurrent :meth:`Executor.run` calls, each isolated (its
own budget, plan and workers); they share the models, the exclusive-lock table and
the global model and tool limiters.
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
        return await run.execute(subtasks)

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

    async def execute(self, subtasks: Plan | Sequence[SubtaskSpec] | None) -> RunResult:
        self.tracer.emit(RunStarted(run_id=self.run_id, task=self.task))
        wall = self.executor.policy.budgets.wall_time_s
        try:
            with anyio.fail_after(wall):
                result = await self._phases(subtasks)
        except TimeoutError:
            exc = BudgetExceeded("wall_time_s", wall or 0.0, round(self._elapsed(), 3))
            self._fail(exc)
            raise exc from None
        except (BudgetExceeded, RunFailed) as exc:
            self._fail(exc)
            raise
        except HoneycombError as exc:
            self._finished("failed", None, exc)
            raise
        self._finished(result.status, result, None)
        return result

    async def _phases(self, subtasks: Plan | Sequence[SubtaskSpec] | None) -> RunResult:
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

        self.scheduler = Scheduler(self.plan, self.context, self.executor.policy)
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

    def _fail(self, exc: BudgetExceeded | RunFailed) -> None:
        outcomes = self.scheduler.outcomes if self.scheduler is not None else {}
        if self.scheduler is not None:
            for subtask in self.plan.subtasks:  # the wall-time budget interrupts mid-phase
                outcomes.setdefault(subtask.id, SubtaskResult(subtask=subtask, status="cancelled"))
        exc.partial = self._result("failed", outcomes)
        self._finished("failed", exc.partial, exc)

    def _finished(self, status: str, result: RunResult | None, exc: Exception | None) -> None:
        self.tracer.emit(
            RunFinished(
                run_id=self.run_id,
                status=status,
                wall_s=self._elapsed(),
                result=result,
                error=None if exc is None else f"{type(exc).__name__}: {exc}",
            )
        )

    def _elapsed(self) -> float:
        return time.perf_counter() - self.started


def _limiter(capacity: int | None) -> anyio.CapacityLimiter | None:
    return anyio.CapacityLimiter(capacity) if capacity is not None else None
