"""One agent: the AgentLoop, context assembly, Role, Worker and its use of memory.
Imports only ``runtime``."""

from workers.context import Compaction, ContextWindow, assemble
from workers.guards import GuardCheck, GuardChecked, Guards
from workers.loop import AgentLoop
from workers.memory import (
    MemoryEmbedded,
    MemoryRecalled,
    RoleMemory,
    memory_tools,
    recall_text,
)
from workers.role import Approvals, Role, check_role, load_roles, read_roles, role_entries
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
from workers.worker import Worker, WorkerError, WorkerResult, WorkerSetup, format_task

__all__ = [
    "AgentLoop",
    "Approvals",
    "Checkpoint",
    "Compaction",
    "ContextWindow",
    "Continue",
    "Failed",
    "Final",
    "GuardCheck",
    "GuardChecked",
    "Guards",
    "LoopSettings",
    "LoopState",
    "MemoryEmbedded",
    "MemoryRecalled",
    "MemoryStore",
    "Role",
    "RoleMemory",
    "Services",
    "Step",
    "Waiting",
    "Worker",
    "WorkerError",
    "WorkerResult",
    "WorkerSetup",
    "WorkerStore",
    "assemble",
    "check_role",
    "format_task",
    "load_roles",
    "memory_tools",
    "read_roles",
    "recall_text",
    "role_entries",
]
