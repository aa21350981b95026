"""The tool-call layer of tracing: each call that runs is a ``tool_call.started``
event, then a ``tool_call.finished`` with its status, duration and error (the
``tool`` span of a run's trace), however it ends: a call cut off (its worker
cancelled, or stopped by the calls its nested workers made) is finished as it stops,
so its span ends no later than its worker's. A call that did not run (refused, or
answered from the journal) has no span here: the dispatcher reports a refusal as it
makes it."""

from __future__ import annotations

import asyncio
import time

from runtime.errors import BudgetExceeded
from runtime.events import Caller, ToolCallFinished, ToolCallStarted
from runtime.tools.approvals import ApprovalNeeded
from runtime.tools.layers.base import Outcome, Prepared, ToolHandler, ToolLayer

__all__ = ["Traced", "finished"]


class Traced(ToolLayer):
    """Reports each call as it starts and ends, to ``caller``'s tracer (composed only
    when someone listens to it: :func:`workers.calls.tool_calls`)."""

    def __init__(self, next: ToolHandler, caller: Caller) -> None:
        super().__init__(next)
        self.caller = caller

    async def __call__(self, call: Prepared) -> Outcome:
        caller, asked = self.caller, call.call
        caller.tracer.emit(
            ToolCallStarted(
                worker=caller.worker,
                run_id=caller.run_id,
                turn=call.turn,
                call_id=asked.id,
                tool=asked.name,
            )
        )
        started = time.perf_counter()
        try:
            outcome = await self.next(call)
        except BaseException as stopped:  # no outcome, but the call ended here all the same
            status, error = _stopped(stopped)
            _report(caller, call, status, error, time.perf_counter() - started)
            raise
        _report(caller, call, outcome.status, outcome.error, time.perf_counter() - started)
        return outcome


def finished(caller: Caller, call: Prepared, outcome: Outcome, duration_s: float) -> None:
    """Report how ``call`` ended (a refusal: after 0 s, its text the error)."""
    _report(caller, call, outcome.status, outcome.error, duration_s)


def _report(
    caller: Caller, call: Prepared, status: str, error: str | None, duration_s: float
) -> None:
    asked = call.call
    caller.tracer.emit(
        ToolCallFinished(
            worker=caller.worker,
            run_id=caller.run_id,
            turn=call.turn,
            call_id=asked.id,
            tool=asked.name,
            status=status,
            duration_s=duration_s,
            error=error,
        )
    )


def _stopped(stopped: BaseException) -> tuple[str, str | None]:
    """The status and error of a call that raised ``stopped`` through its layers:
    ``waiting`` (calls its nested workers made wait for a person), ``over_budget``
    (they spent the run's budget), ``cancelled`` (its worker was: its run stopped, a
    sibling failed fast, its caller's call of it ran out of time), or ``error`` (what
    stops the process, raised by the tool)."""
    if isinstance(stopped, ApprovalNeeded):
        return "waiting", None
    if isinstance(stopped, asyncio.CancelledError):
        return "cancelled", None
    status = "over_budget" if isinstance(stopped, BudgetExceeded) else "error"
    return status, f"{type(stopped).__name__}: {stopped}"
