"""What a tool-call layer is: a handler of a tool call that holds the next one.

A call reaches the layers in two steps, as tower's ``Service`` is asked
``poll_ready`` before ``call``:

- :meth:`ToolHandler.admit`: every call of a turn, together, before any of them
  runs. A layer may refuse a call (its :class:`Outcome` is the call's observation),
  edit it, or stop the turn (``ApprovalNeeded``); what it lets through it passes on
  to the next layer's ``admit``, in call order.
- :meth:`ToolHandler.__call__`: each admitted call, when the dispatcher runs it; a
  layer does its part around the next layer's call and returns the call's
  :class:`Outcome`.

:class:`ToolLayer` passes both steps through: a layer overrides the step it has a
part in. A layer with nothing to do for a call returns the next layer's awaitable as
it is, so a layer costs a call none of its own frames.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Coroutine, Sequence
from typing import Any, Protocol

from runtime.messages import ObservationStatus, ToolCall, ToolMessage
from runtime.tools.define import Tool
from runtime.value import Value

__all__ = ["Admitted", "Outcome", "Prepared", "ToolHandler", "ToolLayer", "admit_rest"]


# benchmark B: made every tool call, never walked by the GC
class Prepared(Value, frozen=True, gc=False, kw_only=True):
    """A tool call ready to run: its arguments validated against its tool.

    Attributes:
        position: Its place among the calls of its turn.
        call: The model's call.
        tool: The tool it calls.
        kwargs: Its validated arguments.
        turn: The loop turn it belongs to.
        note: Put before its observation (a person approved edited arguments).
        begun: Set once a sync side-effecting call's thread has taken it up (what
            its timeout says of it; None: not watched).
    """

    position: int
    call: ToolCall
    tool: Tool[Any, Any]
    kwargs: dict[str, Any]
    turn: int
    note: str = ""
    begun: threading.Event | None = None


# benchmark B: made every tool call, never walked by the GC
class Outcome(Value, frozen=True, gc=False, kw_only=True):
    """How a call ended, or why it did not run: its observation's status and text,
    the error its ``tool_call.finished`` event reports (None: none), and whether it
    ran (one answered without running, from the journal, is reported by the
    dispatcher, as a refused one is: every call the model has an observation of is
    a tool call in the trace)."""

    status: ObservationStatus
    content: str
    error: str | None = None
    ran: bool = True

    def observation(self, call: ToolCall) -> ToolMessage:
        """What the model is told of ``call``."""
        return ToolMessage(
            tool_call_id=call.id, name=call.name, status=self.status, content=self.content
        )


Admitted = Prepared | Outcome
"""A call a turn's admission lets run (maybe edited), or its refusal."""


class ToolHandler(Protocol):
    """A tool call's handler: a layer and all the layers inside it."""

    def admit(self, calls: Sequence[Prepared]) -> Awaitable[list[Admitted]]:
        """For each call of a turn, in order: the call to run, or its refusal.

        Raises:
            ApprovalNeeded: when calls wait for a person's decision (none runs).
        """
        ...

    def __call__(self, call: Prepared) -> Coroutine[Any, Any, Outcome]:
        """Run one admitted call; how it ended."""
        ...


class ToolLayer:
    """A layer around ``next``: both steps pass through unless overridden."""

    def __init__(self, next: ToolHandler) -> None:
        self.next = next

    def admit(self, calls: Sequence[Prepared]) -> Awaitable[list[Admitted]]:
        return self.next.admit(calls)

    def __call__(self, call: Prepared) -> Coroutine[Any, Any, Outcome]:
        return self.next(call)


async def admit_rest(next: ToolHandler, verdicts: list[Admitted]) -> list[Admitted]:
    """``verdicts`` (a layer's, in call order), the calls it let through admitted by
    ``next`` in their places."""
    ready = [(i, v) for i, v in enumerate(verdicts) if isinstance(v, Prepared)]
    if ready:
        passed = await next.admit([call for _, call in ready])
        for (place, _), verdict in zip(ready, passed, strict=True):
            verdicts[place] = verdict
    return verdicts
