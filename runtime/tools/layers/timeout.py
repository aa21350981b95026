"""The tool-call layer of time limits: a call runs under its tool's ``timeout`` (or
the policy's default), and one that runs past it is cancelled and becomes a
``timeout`` observation that says what happened to it.

A sync side-effecting tool cannot be interrupted: its thread is waited for to its
end (see :mod:`runtime.tools.threads`), so its observation says its effects may have
happened; one cancelled before its thread took it up never ran, and says so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Coroutine
from typing import Any

from msgspec.structs import replace

from runtime.concurrency import TimedOut, within
from runtime.tools.layers.base import Outcome, Prepared, ToolHandler, ToolLayer

__all__ = ["TimeLimit"]


class TimeLimit(ToolLayer):
    """Cuts each call at its time limit.

    Args:
        next: The handler inside it (the tool).
        default: Seconds a call may take when its tool sets no timeout (None:
            unlimited).
    """

    def __init__(self, next: ToolHandler, default: float | None) -> None:
        super().__init__(next)
        self.default = default

    def __call__(self, call: Prepared) -> Coroutine[Any, Any, Outcome]:
        found = call.tool
        limit = found.timeout if found.timeout is not None else self.default
        if limit is None:
            return self.next(call)
        return self._within(call, limit)

    async def _within(self, call: Prepared, limit: float) -> Outcome:
        found = call.tool
        started = 0.0
        if found.side_effects and not found.is_async:  # did its thread take it up, when?
            call = replace(call, begun=threading.Event())
            started = time.perf_counter()
        try:
            with within(limit):
                return await self.next(call)
        except TimedOut:
            # Cancelled, or waited for to its end (a sync side-effecting tool's thread
            # is, see runtime.tools.threads).
            text = _timeout_text(call, limit, time.perf_counter() - started)
            return Outcome(status="timeout", content=text, error=text)


def _timeout_text(call: Prepared, timeout: float, elapsed: float) -> str:
    name, begun = call.tool.name, call.begun
    if begun is not None and not begun.is_set():  # it waited for a thread all along
        return (
            f"Error: tool {name!r} timed out after {timeout:g}s before it started: it "
            "did not run, so it had no effect. Call it again if it is still needed."
        )
    if begun is not None:
        # Such a thread is waited for (see runtime.tools.threads), so it ran to its end.
        return (
            f"Error: tool {name!r} timed out after {timeout:g}s. It is a synchronous "
            f"side-effecting tool, which cannot be interrupted: it ran to its end after "
            f"{elapsed:.1f}s, so its effects may have happened, but its result was dropped."
        )
    return f"Error: tool {name!r} timed out after {timeout:g}s and was cancelled."
