"""One agent: the AgentLoop, context assembly, Role and Worker. Imports only ``runtime``."""

from workers.context import ContextWindow
from workers.loop import AgentLoop, Continue, Failed, Final, LoopSettings, LoopState, Step

__all__ = [
    "AgentLoop",
    "ContextWindow",
    "Continue",
    "Failed",
    "Final",
    "LoopSettings",
    "LoopState",
    "Step",
]
