"""The critical path: the chain of dependent pieces of work (a plan's subtasks) whose
durations add up the most. No schedule can finish sooner than it takes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["longest_chain", "topological_order"]


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
