"""The tool-call layer of approvals: the calls of a turn that need a person's
approval get a decision before any call of the turn runs (see
:mod:`runtime.tools.approvals`). A denied call's observation is ``denied:
<reason>``; an approval with edited arguments runs the call with them, validated
again, its observation saying so; calls with no decision yet stop the turn
(``ApprovalNeeded``): the worker pauses, none of its calls having run."""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from typing import Any

from msgspec.structs import replace

from runtime.tools.approvals import ApprovalGate
from runtime.tools.layers.base import (
    Admitted,
    Outcome,
    Prepared,
    ToolHandler,
    ToolLayer,
    admit_rest,
)

__all__ = ["Approving"]


class Approving(ToolLayer):
    """Admits the calls ``gate`` approves (edited, when a person edited them)."""

    def __init__(self, next: ToolHandler, gate: ApprovalGate) -> None:
        super().__init__(next)
        self.gate = gate

    async def admit(self, calls: Sequence[Prepared]) -> list[Admitted]:
        gate = self.gate
        if not any(gate.involves(c.call, c.tool, c.turn) for c in calls):
            return await self.next.admit(calls)
        decided = await gate.decide([(c.call, c.tool, c.kwargs) for c in calls], calls[0].turn)
        verdicts: list[Admitted] = []
        for call, verdict in zip(calls, decided, strict=True):
            if verdict is None:
                verdicts.append(call)
            elif verdict.refusal is not None:
                verdicts.append(
                    Outcome(status="error", content=verdict.refusal, error=verdict.refusal)
                )
            else:
                verdicts.append(replace(call, kwargs=verdict.kwargs, note=verdict.note))
        return await admit_rest(self.next, verdicts)

    def __call__(self, call: Prepared) -> Coroutine[Any, Any, Outcome]:
        if not call.note:
            return self.next(call)
        return self._noted(call)

    async def _noted(self, call: Prepared) -> Outcome:
        """The call run with edited arguments: its observation says so first."""
        outcome = await self.next(call)
        return replace(outcome, content=call.note + outcome.content)
