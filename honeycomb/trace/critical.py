"""The critical path: the chain of dependent pieces of work (a plan's subtasks) whose
durations add up the most. No schedule can finish sooner than it takes. And
:func:`figures`: how a run's time adds up, wherever it is shown."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from runtime.value import Value

__all__ = ["Figures", "Planned", "figures", "longest_chain", "topological_order"]


def topological_order(depends_on: Mapping[str, Sequence[str]]) -> list[str]:
    """Ids in an order where every one comes after those it depends on (Kahn's
    algorithm); ``depends_on`` maps each id to the ids it waits for.

    Raises:
        ValueError: when the dependencies form a cycle.
    """
    waiting = {node: len(set(deps)) for node, deps in depends_on.items()}
    dependents: dict[str, list[str]] = {}
    for node, deps in depends_on.items():
        for dep in set(deps):
            dependents.setdefault(dep, []).append(node)
    ready = [node for node, count in waiting.items() if count == 0]
    order: list[str] = []
    while ready:
        current = ready.pop()
        order.append(current)
        for after in dependents.get(current, ()):
            waiting[after] -= 1
            if waiting[after] == 0:
                ready.append(after)
    if len(order) != len(depends_on):
        raise ValueError("the dependencies form a cycle")
    return order


def longest_chain(
    depends_on: Mapping[str, Sequence[str]], durations: Mapping[str, float]
) -> tuple[tuple[str, ...], float]:
    """The chain of dependent ids whose durations add up the most, and that sum.

    Ids missing from ``depends_on`` (or all of them, when the dependencies form a
    cycle) count as independent. Ties go to the id listed first.
    """
    known = dict(depends_on)
    for node in durations:
        known.setdefault(node, ())
    if not known:
        return (), 0.0
    try:
        order = topological_order(known)
    except ValueError:
        order, known = list(known), dict.fromkeys(known, ())
    finish: dict[str, float] = {}
    via: dict[str, str | None] = {}
    for node in order:
        before = max(known[node], key=lambda d: finish[d], default=None)
        via[node] = before
        finish[node] = (finish[before] if before else 0.0) + durations.get(node, 0.0)
    last = max(known, key=lambda k: finish[k])
    chain, step = [last], via[last]
    while step is not None:
        chain.append(step)
        step = via[step]
    return tuple(reversed(chain)), finish[last]


class Figures(Value, frozen=True, kw_only=True):
    """How a run's time adds up: what every view of a run (its result, ``honeycomb
    trace``, the web page) says, computed here only (:func:`figures`).

    Attributes:
        wall_s: Time the run ran (the sum over its lives).
        plan_s: Planning.
        aggregate_s: Aggregation.
        critical_path: The chain of subtask ids that bounds the run, first to last:
            of the workers that ran only.
        critical_path_s: Planning, the critical chain of workers, and aggregation.
        sum_worker_s: Every worker's time added up.
        serial_s: Planning, every worker one after another, and aggregation.
        speedup: ``serial_s / wall_s``.
    """

    wall_s: float
    plan_s: float
    aggregate_s: float
    critical_path: tuple[str, ...]
    critical_path_s: float
    sum_worker_s: float
    serial_s: float
    speedup: float


class Planned(Protocol):
    """What the figures read of a plan's subtask (``honeycomb.Subtask`` is one; a
    subtask without ``round`` is of round 1)."""

    @property
    def id(self) -> str: ...
    @property
    def depends_on(self) -> tuple[str, ...]: ...


def figures(
    *,
    wall_s: float,
    plan_s: float,
    aggregate_s: float,
    durations: Mapping[str, float],
    subtasks: Sequence[Planned] = (),
) -> Figures:
    """The figures of a run from the time each part of it ran.

    Args:
        wall_s: Time the run ran, over all its lives.
        plan_s: Time planning took.
        aggregate_s: Time aggregating took.
        durations: Each subtask worker's time, by id (over all lives; 0 or absent:
            it did not run, and is on no critical path).
        subtasks: The plan, for its dependencies and rounds (without it, workers
            count as independent). A plan made in rounds runs one round after
            another, so its rounds' chains add up.
    """
    ran = {k: v for k, v in durations.items() if v > 0}
    rounds: dict[int, dict[str, tuple[str, ...]]] = {}
    for subtask in subtasks:
        if subtask.id in ran:
            rounds.setdefault(getattr(subtask, "round", 1), {})[subtask.id] = subtask.depends_on
    planned = {k for own in rounds.values() for k in own}
    loose = {k: () for k in ran if k not in planned}  # workers of no plan: independent
    if loose:
        rounds.setdefault(1, {}).update(loose)
    chain: tuple[str, ...] = ()
    chain_s = 0.0
    for number in sorted(rounds):
        depends_on = rounds[number]
        own = {k: tuple(d for d in deps if d in depends_on) for k, deps in depends_on.items()}
        found, length = longest_chain(own, {k: ran[k] for k in own})
        chain, chain_s = chain + found, chain_s + length
    sum_worker = sum(ran.values())
    serial = plan_s + sum_worker + aggregate_s
    return Figures(
        wall_s=wall_s,
        plan_s=plan_s,
        aggregate_s=aggregate_s,
        critical_path=chain,
        critical_path_s=plan_s + chain_s + aggregate_s,
        sum_worker_s=sum_worker,
        serial_s=serial,
        speedup=serial / wall_s if wall_s > 0 else 1.0,
    )
