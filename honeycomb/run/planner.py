"""Planners turn a task into a :class:`~honeycomb.run.plan.Plan`.

- :class:`RolePlanner`: a planner role asked for a plan through structured output;
  an invalid plan goes back to it with the problems, a set number of times. With
  ``rounds`` above 1 it is a lead that plans in rounds (a :class:`RoundPlanner`):
  after each round's workers finish it reads their results and adds subtasks, or
  says it is done.
- :class:`FunctionPlanner`: a plain Python splitter.
- :class:`StaticPlanner`: the same subtasks every time.

The policy's ``max_subtasks`` bounds a model's plans; the caller's own (a list of
subtasks, a splitter's) are as long as the caller made them.

A run asks its planner through :func:`plan_with` and a lead through
:func:`follow_up_with`: whatever the planner is, an exception of its own (a splitter's
bug) or an answer that is no plan is a ``PlanError``, and every plan is checked
against the run's roles before it runs.
"""

from __future__ import annotations

import contextlib
import inspect
import reprlib
from collections.abc import (
    Awaitable,
    Callable,
    Collection,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from typing import Any, Protocol, TypeAlias, runtime_checkable

from pydantic import ValidationError

from honeycomb.run.context import RunContext, with_default_instructions
from honeycomb.run.events import PlanRepaired, RoleToolsMissing
from honeycomb.run.handing import fitted_results
from honeycomb.run.phase_workers import run_phase_worker
from honeycomb.run.plan import (
    Plan,
    Subtask,
    as_subtask,
    plan_output_tokens,
    plan_problems,
    plan_type,
    repaired,
    subtask_ids,
)
from honeycomb.run.prompts import (
    PLANNER_INSTRUCTIONS,
    CatalogEntry,
    ResultEntry,
    follow_up_task,
    planner_task,
)
from honeycomb.run.result import SubtaskResult
from runtime import (
    AgentError,
    AssistantMessage,
    ContextBudgetTooSmall,
    GuardrailTripped,
    HoneycombError,
    OutcomeUnknown,
    PlanError,
    did_you_mean,
)
from runtime.concurrency import innermost, run_together
from runtime.value import validation_summary
from workers import Role, WorkerResult

__all__ = [
    "FunctionPlanner",
    "Planner",
    "PlannerLike",
    "RolePlanner",
    "RoundPlanner",
    "StaticPlanner",
    "SubtaskSpec",
    "as_planner",
    "follow_up_with",
    "judge_roles",
    "nobody_to_plan_for",
    "plan_with",
    "working_roles",
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


@runtime_checkable
class RoundPlanner(Planner, Protocol):
    """A planner that plans in rounds: :meth:`plan` makes the first round, then after
    each round's workers finish the run asks :meth:`follow_up`, up to ``rounds``
    rounds in all."""

    rounds: int

    async def follow_up(
        self,
        task: str,
        plan: Plan,
        results: Sequence[SubtaskResult],
        *,
        round: int,
        room: int,
        context: RunContext,
    ) -> Plan:
        """The subtasks of round ``round`` (none: done), at most ``room`` of them,
        given the ``plan`` so far and every result (and failure) of it. They may
        depend on each other and on any subtask before them that succeeded: the run
        refuses a round that depends on one that did not (it would be skipped, never
        run), as it refuses any invalid round, and the rounds end ``lead_failed``.

        Raises:
            PlanError: when no valid round can be made.
        """
        ...


class StaticPlanner:
    """Always the same subtasks.

    Raises:
        PlanError: when ``subtasks`` are no plan (a subtask that is none of
            :data:`SubtaskSpec`, or whose fields are invalid).
    """

    def __init__(self, subtasks: Plan | Iterable[SubtaskSpec]) -> None:
        self._plan = as_plan(subtasks, "the plan given")

    async def plan(self, task: str, context: RunContext) -> Plan:
        return self._plan


Splitter: TypeAlias = Callable[[str], Plan | Iterable[SubtaskSpec] | Awaitable[Any]]


class FunctionPlanner:
    """A plan from ``fn(task)``, sync or async, returning subtasks or a Plan.

    Raises:
        PlanError: when ``fn`` returns neither.
    """

    def __init__(self, fn: Splitter) -> None:
        self.fn = fn

    async def plan(self, task: str, context: RunContext) -> Plan:
        made = self.fn(task)
        if inspect.isawaitable(made):
            made = await made
        return as_plan(made, "what the planner function returned")


class RolePlanner:
    """Asks a planner role for a plan (structured output) and checks it.

    The schema it sends names the roles a subtask may use, the ids it may give
    (``s1`` ... ``sN``) and depend on, and bounds the plan's size (see
    :func:`~honeycomb.run.plan.plan_type`); what comes back is validated against it,
    then checked for what a schema cannot say. A dependency on the subtask itself or
    on an id the plan does not use is dropped, with a
    :class:`~honeycomb.run.events.PlanRepaired` warning; duplicate ids and cycles
    send the plan back with the problems.

    With ``rounds`` above 1 it is a lead: after each round it sees every result so
    far (and every failure) and answers with more subtasks, which may depend on any
    subtask before them that succeeded, or with none when it is done.

    The roles it may give subtasks to are ``roles``; by default every role of the run
    but itself, the one named ``aggregator`` and those that only judge (see
    :func:`working_roles`).

    Args:
        role: The planner role's name.
        rounds: Planning rounds at most (1: plan once).
        roles: The roles its subtasks may use (None: those that work).

    Raises:
        ValueError: when ``rounds`` is below 1, or ``roles`` names none.
    """

    def __init__(
        self, role: str = "planner", *, rounds: int = 1, roles: Sequence[str] | None = None
    ) -> None:
        if rounds < 1:
            raise ValueError(f"rounds must be 1 or more, not {rounds}")
        if roles is not None and not roles:  # no plan could be made: not asked for one
            raise ValueError(
                "roles must name a role to give subtasks to (None: every role that works)"
            )
        self.role = role
        self.rounds = rounds
        self.roles = tuple(roles) if roles is not None else None

    def __repr__(self) -> str:
        chosen = "" if self.roles is None else f", roles={list(self.roles)!r}"
        return f"RolePlanner({self.role!r}, rounds={self.rounds}{chosen})"

    async def plan(self, task: str, context: RunContext) -> Plan:
        prompt, names = await self._catalog(task, context, round=1)
        room = context.policy.max_subtasks
        return await self._ask(
            lambda problems: _retry(prompt, problems),
            names,
            context,
            least=1,
            room=room,
            round=1,
        )

    async def follow_up(
        self,
        task: str,
        plan: Plan,
        results: Sequence[SubtaskResult],
        *,
        round: int,
        room: int,
        context: RunContext,
    ) -> Plan:
        planned, names = await self._catalog(task, context, round=round)
        entries = [_result_entry(r) for r in results]
        ids = subtask_ids(room, plan.ids)
        lead = with_default_instructions(context.roles[self.role], PLANNER_INSTRUCTIONS)

        def prompt(problems: Sequence[str]) -> str:
            # The results within what the lead's model holds, beside the problems of
            # its last answer, if any: each message it is sent is fitted.
            return fitted_results(
                lambda shown: _retry(
                    follow_up_task(
                        planned, shown, round=round, rounds=self.rounds, room=room, ids=ids
                    ),
                    problems,
                ),
                entries,
                context,
                lead,
                max_output_tokens=plan_output_tokens(room, len(plan.ids)),
            )

        failed = frozenset(r.subtask.id for r in results if not r.ok)
        added = await self._ask(
            prompt, names, context, least=0, room=room, round=round, before=plan, failed=failed
        )
        return Plan(subtasks=tuple(s.model_copy(update={"round": round}) for s in added.subtasks))

    async def _catalog(
        self, task: str, context: RunContext, *, round: int
    ) -> tuple[str, list[str]]:
        """The planner's first message (the task, the roles it may use) and the roles,
        for its plan of round ``round``."""
        workable = [context.roles[name] for name in working_roles(context, self.role, self.roles)]
        own = context.crew.prepare([context.roles[self.role]])  # its own tools
        others = [_prepared(other, context, round) for other in workable]  # the catalog's
        try:  # all their servers start together: the plan waits for the slowest
            await run_together(own, others)
        except ExceptionGroup as group:  # its own failed (the others were cancelled)
            error = innermost(group)  # itself: a group would be the planner's own error
            raise error from error.__cause__
        catalog = [_entry(r, context) for r in workable]
        names = [r.name for r in workable]
        conversation = context.conversation_for(context.roles[self.role], "full")
        prompt = planner_task(
            task, catalog, max_subtasks=context.policy.max_subtasks, conversation=conversation
        )
        return prompt, names

    async def _ask(
        self,
        prompt: Callable[[Sequence[str]], str],
        names: list[str],
        context: RunContext,
        *,
        least: int,
        room: int,
        round: int,
        before: Plan | None = None,
        failed: frozenset[str] = frozenset(),
    ) -> Plan:
        """A valid plan from the role (with ``before``, the subtasks it adds to it,
        which may not depend on those of them that ``failed``), each time sent the
        message ``prompt`` makes of the problems of its last answer (none at first).

        ``plan_attempts`` bounds the answers the role gives, whatever refuses them: its
        output schema (an answer sent back to it, as its ``output_retries`` allow) or
        the plan's own checks (a new conversation with the problems). A call that
        fails on its way to the model is not an answer: its error ends the plan.

        Raises:
            PlanError: when no answer of the attempts made a valid plan.
            ModelError, ConfigError, BudgetExceeded ...: as the planner's model call
                raised it (once the model's own retries gave up).
            ContextBudgetTooSmall: when its role's context budget cannot hold its
                prompt (no call is made).
        """
        role = with_default_instructions(context.roles[self.role], PLANNER_INSTRUCTIONS)
        earlier = before.subtasks if before is not None else ()
        earlier_ids = tuple(s.id for s in earlier)
        schema = plan_type(tuple(names), room, least, earlier_ids, failed)
        limit = plan_output_tokens(room, len(earlier_ids))  # unless its role sets its own
        problems: list[str] = []
        left, asked = context.policy.plan_attempts, 0
        while left > 0:
            asked += 1
            # Its answers sent back for failing the schema count as attempts too.
            _, result = await run_phase_worker(
                context,
                role,
                prompt(problems),
                what=f"plan:{round}.{asked}",
                output_type=schema,
                output_retries=left - 1,
                max_output_tokens=limit,
                streams_unvalidated=True,  # its progress shows (a refused plan's too)
            )
            left -= _answers(result)
            if not result.ok or not isinstance(result.output, Plan):
                if result.exception is not None and not _about_the_answer(result.exception):
                    raise result.exception  # the model could not be asked: not a bad plan
                problems = [f"the planner gave no usable plan ({result.error})"]
                continue
            plan = Plan.model_validate(result.output.model_dump())  # a Plan, not the schema's
            plan, dropped = repaired(plan, earlier_ids)
            if before is None:
                problems = plan_problems(plan, names, max_subtasks=room)
            elif len(plan.subtasks) > room:
                problems = [f"the round adds {len(plan.subtasks)} subtasks; at most {room} allowed"]
            else:  # checked with the subtasks before it (ids, dependencies, cycles)
                whole = Plan(subtasks=(*earlier, *plan.subtasks))
                # Those ran under the roles of their round (an earlier life's may differ).
                ran = list(dict.fromkeys([*names, *(s.role for s in earlier)]))
                problems = [p for p in plan_problems(whole, ran) if p != _EMPTY]
            if not problems:
                if dropped:
                    context.tracer.emit(
                        PlanRepaired(run_id=context.run_id, round=round, dropped=dropped)
                    )
                return plan
        raise PlanError(problems, attempts=context.policy.plan_attempts)


async def plan_with(planner: Planner, task: str, context: RunContext) -> Plan:
    """The plan ``planner`` makes for ``task``, whatever planner it is (a role, a
    function, a list of subtasks, your own Planner), checked against the run's roles.

    Raises:
        PlanError: when no valid plan can be made: the planner said so, raised an
            exception of its own (chained), or answered with no Plan.
        ModelError, BudgetExceeded ...: as a planner role's model calls raised them.
    """
    with _planners_own_errors("the planner"):
        made = await planner.plan(task, context)
    return checked(_returned_plan(made, "the planner"), context)


async def follow_up_with(
    lead: RoundPlanner,
    task: str,
    plan: Plan,
    results: Sequence[SubtaskResult],
    *,
    round: int,
    room: int,
    context: RunContext,
) -> Plan:
    """The subtasks ``lead`` adds in round ``round`` (see :meth:`RoundPlanner.follow_up`),
    not yet checked against the plan so far (the run does, marking them with the
    round).

    Raises:
        PlanError: when the lead said no valid round can be made, raised an exception
            of its own (chained), or answered with no Plan.
        ModelError, BudgetExceeded ...: as a lead role's model calls raised them.
    """
    with _planners_own_errors("the lead"):
        added = await lead.follow_up(task, plan, results, round=round, room=room, context=context)
    return _returned_plan(added, "the lead")


@contextlib.contextmanager
def _planners_own_errors(who: str) -> Iterator[None]:
    """Where a run calls planner code, maybe the caller's: an exception of its own
    (not Honeycomb's, which says what went wrong itself) is a PlanError naming it."""
    try:
        yield
    except HoneycombError:
        raise
    except Exception as exc:
        raise PlanError([f"{who} raised {type(exc).__name__}: {exc}"]) from exc


def _returned_plan(made: object, who: str) -> Plan:
    """``made``, if it is a Plan.

    Raises:
        PlanError: naming what ``who`` returned instead.
    """
    if not isinstance(made, Plan):
        raise PlanError([f"{who} returned {reprlib.repr(made)}, not a Plan"])
    return made


def as_plan(made: object, what: str) -> Plan:
    """A plan from ``made`` (``what`` it is, for an error): a Plan, or subtasks
    (:data:`SubtaskSpec`).

    Raises:
        PlanError: naming what ``made`` is instead, or the subtask that is invalid.
    """
    if isinstance(made, Plan):
        return made
    if isinstance(made, str | bytes | Mapping) or not isinstance(made, Iterable):
        raise PlanError(
            [
                f"{what} is {reprlib.repr(made)}, not a Plan or a list of subtasks ((role, "
                "instruction) pairs, mappings of a Subtask's fields, or Subtasks)"
            ]
        )
    subtasks: list[Subtask] = []
    problems: list[str] = []
    first: Exception | None = None
    for index, item in enumerate(made):
        try:
            subtasks.append(as_subtask(item, index))
        except (ValidationError, TypeError) as exc:
            told = validation_summary(exc) if isinstance(exc, ValidationError) else str(exc)
            named = f" (id {item['id']!r})" if isinstance(item, Mapping) and "id" in item else ""
            problems.append(f"{what} holds an invalid subtask at index {index}{named}: {told}")
            first = first or exc
    if problems:
        raise PlanError(problems) from first
    return Plan(subtasks=tuple(subtasks))


def checked(plan: Plan, context: RunContext, *, finished: Collection[str] = ()) -> Plan:
    """``plan``, if valid for this run's roles: refused, not repaired (a planner
    role's plans are repaired as it makes them), and of any length (the policy's
    ``max_subtasks`` bounds a model's plans, as its planner asks for them). The roles
    of its ``finished`` subtasks (a resumed run's) may be gone: they never run again.

    Raises:
        PlanError: naming every problem.
    """
    problems = plan_problems(plan, list(context.roles), finished=finished)
    if problems:
        raise PlanError(problems)
    return plan


def working_roles(
    context: RunContext, planner: str, chosen: Sequence[str] | None = None
) -> list[str]:
    """The roles a planner role may give subtasks to: ``chosen``, else every role of
    the run but the planner itself, the role that merges the run's results (the
    run's aggregator role, and the role named ``aggregator``) and the roles that
    only judge: those a guard names as its judge (a role's, or the run's own), which
    are there to check work, not to do it (name one in ``chosen`` to give it work).

    Raises:
        PlanError: when ``chosen`` names a role the run does not have, or the planner;
            when the roles that judge were all it had to give subtasks to (before
            any model call).
    """
    if chosen is not None:
        roles = list(context.roles)
        wrong = [
            f"the planner {planner!r} is to give subtasks to {name!r}, "
            + (
                "itself"
                if name == planner
                else f"which is not a role of the run{did_you_mean(name, roles)}"
            )
            + f"; roles: {', '.join(roles)}"
            for name in chosen
            if name == planner or name not in context.roles
        ]
        if wrong:
            raise PlanError(wrong)
        return list(chosen)
    merger = context.aggregator or "aggregator"
    others = [name for name in context.roles if name not in (planner, "aggregator", merger)]
    judges = judge_roles(context)
    found = [name for name in others if name not in judges]
    if not found:  # the judges were all it had, or it had none: no plan could be made
        merges = merger if merger in context.roles else None
        raise PlanError([nobody_to_plan_for(planner, others, merges)])
    return found


def nobody_to_plan_for(planner: str, judges: Sequence[str], aggregator: str | None) -> str:
    """Why the planner ``planner``, its other roles ``judges`` (none: it has no
    other role; and ``aggregator``, the role that merges, if one does), has no role to
    give subtasks to, and what to do."""
    named = ", ".join(repr(j) for j in judges)
    merges = f"; {aggregator!r} merges the results" if aggregator else ""
    if not judges:
        other = (
            f"the run's only other role, {aggregator!r}, merges the results"
            if aggregator
            else "the run has no other role"
        )
        return f"the planner {planner!r} has no role to give subtasks to ({other}): add one"
    return (
        f"the planner {planner!r} has no role to give subtasks to ({named}: named by a "
        f"guard as its judge, given no work unless named{merges}): add a role that works, "
        "or name the roles it gives subtasks to (RolePlanner(roles=[...]); in a hive, "
        "planner: {role: ..., roles: [...]})"
    )


def judge_roles(context: RunContext) -> list[str]:
    """The roles of the run that a guard names as its judge (a role's or the run's)."""
    run = context.services.guards
    named = [g.judge for g in (*run.input, *run.output, *run.arguments) if g.judge]
    for role in context.roles.values():
        named += role.guards.judges() if role.guards is not None else []
    return [name for name in dict.fromkeys(named) if name in context.roles]


async def _prepared(role: Role, context: RunContext, round: int) -> None:
    """Give a role of the planner's catalog its MCP tools. One whose server cannot
    start is listed without those tools: its workers fail alone, with why, under the
    failure policy; and the run says so, which a plan without the role would not."""
    try:
        await context.crew.prepare([role])
    except HoneycombError as exc:
        missing = RoleToolsMissing(
            run_id=context.run_id, round=round, role=role.name, error=f"{type(exc).__name__}: {exc}"
        )
        context.tracer.emit(missing)


def _entry(role: Role, context: RunContext) -> CatalogEntry:
    tools = context.crew.setup_for(role, None).tools
    return CatalogEntry(
        role=role.name,
        description=role.description or role.instructions.split("\n", 1)[0],
        tools=tuple((t.name, t.description.split("\n", 1)[0]) for t in tools),
    )


_EMPTY = "the plan has no subtasks"


def _result_entry(result: SubtaskResult) -> ResultEntry:
    """A result as the lead reads it: its answer, or why it failed."""
    text = result.handed_on if result.ok else f"{result.status}: {result.why or 'no answer'}"
    subtask = result.subtask
    return ResultEntry(
        id=subtask.id, role=subtask.role, ok=result.ok, text=text, asked=subtask.instruction
    )


def _answers(result: WorkerResult) -> int:
    """The answers a planner worker gave (its model's replies that asked for no tool,
    each judged or sent back), at least one: every worker counts as an attempt."""
    messages = result.transcript.messages
    return max(1, sum(1 for m in messages if isinstance(m, AssistantMessage) and not m.tool_calls))


def _about_the_answer(exc: BaseException) -> bool:
    """Whether a planner worker failed for what its model answered (another answer
    may do), not for a call that could not be made (a transport error, a missing key,
    a budget: asking again only repeats it), nor for its instruction (an input guard
    refused it; its context budget cannot hold it, before any call), a guard that
    raised (its judge's model could not be reached ...), or a side effect of an
    earlier life whose outcome is unknown, which the policy says to fail on (another
    attempt, asked afresh, may make it again)."""
    if isinstance(exc, GuardrailTripped):
        return exc.kind == "output" and not exc.broken
    return isinstance(exc, AgentError) and not isinstance(
        exc, ContextBudgetTooSmall | OutcomeUnknown
    )


def _retry(prompt: str, problems: Sequence[str]) -> str:
    """``prompt``, followed by the ``problems`` of the planner's last answer, if any."""
    if not problems:
        return prompt
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
