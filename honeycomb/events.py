"""Every event a run tells its story with: what ``Executor.stream()`` yields and what
``on_event`` handlers receive (``docs/events.md`` lists their fields and order).

    from honeycomb.events import RunFinished, ToolCallFinished

``Event`` and ``EventHandler`` are in ``honeycomb`` too.
"""

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
from runtime.events import (
    ApprovalDecided,
    ApprovalRequested,
    CompactionFinished,
    CompactionStarted,
    Event,
    EventHandler,
    ModelCallFinished,
    ModelCallRetrying,
    ModelCallStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallsAnswered,
    ToolCallStarted,
)
from workers.guards import GuardChecked, GuardStarted
from workers.memory import MemoryEmbedded, MemoryRecalled

__all__ = [
    "AggregationFinished",
    "AggregationStarted",
    "ApprovalDecided",
    "ApprovalRequested",
    "CompactionFinished",
    "CompactionStarted",
    "Event",
    "EventHandler",
    "GuardChecked",
    "GuardStarted",
    "MemoryEmbedded",
    "MemoryRecalled",
    "ModelCallFinished",
    "ModelCallRetrying",
    "ModelCallStarted",
    "PlanReady",
    "PlanRepaired",
    "RoleToolsMissing",
    "RoundPlanned",
    "RoundStarted",
    "RunFinished",
    "RunStarted",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolCallsAnswered",
    "WorkerFinished",
    "WorkerStarted",
]
