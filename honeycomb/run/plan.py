"""Plans: subtasks with dependencies (a DAG), their validation, and critical paths."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from honeycomb.trace.critical import figures
from runtime import did_you_mean

__all__ = [
    "ID_PATTERN",
    "INSTRUCTION_CHARS",
    "Plan",
    "Subtask",
    "as_subtask",
    "critical_path",
    "on_failed_problems",
    "plan_output_tokens",
    "plan_problems",
    "plan_type",
    "repaired",
    "subtask_ids",
]

ID_PATTERN = r"^[A-Za-z0-9_.-]+$"
"""What a subtask id may be made of (and 1 to 64 characters long)."""

INSTRUCTION_CHARS = 1000
"""The longest instruction a planner model may write for one subtask (in the plan's
schema: a model looping inside an instruction is stopped by its grammar)."""


class Subtask(BaseModel):
    """One piece of the task, for one worker.

    Attributes:
        id: Unique within the plan; results are keyed by it.
        role: The role that runs it (must exist).
        instruction: What the worker is asked to do.
        depends_on: Ids whose results this subtask needs; it starts after them (in a
            run planned in rounds, ids of any round up to its own).
        round: The planning round that added it (1: the first plan).
    """

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    id: str = Field(min_length=1, max_length=64)
    role: str
    instruction: str
    depends_on: tuple[str, ...] = ()
    round: int = Field(default=1, ge=1)


class Plan(BaseModel):
    """The subtasks of a run."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    subtasks: tuple[Subtask, ...]

    @property
    def has_dependencies(self) -> bool:
        """Whether any subtask waits for another (if none, all start at once)."""
        return any(s.depends_on for s in self.subtasks)

    @property
    def dependencies(self) -> dict[str, tuple[str, ...]]:
        """Each subtask's id, in plan order, with the ids it depends on."""
        return {s.id: s.depends_on for s in self.subtasks}

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(s.id for s in self.subtasks)

    def __getitem__(self, subtask_id: str) -> Subtask:
        for subtask in self.subtasks:
            if subtask.id == subtask_id:
                return subtask
        raise KeyError(subtask_id)

    @classmethod
    def of(cls, items: Iterable[Subtask | Mapping[str, Any] | tuple[str, str]]) -> Plan:
        """A plan from subtasks, mappings, or ``(role, instruction)`` pairs (ids ``s1``...)."""
        return cls(subtasks=tuple(as_subtask(item, index) for index, item in enumerate(items)))


def as_subtask(item: object, index: int) -> Subtask:
    """The subtask ``item`` at ``index`` (from 0) of a list of them is: a Subtask, a
    mapping of its fields, or a ``(role, instruction)`` pair; one without an id has
    ``s1`` for index 0, ``s2`` for index 1 ...

    Raises:
        TypeError: when ``item`` is none of those, saying what it is.
        pydantic.ValidationError: when its fields are invalid.
    """
    if isinstance(item, Subtask):
        return item
    if isinstance(item, tuple):
        if len(item) != 2:
            items = f"{len(item)} item" + ("" if len(item) == 1 else "s")
            raise TypeError(f"{_shown(item)} is not a (role, instruction) pair: it has {items}")
        role, instruction = item
        return Subtask(id=f"s{index + 1}", role=role, instruction=instruction)
    if not isinstance(item, Mapping):
        raise TypeError(
            f"{_shown(item)} ({type(item).__name__}) is not a Subtask, a mapping of its "
            "fields or a (role, instruction) pair"
        )
    return Subtask.model_validate({"id": f"s{index + 1}", **item})


def _shown(item: object) -> str:
    shown = repr(item)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def subtask_ids(count: int, taken: Collection[str] = ()) -> tuple[str, ...]:
    """The first ``count`` ids ``s1``, ``s2`` ... that none of ``taken`` is."""
    used = set(taken)
    found: list[str] = []
    number = 0
    while len(found) < count:
        number += 1
        if f"s{number}" not in used:
            found.append(f"s{number}")
    return tuple(found)


@functools.lru_cache(maxsize=64)
def plan_type(
    roles: tuple[str, ...],
    max_subtasks: int,
    least: int = 1,
    earlier: tuple[str, ...] = (),
    failed: frozenset[str] = frozenset(),
) -> type[Plan]:
    """A :class:`Plan` as tight as JSON schema allows, for a planner that answers
    through structured output: ids are drawn from a fixed set (``s1`` ... ``sN``,
    N = ``max_subtasks``, skipping the ``earlier`` ids of the rounds before), each
    dependency is one of those ids or an earlier one but those ``failed`` (a subtask
    that depends on one would be skipped, never run), ``role`` is one of ``roles``,
    instructions are 1 to :data:`INSTRUCTION_CHARS` characters, and there are
    ``least`` (1, or 0 for a follow-up round that may add none) to ``max_subtasks``
    subtasks. The round a subtask belongs to is not the model's to say: it is not in
    the schema, one the model writes anyway is ignored, and the planner sets it. Its
    schema is what the model is sent (a grammar-constrained decoder cannot write a plan
    outside it, nor a plan without end), and it validates what it sends: nothing it
    rejects gets through. What no schema can say is checked after: duplicate ids,
    cycles, and dependencies on itself or on an id the plan does not use
    (:func:`repaired` drops those).
    """
    ids = subtask_ids(max_subtasks, earlier)
    subtask_id: Any = Literal[ids]
    dependency: Any = Literal[(*(e for e in earlier if e not in failed), *ids)]
    checks: dict[str, Any] = {
        "_fits": field_validator("instruction", mode="before")(_fits),
        "_unrounded": model_validator(mode="before")(_unrounded),
    }
    if failed:
        checks["_on_failed"] = field_validator("depends_on", mode="before")(_on_failed(failed))
    role: Any = Literal[roles] if roles else str  # no roles: nothing to plan with
    subtask = create_model(
        "Subtask",
        __base__=Subtask,
        __doc__=Subtask.__doc__,
        id=(subtask_id, ...),
        role=(role, ...),
        instruction=(str, Field(min_length=1, max_length=INSTRUCTION_CHARS)),
        depends_on=(
            tuple[dependency, ...],
            Field(default=(), max_length=max(len(earlier) + max_subtasks - 1, 0)),
        ),
        round=(SkipJsonSchema[int], 1),
        __validators__=checks,
    )
    validators: dict[str, Any] = {
        "_counted": model_validator(mode="before")(_counted(max_subtasks, least))
    }
    return create_model(
        "Plan",
        __base__=Plan,
        __doc__=Plan.__doc__,
        __validators__=validators,
        subtasks=(tuple[subtask, ...], Field(min_length=least, max_length=max_subtasks)),
    )


def _fits(cls: type[Subtask], value: Any) -> Any:
    """An instruction within :data:`INSTRUCTION_CHARS`, checked before its schema's own
    bound is, to tell the planner (and whoever reads its last error) the cap and what
    to do."""
    if isinstance(value, str) and len(value) > INSTRUCTION_CHARS:
        raise ValueError(
            f"the instruction has {len(value)} characters, over the {INSTRUCTION_CHARS} "
            "an instruction may have: say what the worker is to do in short (name what "
            "it works on rather than copy it all), or split the work among more subtasks"
        )
    return value


def _unrounded(cls: type[Subtask], data: Any) -> Any:
    """A subtask as the model wrote it, without the ``round`` it may say (a plan's own
    JSON has one, ``Plan.model_dump_json()``): not in the schema, the planner sets it.
    Taken from the model, it would move a first plan to a later round (its lead never
    asked again), or fail it with a round of 0."""
    if isinstance(data, dict) and "round" in data:
        return {key: value for key, value in data.items() if key != "round"}
    return data


def _on_failed(failed: frozenset[str]) -> Callable[[type[Subtask], Any], Any]:
    """A check that a later round's subtask depends on no earlier one that did not
    succeed, made before the schema's own, to tell the lead why (not only which ids it
    may use) and what to do."""

    def on_failed(cls: type[Subtask], value: Any) -> Any:
        found = [d for d in value if d in failed] if isinstance(value, list | tuple) else []
        if found:
            raise ValueError(_on_failed_problem(found))
        return value

    return classmethod(on_failed)  # type: ignore[return-value]


def _on_failed_problem(found: Sequence[str]) -> str:
    """Why a later round's subtask may not depend on ``found`` (earlier subtasks that
    did not succeed), and what to do."""
    named = ", ".join(repr(d) for d in found)
    return (
        f"it depends on {named}, which did not succeed: a subtask that depends on "
        "a failed one is skipped, never run. Depend only on subtasks that "
        "succeeded, and say in the instruction what it should do instead"
    )


def _counted(most: int, least: int) -> Callable[[type[Plan], Any], Any]:
    """A check that a plan (``least`` 0: a later round's) has at most ``most``
    subtasks, made before its subtasks are validated: pydantic counts a list only once
    its items validate, and a model whose plan was too long would be told only that its
    extra ids are not allowed, not to leave some out."""

    def counted(cls: type[Plan], data: Any) -> Any:
        subtasks = data.get("subtasks") if isinstance(data, dict) else None
        if isinstance(subtasks, list | tuple) and len(subtasks) > most:
            # What bounds it, for whoever reads the last error: the knob to turn.
            if least == 0:
                has, bound = "the round adds", "what the policy's max_subtasks leaves"
            else:
                has, bound = "the plan has", "the policy's max_subtasks"
            raise ValueError(f"{has} {len(subtasks)} subtasks; at most {most} allowed ({bound})")
        return data

    return classmethod(counted)  # type: ignore[return-value]


def plan_output_tokens(subtasks: int, earlier: int = 0) -> int:
    """The output limit of a planner's call: what the longest plan its schema allows
    can take, ``subtasks`` subtasks each with an instruction of
    :data:`INSTRUCTION_CHARS` (a token for every three characters), its role, its id
    and every dependency it may have (on the ``earlier`` subtasks too), with room for
    the JSON around them. A model that loops inside the plan stops there."""
    per_subtask = INSTRUCTION_CHARS // 3 + 64 + 4 * (earlier + subtasks)
    return 64 + subtasks * per_subtask


def repaired(plan: Plan, earlier: Collection[str] = ()) -> tuple[Plan, tuple[str, ...]]:
    """``plan`` without the dependencies it cannot have: on the subtask itself, or on
    an id that is neither in the plan nor among the ``earlier`` ones (the rounds
    before); and what was dropped, one line each (none: the plan as it was).

    A dependency on nothing is a slip a model makes, not a plan worth refusing: the
    subtask simply does not wait for it.
    """
    known = {*plan.ids, *earlier}
    dropped: list[str] = []
    subtasks: list[Subtask] = []
    for subtask in plan.subtasks:
        impossible = _impossible(subtask, known)
        if not impossible:
            subtasks.append(subtask)
            continue
        for dep in impossible:
            on = "itself" if dep == subtask.id else f"{dep!r}, which is not in the plan"
            dropped.append(f"subtask {subtask.id!r} depended on {on}")
        kept = tuple(d for d in subtask.depends_on if d not in impossible)
        subtasks.append(subtask.model_copy(update={"depends_on": kept}))
    if not dropped:
        return plan, ()
    return Plan(subtasks=tuple(subtasks)), tuple(dropped)


def _impossible(subtask: Subtask, known: Collection[str]) -> list[str]:
    """The dependencies of ``subtask`` that cannot be: on itself, or on none of ``known``."""
    return [d for d in subtask.depends_on if d == subtask.id or d not in known]


def plan_problems(
    plan: Plan,
    roles: Sequence[str],
    *,
    max_subtasks: int | None = None,
    finished: Collection[str] = (),
) -> list[str]:
    """Everything wrong with a plan, each problem naming the subtask; empty when valid.

    Args:
        plan: The plan.
        roles: The roles its subtasks may use.
        max_subtasks: The most subtasks allowed (a bound for a model's plans; None
            for a caller's own, which is not bounded).
        finished: The ids of subtasks that ran to their end (a resumed run's earlier
            lives'): they are not run again, so their roles may be gone.
    """
    problems: list[str] = []
    if not plan.subtasks:
        problems.append("the plan has no subtasks")
    if max_subtasks is not None and len(plan.subtasks) > max_subtasks:
        problems.append(
            f"the plan has {len(plan.subtasks)} subtasks; at most {max_subtasks} allowed "
            "(the policy's max_subtasks)"
        )
    seen: set[str] = set()
    for subtask in plan.subtasks:
        if subtask.id in seen:
            problems.append(f"subtask id {subtask.id!r} is used twice")
        seen.add(subtask.id)
        if not re.fullmatch(ID_PATTERN, subtask.id):
            problems.append(
                f"subtask id {subtask.id!r} may use only letters, digits, '_', '-', '.'"
            )
        if subtask.role not in roles and subtask.id not in finished:
            problems.append(
                f"subtask {subtask.id!r}: unknown role {subtask.role!r}"
                f"{did_you_mean(subtask.role, roles)}; roles: {', '.join(roles)}"
            )
        if not subtask.instruction.strip():
            problems.append(f"subtask {subtask.id!r}: the instruction is empty")
    ids = set(plan.ids)
    for subtask in plan.subtasks:
        for dep in _impossible(subtask, ids):
            on = "itself" if dep == subtask.id else f"{dep!r}, which is not in the plan"
            hint = did_you_mean(dep, ids) if dep != subtask.id else ""
            problems.append(f"subtask {subtask.id!r} depends on {on}{hint}")
    cycle = _find_cycle(plan)
    if cycle:
        problems.append("the dependencies form a cycle: " + " -> ".join(cycle))
    return problems


def on_failed_problems(added: Plan, failed: Collection[str]) -> list[str]:
    """What is wrong with a later round's subtasks ``added`` for the earlier subtasks
    that ``failed`` (did not succeed): each of its subtasks that depends on one of
    them, named (it would be skipped, never run); empty when none does."""
    problems: list[str] = []
    for subtask in added.subtasks:
        found = [d for d in subtask.depends_on if d in failed]
        if found:
            problems.append(f"subtask {subtask.id!r}: {_on_failed_problem(found)}")
    return problems


def critical_path(plan: Plan, durations: Mapping[str, float]) -> float:
    """The longest chain of dependent durations: no schedule can finish sooner. A plan
    made in rounds runs one round after another, so its rounds' chains add up (a
    dependency on an earlier round has finished before the round starts)."""
    found = figures(
        wall_s=0.0, plan_s=0.0, aggregate_s=0.0, durations=durations, subtasks=plan.subtasks
    )
    return found.critical_path_s


def _find_cycle(plan: Plan) -> list[str]:
    """A cycle of the plan's dependencies (its ids, the first one again at the end),
    or none; depth first without recursion, so a chain of any length is walked."""
    if not plan.has_dependencies:
        return []
    graph = {s.id: [d for d in s.depends_on if d != s.id] for s in plan.subtasks}
    state: dict[str, int] = {}  # 1: on the path, 2: finished
    for root in graph:
        if root in state:
            continue
        path: list[str] = [root]
        nexts = [iter(graph[root])]
        state[root] = 1
        while path:
            dep = next(nexts[-1], None)
            if dep is None:
                state[path.pop()] = 2
                nexts.pop()
            elif dep not in graph or state.get(dep) == 2:
                continue
            elif state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            else:
                state[dep] = 1
                path.append(dep)
                nexts.append(iter(graph[dep]))
    return []
