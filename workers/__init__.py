"""One agent: the AgentLoop, context assembly, Role and Worker. Imports only ``runtime``."""

from workers.context import ContextWindow, assemble
from workers.loop import AgentLoop
from workers.role import Approvals, Role, check_role, load_roles, read_roles, role_entries
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
    "ContextWindow",
    "Continue",
    "Failed",
    "Final",
    "LoopSettings",
    "LoopState",
    "Role",
    "Step",
    "Waiting",
    "Worker",
    "WorkerError",
    "WorkerResult",
    "WorkerSetup",
    "assemble",
    "check_role",
    "format_task",
    "load_roles",
    "read_roles",
    "role_entries",
]
