"""The layers a tool call goes through, each in a module of its own: argument guards
(:mod:`.guards`), approval (:mod:`.approval`), locks and slots (:mod:`.hold`), the
journal of side effects (:mod:`.journal`), tracing (:mod:`.trace`) and the tool
itself, under its time limit (:mod:`.run`). What a layer is:
:mod:`.base`. They are composed, in their order, in one place:
:func:`workers.calls.tool_calls`."""

from runtime.tools.layers.approval import Approving
from runtime.tools.layers.base import (
    Admitted,
    Outcome,
    Prepared,
    ToolHandler,
    ToolLayer,
    admit_rest,
)
from runtime.tools.layers.guards import ArgumentGuards, CallGuard
from runtime.tools.layers.hold import Held, LockTable
from runtime.tools.layers.journal import Journaled
from runtime.tools.layers.run import RunTool
from runtime.tools.layers.trace import Traced

__all__ = [
    "Admitted",
    "Approving",
    "ArgumentGuards",
    "CallGuard",
    "Held",
    "Journaled",
    "LockTable",
    "Outcome",
    "Prepared",
    "RunTool",
    "ToolHandler",
    "ToolLayer",
    "Traced",
    "admit_rest",
]
