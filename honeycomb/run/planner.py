"""Planners turn a task into a :class:`~honeycomb.run.plan.Plan`.

- :class:`RolePlanner`: a planner role asked for a plan through structured output;
  an invalid plan goes back to it with the problems, a set number of times.
- :class:`FunctionPlanner`: a plain Python splitter.
- :class:`StaticPlanner`: the same subtasks every time.

The policy's ``max_subtasks`` bounds a model's plans; the caller's own (a list of
subtasks, a splitter's) are as long as the caller made them.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeAlias, runtime_checkable

from honeycomb.run.context import RunContext, with_default_instructions
from honeycomb.run.plan import Plan, Subtask, plan_problems, plan_type
from honeycomb.run.prompts import PLANNER_INSTRUCTIONS, CatalogEntry, planner_task
from runtime import BudgetExceeded, HoneycombError, PlanError
from workers import Role

__all__ = [
    "FunctionPlanner",
    "Planner",
    "PlannerLike",
    "RolePlanner",
    "StaticPlanner",
    "SubtaskSpec",
    "as_planner",
]

SubtaskSpec: TypeAlias = Subtask | Mapping[str, Any] | tuple[str, str]
"""A subtask, a mapping of its fields, or a ``(role, instruction)`` pair."""


@runtime_checkable
class Planner(Protocol):
    """Makes the plan for a task.

    Raises:
        PlanError: when no valid plan can be made.
    """

    async def plan(self, task: str, context: RunContext) -> Plan: ...


class StaticPlanner:
    """Always the same subtasks."""

    def __init__(self, subtasks: Plan | Iterable[SubtaskSpec]) -> None:
        self._plan = subtasks if isinstance(subtasks, Plan) else Plan.of(subtasks)

    async def plan(self, task: str, context: RunContext) -> Plan:
        return checked(self._plan, context)


Splitter: TypeAlias = Callable[[str], Plan | Iterable[SubtaskSpec] | Awaitable[Any]]


class FunctionPlanner:
    """A plan from ``fn(task)``, sync or async, returning subtasks or a Plan."""

    def __init__(self, fn: Splitter) -> None:
        self.fn = fn

    async def plan(self, task: str, context: RunContext) -> Plan:
        made = self.fn(task)
        if inspect.isawaitable(made):
            made = await made
        return checked(made if isinstance(made, Plan) else Plan.of(made), context)


class RolePlanner:
    """Asks a planner role for a plan (structured output) and checks it.

    The schema it sends names the roles a subtask may use and bounds the plan's size
    and ids (see :func:`~honeycomb.run.plan.plan_type`); what comes back is validated
    against it, then checked for what a schema cannot say (cycles, dangling or
    duplicate ids).

    Args:
        role: The planner role's name.
    """

    def __init__(self, role: str = "planner") -> None:
        self.role = role

    async def plan(self, task: str, context: RunContext) -> Plan:
        workable = [r for r in context.roles.values() if r.name not in (self.role, "aggregator")]
        await context.prepare([context.roles[self.role]])  # its own tools
        for other in workable:  # the catalog's tools
            # A role whose MCP server cannot start is listed without those tools: its
            # workers fail alone, with why, under the failure policy.
            with contextlib.suppress(HoneycombError):
                await context.prepare([other])
        catalog = [_entry(r, context) for r in workable]
        names = [r.name for r in workable]
        prompt = planner_task(task, catalog, max_subtasks=context.max_subtasks)
        role = with_default_instructions(context.roles[self.role], PLANNER_INSTRUCTIONS)
        schema = plan_type(tuple(names), context.max_subtasks)
        problems: list[str] = []
        for attempt in range(1, context.plan_attempts + 1):
            worker = context.worker(role, output_type=schema)
            result = await worker.run(prompt if not problems else _retry(prompt, problems))
            if isinstance(result.exception, BudgetExceeded):
                raise result.exception
            if not result.ok or not isinstance(result.output, Plan):
                problems = [f"the planner gave no usable plan ({result.error})"]
                continue
            plan = Plan.model_validate(result.output.model_dump())  # a Plan, not the schema's
            problems = plan_problems(plan, names, max_subtasks=context.max_subtasks)
            if not problems:
                return plan
            if attempt == context.plan_attempts:
                break
        raise PlanError(problems, attempts=context.plan_attempts)


def checked(plan: Plan, context: RunContext) -> Plan:
    """The caller's own plan, if valid for this run's roles (of any length: the
    policy's ``max_subtasks`` bounds a model's plans).

    Raises:
        PlanError: naming every problem.
    """
    problems = plan_problems(plan, list(context.roles))
    if problems:
        raise PlanError(problems)
    return plan


def _entry(role: Role, context: RunContext) -> CatalogEntry:
    tools = context.setup_for(role, None).tools
    return CatalogEntry(
        role=role.name,
        description=role.description or role.instructions.split("\n", 1)[0],
        tools=tuple((t.name, t.description.split("\n", 1)[0]) for t in tools),
    )


def _retry(prompt: str, problems: list[str]) -> str:
    listed = "\n".join(f"- {p}" for p in problems)
    return f"{prompt}\n\nThe plan is invalid; fix these problems and answer again:\n{listed}"


PlannerLike: TypeAlias = Planner | str | Callable[[str], Any] | Plan | Sequence[SubtaskSpec]
"""What an Executor accepts as its planner."""


def as_planner(spec: PlannerLike | None, roles: Mapping[str, Role]) -> Planner | None:
    """A planner from a role name, a Planner, a splitter function or a list of subtasks;
    by default the role named ``planner``, if there is one."""
    if spec is None:
        return RolePlanner("planner") if "planner" in roles else None
    if isinstance(spec, str):
        return RolePlanner(spec)
    if isinstance(spec, Planner):
        return spec
    if callable(spec):
        return FunctionPlanner(spec)
    return StaticPlanner(spec)
