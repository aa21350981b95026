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
from tests.interactions.features.limits import AgentTools, Budget, HiveTools, ModelLimit, ToolLimit
from tests.interactions.features.running import (
    Ray,
    Resume,
    Rounds,
    SideEffects,
    Sigkill,
    TextProtocol,
)
from tests.interactions.invariants import Violation

__all__ = ["FEATURES", "KNOWN", "NOT_APPLICABLE", "Cell", "Known", "cells"]

FEATURES: tuple[Feature, ...] = (
    ToolLimit(),
    ModelLimit(),
    Budget(),
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
    Rounds(),
    TextProtocol(),
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
        "tests/honeycomb/test_backends.py kills a driver on Ray and resumes its run"
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


KNOWN: tuple[Known, ...] = (
    Known(
        "1",
        (("tool_limit", "agent_tools"),),
        "agent tools answer",
        "ExceptionGroup|CapacityLimiter",
        "a nested worker's tool calls fail under a tool concurrency limit",
    ),
    Known(
        "2",
        (("tool_limit", "hive_tools"),),
        "hive tools answer",
        "timed out",
        "a hive tool's sub-run waits for the tool slot its caller holds, until it times out",
    ),
    Known(
        "3",
        (("compaction", "*"),),
        "compaction budget",
        r"took \d+ tokens",
        "a summary longer than the budget is sent whole: requests pass the budget",
        unless=("budgets",),  # the run stops before the first fold
    ),
    Known(
        "5",
        (("resume", "*"), ("approvals_waiting", "*"), ("sigkill", "*")),
        "usage counted",
        "the earlier lives' planner, aggregator and judge calls",
        "a resumed run forgets what its planner, aggregator and judges spent before",
    ),
    Known(
        "5",
        (("hive_tools", "resume"),),
        "usage counted",
        "the earlier lives' calls of hive tools' sub-runs",
        "a resumed run forgets what its hive tools' sub-runs spent before",
    ),
    Known(
        "5",
        (("budgets", "resume"), ("budgets", "approvals_waiting"), ("budgets", "sigkill")),
        "budget kept",
        r"the model answered \d+ calls",
        "a resumed run's budget starts without what its planner spent before",
    ),
    Known(
        "5",
        (("budgets", "approvals_waiting"),),
        "budget",
        "ended ok",
        "a resumed run's budget starts without what its planner spent before",
    ),
    Known(
        "4",
        (("output_guard", "streaming"), ("tripwire", "streaming")),
        "no refused text",
        "refused text",
        "the deltas of an answer an output guard or a tripwire refuses reach the stream",
    ),
    Known(
        "6",
        (("approvals_waiting", "*"),),
        "decisions final",
        r"said \[.*'ok'.*'ok'",
        "two decisions on one call made at once are both told they were recorded",
    ),
    Known(
        "new: the spend of answers a crash lost is forgotten",
        (("sigkill", "*"),),
        "usage counted",
        "answers of earlier lives that no checkpoint kept",
        "a model answer whose turn was not yet checkpointed when the run stopped is asked "
        "for again on resume, and the first answer's spend is not counted",
        unless=("approvals_waiting",),  # the first life ends waiting, before the hold
    ),
    Known(
        "new: the spend of answers a crash lost is forgotten",
        (("budgets", "sigkill"),),
        "budget kept",
        r"the model answered \d+ calls",
        "a resumed run's budget starts without what the answers it lost had spent",
    ),
    Known(
        "new: what is stored before work starts is only queued",
        (("sigkill", "*"),),
        "resume",
        "asked again for the first plan|started again under new names",
        "the first plan, and the state asking for an `agent:` tool, are queued, not "
        "written, before the work they start: killed then, the resumed run plans again, "
        "or runs new nested workers",
        sometimes=True,  # when the store's writer had not written it yet
    ),
    Known(
        "new: the spend of answers a crash lost is forgotten",
        (("resume", "ray"),),
        "usage counted",
        "answers of earlier lives that no checkpoint kept|their process never told",
        "a model answer whose turn was not yet checkpointed when the run stopped is asked "
        "for again on resume, and the first answer's spend is not counted",
        sometimes=True,  # when the driver stops before an actor's checkpoint reaches it
    ),
    Known(
        "17",
        (("rounds", "*"),),
        "rounds",
        r"failed round 3 took \d+ model calls",
        "a round the lead fails costs plan attempts × (1 + output retries) lead calls",
        unless=("budgets",),  # the run stops before round 3
    ),
    Known(
        "new: the trace leaves out judges' calls and hive tools' sub-runs",
        (("input_guard", "resume"), ("input_guard", "approvals_waiting")),
        "usage counted",
        "as if it left out the judges' model calls",
        "`honeycomb trace` counts a judge's tokens but not its model call",
    ),
    Known(
        "new: the trace leaves out judges' calls and hive tools' sub-runs",
        (("hive_tools", "resume"), ("hive_tools", "approvals_waiting")),
        "usage counted",
        "as if it left out .*hive tools' sub-runs",
        "`honeycomb trace` leaves out the calls and tokens of a hive tool's sub-runs, "
        "which the result and the budget count",
    ),
    Known(
        "13",
        (("ray", "*"),),
        "main tool",
        "has no attribute 'scribble'",
        "a `@tool` of `__main__` goes to the actors by import path, and fails there",
    ),
    Known(
        "new: tools by value lose postponed annotations",
        (("ray", "*"),),
        "tool by value",
        r"'ToolContext' is not defined|UnserializableException",
        "a tool sent by value cannot be made again in an actor when its signature is a "
        "postponed annotation (`from __future__ import annotations`)",
    ),
    Known(
        "7",
        (("side_effects", "*"),),
        "idempotency key",
        "without an idempotency key",
        "`ToolContext` has no idempotency key for a side-effecting call",
    ),
)
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
