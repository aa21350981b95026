"""One agent without an Executor: a :class:`Worker` runs a role on a task, in an
:class:`AgentLoop` whose :meth:`~AgentLoop.step` either thinks (one model call) or acts
(runs the calls), on an immutable :class:`LoopState`; what it returns, and the context
it assembles and compacts; roles read from YAML files without a hive.

    from honeycomb.agents import AgentLoop, Final, LoopState

``Role``, ``Worker``, ``WorkerResult`` and ``Compaction`` are in ``honeycomb`` too.
"""

from workers.context import Compaction, ContextWindow
from workers.loop import AgentLoop
from workers.role import Role, load_roles
from workers.services import MemoryStore, Services, WorkerStore
from workers.state import (
    Checkpoint,
    Continue,
    Failed,
    Final,
    LoopSettings,
    LoopState,
    Step,
    Waiting,
)
from workers.worker import Worker, WorkerError, WorkerResult, WorkerSetup

__all__ = [
    "AgentLoop",
    "Checkpoint",
    "Compaction",
    "ContextWindow",
    "Continue",
    "Failed",
    "Final",
    "LoopSettings",
    "LoopState",
    "MemoryStore",
    "Role",
    "Services",
    "Step",
    "Waiting",
    "Worker",
    "WorkerError",
    "WorkerResult",
    "WorkerSetup",
    "WorkerStore",
    "load_roles",
]
