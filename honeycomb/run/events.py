"""Run-level events, for the progress stream and live views.

Together with the model and tool call events of :mod:`runtime.events`, they tell the
whole story of a run: started, plan ready, workers started and finished, aggregation,
done.
"""

from __future__ import annotations

from typing import ClassVar

from honeycomb.run.plan import Plan
from honeycomb.run.result import RunResult
from runtime import Event, Usage

__all__ = [
    "AggregationFinished",
    "AggregationStarted",
    "PlanReady",
    "PlanRepaired",
    "RoleToolsMissing",
    "RoundPlanned",
    "RoundStarted",
    "RunFinished",
    "RunStarted",
    "WorkerFinished",
    "WorkerStarted",
]


class RunStarted(Event, frozen=True, kw_only=True):
    """A run starts on its task; ``caller`` is the run whose tool call runs it, for a
    hive called as a tool (a sub-run: its spans are that run's)."""

    kind: ClassVar[str] = "run.started"
    task: str
    caller: str | None = None


class PlanReady(Event, frozen=True, kw_only=True, gc=True):
    """The planner split the task into subtasks."""

    kind: ClassVar[str] = "run.plan_ready"
    plan: Plan
    duration_s: float


class PlanRepaired(Event, frozen=True, kw_only=True):
    """A warning: the planner's plan (of round ``round``) named dependencies it cannot
    have, on the subtask itself or on an id not in the plan, and they were dropped
    (``dropped``, one line each) rather than the plan refused."""

    kind: ClassVar[str] = "run.plan_repaired"
    round: int
    dropped: tuple[str, ...]


class RoleToolsMissing(Event, frozen=True, kw_only=True):
    """A warning: the planner was shown role ``role`` without tools it could not be
    given (``error``: why, such as its MCP server that did not start), as it planned
    round ``round``: a subtask it gives the role fails saying so, and a plan without
    the role says nothing of it."""

    kind: ClassVar[str] = "run.role_tools_missing"
    round: int
    role: str
    error: str


class RoundStarted(Event, frozen=True, kw_only=True):
    """The lead reads what the last round found, to plan round ``round`` (2 on)."""

    kind: ClassVar[str] = "run.round_started"
    round: int


class RoundPlanned(Event, frozen=True, kw_only=True, gc=True):
    """The lead planned round ``round``: the subtasks it added (``added``; none: it is
    done), or the ``error`` it failed with."""

    kind: ClassVar[str] = "run.round_planned"
    round: int
    added: Plan
    duration_s: float = 0.0
    error: str | None = None


class WorkerStarted(Event, frozen=True, kw_only=True):
    """A subtask's worker starts; or a nested one, called as a tool (``agent:ROLE``):
    then ``parent`` is the calling worker, and ``call_id`` and ``turn`` its call."""

    kind: ClassVar[str] = "worker.started"
    role: str
    parent: str | None = None
    call_id: str | None = None
    turn: int | None = None


class WorkerFinished(Event, frozen=True, kw_only=True):
    """A subtask's worker ended, with its subtask's status (ok, failed, skipped ...)."""

    kind: ClassVar[str] = "worker.finished"
    role: str
    status: str  # a SubtaskStatus: "ok", "failed", "skipped", "cancelled", "over_budget"
    duration_s: float
    error: str | None = None
    parent: str | None = None
    call_id: str | None = None
    turn: int | None = None


class AggregationStarted(Event, frozen=True, kw_only=True):
    """The aggregator starts merging the subtasks' results."""

    kind: ClassVar[str] = "run.aggregation_started"
    results: int


class AggregationFinished(Event, frozen=True, kw_only=True):
    """The aggregator has merged the results."""

    kind: ClassVar[str] = "run.aggregation_finished"
    duration_s: float


class RunFinished(Event, frozen=True, kw_only=True, gc=True):
    """The last event of a run; ``result`` is None when the run raised ``error``.
    ``usage`` is what the run spent, every life of it (its result's, when it has one):
    a run that raised spent too (None: a hive's sub-run, whose spending is its
    caller's)."""

    kind: ClassVar[str] = "run.finished"
    status: str  # a RunStatus: "ok", "partial", "failed", "over_budget", "interrupted"
    wall_s: float
    result: RunResult | None = None
    error: str | None = None
    usage: Usage | None = None
