"""Run-level events, for the progress stream and live views.

Together with the model and tool call events of :mod:`runtime.events`, they tell the
whole story of a run: started, plan ready, workers started and finished, aggregation,
done.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from runtime import Event
from runtime._values import record

if TYPE_CHECKING:
    from honeycomb.run.plan import Plan
    from honeycomb.run.result import RunResult

__all__ = [
    "AggregationFinished",
    "AggregationStarted",
    "PlanReady",
    "RunFinished",
    "RunStarted",
    "WorkerFinished",
    "WorkerStarted",
]


@record(kw_only=True)
class RunStarted(Event):
    """A run starts on its task."""

    kind: ClassVar[str] = "run.started"
    task: str


@record(kw_only=True)
class PlanReady(Event):
    """The planner split the task into subtasks."""

    kind: ClassVar[str] = "run.plan_ready"
    plan: Plan
    duration_s: float


@record(kw_only=True)
class WorkerStarted(Event):
    """A subtask's worker starts."""

    kind: ClassVar[str] = "worker.started"
    role: str


@record(kw_only=True)
class WorkerFinished(Event):
    """A subtask's worker ended, with its subtask's status (ok, failed, skipped ...)."""

    kind: ClassVar[str] = "worker.finished"
    role: str
    status: str  # a SubtaskStatus: "ok", "failed", "skipped", "cancelled", "over_budget"
    duration_s: float
    error: str | None = None


@record(kw_only=True)
class AggregationStarted(Event):
    """The aggregator starts merging the subtasks' results."""

    kind: ClassVar[str] = "run.aggregation_started"
    results: int


@record(kw_only=True)
class AggregationFinished(Event):
    """The aggregator has merged the results."""

    kind: ClassVar[str] = "run.aggregation_finished"
    duration_s: float


@record(kw_only=True)
class RunFinished(Event):
    """The last event of a run; ``result`` is None when the run raised ``error``."""

    kind: ClassVar[str] = "run.finished"
    status: str  # a RunStatus: "ok", "partial", "failed", "over_budget", "interrupted"
    wall_s: float
    result: RunResult | None = None
    error: str | None = None
