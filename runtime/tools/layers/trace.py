"""The tool-call layer of tracing: each call that runs is a ``tool_call.started``
event, then a ``tool_call.finished`` with its status, duration and error (the
``tool`` span of a run's trace). A call that did not run (refused, or answered from
the journal) has no span here: the dispatcher reports a refusal as it makes it."""

from __future__ import annotations

import time
from collections.abc import Coroutine
from typing import Any

from runtime.events import Caller, ToolCallFinished, ToolCallStarted
from runtime.tools.layers.base import Outcome, Prepared, ToolHandler, ToolLayer

__all__ = ["Traced", "finished"]


class Traced(ToolLayer):
    """Reports each call as it starts and ends, to ``caller``'s tracer (whether anyone
    listens is asked once a turn, not once a call)."""

    def __init__(self, next: ToolHandler, caller: Caller) -> None:
        super().__init__(next)
        self.caller = caller
        self._listened = (-1, False)  # the turn last asked about, and the answer

    def __call__(self, call: Prepared) -> Coroutine[Any, Any, Outcome]:
        turn, listened = self._listened
        if turn != call.turn:
            listened = self.caller.tracer.enabled
            self._listened = (call.turn, listened)
        if not listened:  # nobody listens: nothing to build
            return self.next(call)
        return self._traced(call)

    async def _traced(self, call: Prepared) -> Outcome:
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
        outcome = await self.next(call)
        finished(caller, call, outcome, time.perf_counter() - started)
        return outcome


def finished(caller: Caller, call: Prepared, outcome: Outcome, duration_s: float) -> None:
    """Report how ``call`` ended (a refusal: after 0 s, its text the error)."""
    asked = call.call
    caller.tracer.emit(
        ToolCallFinished(
            worker=caller.worker,
            run_id=caller.run_id,
            turn=call.turn,
            call_id=asked.id,
            tool=asked.name,
            status=outcome.status,
            duration_s=duration_s,
            error=outcome.error,
        )
    )
