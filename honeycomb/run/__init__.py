"""Running a task: the plan and its subtasks, the planners and aggregators, the
scheduler of the plan's DAG, one run's phases and record, and what a run returns.

The :class:`~honeycomb.Executor` drives these; most programs need only the names that
``honeycomb`` re-exports. The modules of a run that has a store (``record``,
``worker_record``, ``restore``, ``decide``) and its spans are imported inside the
functions that use them: they load SQLite and the run store, which ``import honeycomb``
does not (benchmark I; ``tests/test_architecture.py`` lists what it must not load).
"""

from honeycomb.run.aggregator import (
    Aggregator,
    ConcatAggregator,
    FunctionAggregator,
    RoleAggregator,
)
from honeycomb.run.context import RunContext
from honeycomb.run.events import (
    AggregationFinished,
    AggregationStarted,
    PlanReady,
    PlanRepaired,
    RoleToolsMissing,
    RoundPlanned,
    RoundStarted,
    RunFinished,
    RunStarted,
    WorkerFinished,
    WorkerStarted,
)
from honeycomb.run.plan import Plan, Subtask
from honeycomb.run.planner import (
    FunctionPlanner,
    Planner,
    RolePlanner,
    RoundPlanner,
    StaticPlanner,
)
from honeycomb.run.policy import Budgets, Policy
from honeycomb.run.result import PlanRound, RunResult, RunTimings, SubtaskResult
from honeycomb.run.stream import RunStream

__all__ = [
    "AggregationFinished",
    "AggregationStarted",
    "Aggregator",
    "Budgets",
    "ConcatAggregator",
    "FunctionAggregator",
    "FunctionPlanner",
    "Plan",
    "PlanReady",
    "PlanRepaired",
    "PlanRound",
    "Planner",
    "Policy",
    "RoleAggregator",
    "RolePlanner",
    "RoleToolsMissing",
    "RoundPlanned",
    "RoundPlanner",
    "RoundStarted",
    "RunContext",
    "RunFinished",
    "RunResult",
    "RunStarted",
    "RunStream",
    "RunTimings",
    "StaticPlanner",
    "Subtask",
    "SubtaskResult",
    "WorkerFinished",
    "WorkerStarted",
]
