"""The innermost tool-call handler: the tool itself.

A call gets its :class:`~runtime.tools.define.ToolContext` if its tool takes one
(its idempotency key made from ``scope``, the run's in every life of it), runs (a
sync tool in a worker thread), and whatever happens becomes its :class:`Outcome`: a
tool that raises is an ``error`` (``ModelRetry`` tells the model what to fix),
never a crash; what it returns is rendered as text, cut at ``max_output_chars``.
Calls that wait for a person's approval inside it (a nested worker's) pause its
worker: ``ApprovalNeeded`` goes through.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from runtime.errors import ModelRetry
from runtime.events import Caller
from runtime.tools.approvals import ApprovalNeeded
from runtime.tools.define import ToolContext, idempotency_key
from runtime.tools.layers.base import Admitted, Outcome, Prepared
from runtime.tools.render import render
from runtime.tools.threads import run_tool

__all__ = ["RunTool"]


class RunTool:
    """Runs a call's tool: the last handler of every tool call.

    Args:
        caller: The worker and run its tools' context names.
        max_output_chars: Longer output is cut, with a marker saying how much.
        scope: What its calls' idempotency keys are made from (the journal's scope,
            the run's in every life of it; empty: one of its own).
    """

    def __init__(self, caller: Caller, max_output_chars: int, scope: str = "") -> None:
        self.caller = caller
        self.max_output_chars = max_output_chars
        self._scope = scope

    @property
    def scope(self) -> str:
        """The calls' idempotency keys' scope: the one given, or one of its own, made
        when a tool first takes a context."""
        if not self._scope:
            self._scope = os.urandom(16).hex()
        return self._scope

    async def admit(self, calls: Sequence[Prepared]) -> list[Admitted]:
        return list(calls)

    async def __call__(self, call: Prepared) -> Outcome:
        found, kwargs = call.tool, call.kwargs
        if found.context_param is not None:
            worker, asked = self.caller.worker, call.call
            ctx = ToolContext(
                call_id=asked.id,
                worker=worker,
                run_id=self.caller.run_id,
                turn=call.turn,
                idempotency_key=idempotency_key(self.scope, worker, call.turn, asked.id),
            )
            kwargs = {**kwargs, found.context_param: ctx}
        try:
            value = await run_tool(found, kwargs, call.begun)
        except ApprovalNeeded:
            raise  # calls the tool made wait for a decision (a nested worker's): it pauses
        except ModelRetry as exc:
            return Outcome(status="error", content=f"Error: {exc.message}", error=exc.message)
        except Exception as exc:  # a failing tool becomes an observation, never a crash
            error = f"{type(exc).__name__}: {exc}"
            return Outcome(
                status="error", content=f"Error: tool {found.name!r} raised {error}", error=error
            )
        # Whatever the tool returned, rendering it is not its failure.
        return Outcome(status="ok", content=render(value, self.max_output_chars))
