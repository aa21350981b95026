"""Plans and what makes and merges them: the plan and its subtasks, the planners (a
role, a function, a fixed list, a lead planning in rounds), the aggregators, and the
run context a planner or aggregator of your own is given, with the conversation a
session's turn is told (``Conversation``) and how sessions keep and run their turns.

    from honeycomb.planning import FunctionPlanner, RoleAggregator

``Plan``, ``Subtask`` and ``PlanRound`` are in ``honeycomb`` too.
"""

from honeycomb.run.aggregator import (
    Aggregator,
    AggregatorLike,
    ConcatAggregator,
    FunctionAggregator,
    RoleAggregator,
)
from honeycomb.run.context import RunContext
from honeycomb.run.conversation import Conversation, TurnResult
from honeycomb.run.crew import Crew
from honeycomb.run.plan import Plan, Subtask
from honeycomb.run.planner import (
    FunctionPlanner,
    Planner,
    PlannerLike,
    RolePlanner,
    RoundPlanner,
    StaticPlanner,
    SubtaskSpec,
)
from honeycomb.run.result import PlanRound
from honeycomb.run.session import SessionRows, TurnLock, TurnRunner

__all__ = [
    "Aggregator",
    "AggregatorLike",
    "ConcatAggregator",
    "Conversation",
    "Crew",
    "FunctionAggregator",
    "FunctionPlanner",
    "Plan",
    "PlanRound",
    "Planner",
    "PlannerLike",
    "RoleAggregator",
    "RolePlanner",
    "RoundPlanner",
    "RunContext",
    "SessionRows",
    "StaticPlanner",
    "Subtask",
    "SubtaskSpec",
    "TurnLock",
    "TurnResult",
    "TurnRunner",
]
