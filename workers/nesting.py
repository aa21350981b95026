"""Roles as tools of other roles: a role's ``agent:ROLE`` tool runs a nested worker
of ``ROLE`` on the instruction the model gives, and ``hive:PATH`` runs a whole hive.

This module reads those references and checks the graph they make: no role may
reach itself through agent tools (a cycle would never end), and no chain may be
deeper than a limit. Running them is the orchestrator's (``honeycomb.run.agents``).
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from pathlib import PurePath

from runtime.errors import did_you_mean
from runtime.value import Value

__all__ = [
    "AGENT_PREFIX",
    "HIVE_PREFIX",
    "MAX_DEPTH",
    "NestingProblem",
    "agent_ref",
    "hive_ref",
    "is_nested_ref",
    "nested_tool_name",
    "nesting_problems",
]

AGENT_PREFIX = "agent:"
HIVE_PREFIX = "hive:"
MAX_DEPTH = 3
"""Agent tools that may be nested inside one another by default: ``a → b → c → d``."""


def agent_ref(ref: str) -> str | None:
    """The role a tool reference ``agent:ROLE`` names (None: it is no agent tool)."""
    return ref[len(AGENT_PREFIX) :].strip() if ref.startswith(AGENT_PREFIX) else None


def hive_ref(ref: str) -> str | None:
    """The hive file a tool reference ``hive:PATH`` names (None: it is no hive tool)."""
    return ref[len(HIVE_PREFIX) :].strip() if ref.startswith(HIVE_PREFIX) else None


def nested_tool_name(ref: str) -> str:
    """The name the model calls an agent or hive tool by: the role's name, or the
    hive file's stem (characters a tool name cannot have made ``_``)."""
    role = agent_ref(ref)
    if role is not None:
        return role
    stem = PurePath(hive_ref(ref) or "hive").stem
    return re.sub(r"[^A-Za-z0-9_-]", "_", stem)[:64] or "hive"


def is_nested_ref(ref: str) -> bool:
    """Whether a tool reference runs a nested worker or hive (not a function)."""
    return ref.startswith((AGENT_PREFIX, HIVE_PREFIX))


class NestingProblem(Value, frozen=True, kw_only=True):
    """A role whose agent tools are wrong.

    Attributes:
        role: The role whose tool is wrong.
        index: The position of that tool in the role's ``tools``.
        message: What is wrong, naming the chain of roles.
    """

    role: str
    index: int
    message: str


def nesting_problems(
    tools: Mapping[str, Sequence[str]], max_depth: int = MAX_DEPTH
) -> list[NestingProblem]:
    """Every problem with the agent tools of the roles whose tool references are
    ``tools`` (by role name): an unknown role, a cycle (``a → b → a``), a chain of
    more than ``max_depth`` agent tools. Each cycle and each too deep chain is told
    once, at the tool that starts it in the first role (in order) on it; the chains
    past the limit that start at one tool, once for them all (with one of them)."""
    problems: list[NestingProblem] = []
    edges: dict[str, list[tuple[int, str]]] = {}
    for role, refs in tools.items():
        for index, ref in enumerate(refs):
            target = agent_ref(ref)
            if target is None:
                continue
            if target not in tools:
                known = ", ".join(tools) or "none"
                meant = did_you_mean(target, tools)
                problems.append(
                    NestingProblem(
                        role=role,
                        index=index,
                        message=f"{ref!r} names no role{meant}: roles are {known}",
                    )
                )
                continue
            edges.setdefault(role, []).append((index, target))
    told: set[Hashable] = set()
    for role in tools:
        problems += _walk(role, edges, max_depth, told)
    return problems


def _walk(
    start: str,
    edges: Mapping[str, Sequence[tuple[int, str]]],
    max_depth: int,
    told: set[Hashable],
) -> Iterable[NestingProblem]:
    """The cycles and too deep chains that start at ``start`` (depth first, in the
    order of the tools)."""
    stack: list[tuple[list[str], int | None]] = [([start], None)]
    while stack:
        chain, first = stack.pop()
        further: list[tuple[list[str], int]] = []
        for index, target in edges.get(chain[-1], ()):
            at = index if first is None else first
            path = [*chain, target]
            if target in chain:
                loop = frozenset(path[path.index(target) :])
                if loop not in told and target == start:
                    told.add(loop)
                    yield NestingProblem(
                        role=start, index=at, message=f"agent tools make a cycle: {_arrow(path)}"
                    )
                continue
            if len(path) - 1 > max_depth:
                # One for all the chains its tool starts: a role that calls many, each
                # calling many, starts a chain past the limit through each of them.
                key = ("depth", start, at)
                if key not in told:
                    told.add(key)
                    yield NestingProblem(
                        role=start,
                        index=at,
                        message=(
                            f"agent tools nest {len(path) - 1} deep, past the limit of "
                            f"{max_depth}: {_arrow(path)} (raise policy max_nesting, or "
                            "call fewer roles in a chain)"
                        ),
                    )
                continue
            further.append((path, at))
        stack.extend(reversed(further))  # the first tool's chains are walked first


def _arrow(path: Sequence[str]) -> str:
    return " → ".join(path)
