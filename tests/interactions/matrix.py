"""The matrix: its features, the pairs that cannot meet (and why), and the known
defects some cells show until they are fixed. Every test of the matrix and
docs/interactions.md are generated from these three tables.

A cell is a pair of features (a feature with itself: that feature alone). A cell is
*tested* (its run must break no invariant), *xfail* (it must break exactly the
invariants its known defects break, no other, and each of those defects must show:
a fixed defect fails the cell until its entry is removed), or *n/a* (the pair cannot
meet; the reason says why).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import combinations_with_replacement

from tests.interactions.features.approvals import Approver, WaitingApprovals
from tests.interactions.features.base import Feature
from tests.interactions.features.context import CompactionFeature, Mcp, Memory, Streaming
from tests.interactions.features.guards import ArgumentGuard, InputGuard, OutputGuard, Tripwire
from tests.interactions.features.limits import (
    AgentTools,
    Budget,
    HiveTools,
    ModelLimit,
    ToolLimit,
    WallTime,
)
from tests.interactions.features.running import (
    FailingTool,
    FlakyModel,
    Ray,
    Resume,
    Rounds,
    SideEffects,
    Sigkill,
    StallingTool,
    TextProtocol,
)
from tests.interactions.features.sessions import Session
from tests.interactions.invariants import Violation

__all__ = ["FEATURES", "KNOWN", "NOT_APPLICABLE", "Cell", "Known", "cells"]

FEATURES: tuple[Feature, ...] = (
    ToolLimit(),
    ModelLimit(),
    Budget(),
    WallTime(),
    AgentTools(),
    HiveTools(),
    WaitingApprovals(),
    Approver(),
    InputGuard(),
    OutputGuard(),
    Tripwire(),
    ArgumentGuard(),
    Streaming(),
    CompactionFeature(),
    Memory(),
    Mcp(),
    Resume(),
    Sigkill(),
    SideEffects(),
    FailingTool(),
    StallingTool(),
    Rounds(),
    TextProtocol(),
    FlakyModel(),
    Session(),
    Ray(),
)
BY_NAME = {f.name: f for f in FEATURES}


def pair(a: str, b: str) -> frozenset[str]:
    return frozenset((a, b))


NOT_APPLICABLE: dict[frozenset[str], str] = {
    pair("resume", "sigkill"): (
        "both stop the first life where a tool holds it and resume the run: SIGKILL is "
        "the harder of the two ways, not a second feature to add to the first"
    ),
    pair("sigkill", "ray"): (
        "the killed child would start a Ray of its own (seconds of CPU a cell); "
        "tests/honeycomb/backends/test_backends.py kills a driver on Ray and resumes its run"
    ),
    pair("approvals_waiting", "approver"): (
        "an approver decides every call at once, so no call waits in the store: they are "
        "two ways of deciding, not a combination"
    ),
}
"""The pairs that cannot meet, each with why."""


@dataclass(frozen=True)
class Known:
    """A known defect: the cells it shows in and what it breaks there.

    Attributes:
        item: Its item in issue 28, or ``new: ...`` for one the matrix found.
        cells: The cells, as pairs of feature names; ``*`` is any feature.
        invariant: The invariant it breaks.
        match: A pattern every one of its violations' details matches.
        why: What goes wrong, in a few words.
        unless: Features that keep it from showing (a budget that stops the run first).
        sometimes: It shows in some runs only (where a race lands decides): the cell
            passes without it, and is an expected failure with it.
    """

    item: str
    cells: tuple[tuple[str, str], ...]
    invariant: str
    match: str
    why: str
    unless: tuple[str, ...] = ()
    sometimes: bool = False

    def shows_in(self, cell: Cell) -> bool:
        if {cell.a, cell.b} & set(self.unless):
            return False
        for a, b in self.cells:
            if "*" in (a, b):
                named = {a, b} - {"*"}
                if not named or named & {cell.a, cell.b}:
                    return True
            elif {a, b} == {cell.a, cell.b}:
                return True
        return False

    def covers(self, violation: Violation) -> bool:
        return (
            violation.invariant == self.invariant
            and re.search(self.match, violation.detail) is not None
        )

    @property
    def label(self) -> str:
        return self.item if self.item.startswith("new") else f"issue 28 item {self.item}"


KNOWN: tuple[Known, ...] = ()
"""The defects that cells show today, until they are fixed."""


@dataclass(frozen=True)
class Cell:
    """Two features together (or one alone, when ``a`` is ``b``)."""

    a: str
    b: str

    @property
    def id(self) -> str:
        return self.a if self.a == self.b else f"{self.a}+{self.b}"

    @property
    def features(self) -> tuple[Feature, ...]:
        return (BY_NAME[self.a],) if self.a == self.b else (BY_NAME[self.a], BY_NAME[self.b])

    @property
    def needs(self) -> frozenset[str]:
        return frozenset().union(*(f.needs for f in self.features))

    @property
    def not_applicable(self) -> str | None:
        return NOT_APPLICABLE.get(pair(self.a, self.b))

    @property
    def known(self) -> tuple[Known, ...]:
        return tuple(k for k in KNOWN if k.shows_in(self))


def cells() -> list[Cell]:
    """Every cell: each feature alone, then each pair, in the order of FEATURES."""
    names = [f.name for f in FEATURES]
    return [Cell(a, b) for a, b in combinations_with_replacement(names, 2)]
