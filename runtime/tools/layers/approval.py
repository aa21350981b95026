"""The tool-call layer of approvals: the calls of a turn that need a person's
approval get a decision before any call of the turn runs (see
:mod:`runtime.tools.approvals`). A denied call's observation is ``denied:
<reason>``; an approval with edited arguments runs the call with them, validated
again and checked by the argument guards again (a person's edit passes the same
policy as the model's call), its observation saying so (once: a call the journal knows
ran with them, and is not judged again). A person may take long: a turn whose run
spent meanwhile what reading its results needs (a model call) stops over budget before
any of its calls runs (with a store, its decisions stand as it is resumed). Calls with
no decision yet stop the turn (``ApprovalNeeded``): the worker pauses, none of its
calls having run. A call the journal knows began in an earlier life, unasked then, is
not asked about now (its tool since made to ask): the journal answers it."""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from typing import Any

from msgspec.structs import replace

from runtime.limits import Budget
from runtime.limits.budget import calls_to_read
from runtime.tools.approval_gate import ApprovalGate
from runtime.tools.define import arguments_text
from runtime.tools.journal import Journal, began
from runtime.tools.layers.base import (
    Admitted,
    Outcome,
    Prepared,
    ToolHandler,
    ToolLayer,
    admit_rest,
)
from runtime.tools.layers.guards import CallGuard

__all__ = ["Approving"]


class Approving(ToolLayer):
    """Admits the calls ``gate`` approves (edited, when a person edited them, and the
    edited arguments pass ``guard``).

    Args:
        next: The layers inside it.
        gate: Decides on the calls that need a person's approval.
        guard: The argument guards, which checked the model's arguments before the
            person saw them, and check edited ones again (None: no guards).
        journal: Where calls of earlier lives are known (None: none are): one it
            knows ran with its edited arguments once they passed, and is not
            judged again.
        budget: The run's budget, checked again once calls are approved (None: none
            is kept).
    """

    def __init__(
        self,
        next: ToolHandler,
        gate: ApprovalGate,
        guard: CallGuard | None = None,
        journal: Journal | None = None,
        budget: Budget | None = None,
    ) -> None:
        super().__init__(next)
        self.gate = gate
        self.guard = guard
        self.journal = journal
        self.budget = budget

    async def admit(self, calls: Sequence[Prepared]) -> list[Admitted]:
        gate = self.gate
        asked = [c for c in calls if gate.involves(c.call, c.tool, c.turn) and not self._ran(c)]
        if not asked:
            return await self.next.admit(calls)
        decided = await gate.decide([(c.call, c.tool, c.kwargs) for c in asked], calls[0].turn)
        runs = len(asked) < len(calls) or any(v is None or v.refusal is None for v in decided)
        if self.budget is not None and runs:
            # While a person decided, the run went on spending: the turn was reserved
            # with a model call left to read its results, which may be gone now.
            await self.budget.recheck(calls=calls_to_read(c.tool for c in calls))
        verdict_of = {id(c): v for c, v in zip(asked, decided, strict=True)}
        verdicts: list[Admitted] = []
        edited: list[tuple[int, Prepared]] = []
        for call in calls:
            verdict = verdict_of.get(id(call))
            if verdict is None:
                verdicts.append(call)
            elif verdict.refusal is not None:
                verdicts.append(
                    Outcome(status="error", content=verdict.refusal, error=verdict.refusal)
                )
            else:
                approved = replace(call, kwargs=verdict.kwargs, note=verdict.note)
                if verdict.kwargs is not call.kwargs and not self._judged(approved):
                    edited.append((len(verdicts), approved))
                verdicts.append(approved)
        if edited and self.guard is not None:
            await _guarded(self.guard, edited, verdicts, self.journal)
        return await admit_rest(self.next, verdicts)

    def _ran(self, call: Prepared) -> bool:
        """Whether ``call`` began in an earlier life unasked (its tool needed no approval
        then), as the journal knows: what it did stands, whatever the configuration now
        says of its tool, and the journal answers it. Nobody is asked about it: a
        denial now would tell the model that a call which ran, or may have, did not."""
        journal, log = self.journal, self.gate.log
        if journal is None or began(journal.recorded(call.turn, call.call.id), call.call) is None:
            return False
        return log is None or log.recorded(call.turn, call.call.id) is None

    def _judged(self, edited: Prepared) -> bool:
        """Whether the guards judged ``edited`` (a call with the arguments a person
        edited) in an earlier life, as the journal knows: it keeps their verdict on
        those arguments, or the call began then (it passed)."""
        journal = self.journal
        entry = journal.recorded(edited.turn, edited.call.id) if journal is not None else None
        if entry is None or entry.status != "passed":
            return began(entry, edited.call) is not None
        return entry.tool == edited.call.name and entry.arguments == arguments_text(edited.kwargs)

    def __call__(self, call: Prepared) -> Coroutine[Any, Any, Outcome]:
        if not call.note:
            return self.next(call)
        return self._noted(call)

    async def _noted(self, call: Prepared) -> Outcome:
        """The call run with edited arguments: its observation says so first."""
        outcome = await self.next(call)
        return replace(outcome, content=call.note + outcome.content)


async def _guarded(
    guard: CallGuard,
    edited: list[tuple[int, Prepared]],
    verdicts: list[Admitted],
    journal: Journal | None,
) -> None:
    """The calls a person edited, checked by ``guard`` again: a refused one's verdict in
    ``verdicts`` (by its place) becomes its refusal. The verdicts are journaled before
    any call of the turn runs or waits, as the model's calls' are: a later life (the
    turn waited for a nested worker's decision, or its process stopped) does not judge
    the edit again."""
    turn = edited[0][1].turn
    texts = await guard.check([(c.call, c.tool, c.kwargs) for _, c in edited], turn)
    pairs = list(zip(edited, texts, strict=True))
    if journal is not None:
        await journal.judged(
            turn, [(c.call, c.kwargs, c.note + t if t else None) for (_, c), t in pairs]
        )
    for (place, call), text in pairs:
        if text:
            verdicts[place] = Outcome(status="error", content=call.note + text, error=text)
