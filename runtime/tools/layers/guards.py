"""The tool-call layer of argument guards: every call of a turn, its arguments
validated, gets the guards' verdict before any call of the turn runs (and before a
person is asked about any); a refused call's observation is the guards' reason, and
it never runs. A call is judged once: one the run's record shows was judged in an
earlier life (the journal knows it: it was checked before it ran; or it was asked
about: it passed before a person was asked) keeps that verdict, and is not judged
again as its turn goes on (a judge's tokens spent twice, and maybe another verdict
on a call a person approved). A refused call's observation is journaled as its
outcome, so that a turn resumed (it waited for a decision on another call, or its
process stopped) answers it from the journal: it is not judged again, nor run on a
verdict that changed its mind."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from runtime.messages import ToolCall
from runtime.tools.approvals import ApprovalLog
from runtime.tools.define import Tool
from runtime.tools.journal import Journal
from runtime.tools.layers.base import (
    Admitted,
    Outcome,
    Prepared,
    ToolHandler,
    ToolLayer,
    admit_rest,
)

__all__ = ["ArgumentGuards", "CallGuard"]


class CallGuard(Protocol):
    """Checks the calls of a turn, their arguments validated, before any of them runs."""

    async def check(
        self, calls: Sequence[tuple[ToolCall, Tool[Any, Any], dict[str, Any]]], turn: int
    ) -> list[str | None]:
        """For each call, None (it may run) or the text of its error observation."""
        ...


class ArgumentGuards(ToolLayer):
    """Admits the calls ``guard`` lets run.

    Args:
        next: The layers inside it.
        guard: Checks a turn's calls (a worker's argument guards).
        journal: Where calls of earlier lives are known (None: none are).
        asked: Where calls asked about are known (None: none are), each of which
            passed the guards before it was asked about.
    """

    def __init__(
        self,
        next: ToolHandler,
        guard: CallGuard,
        journal: Journal | None,
        asked: ApprovalLog | None = None,
    ) -> None:
        super().__init__(next)
        self.guard = guard
        self.journal = journal
        self.asked = asked

    async def admit(self, calls: Sequence[Prepared]) -> list[Admitted]:
        checked = [c for c in calls if not self._judged(c)]
        verdicts: list[Admitted] = list(calls)
        if checked:
            turn = checked[0].turn
            texts = await self.guard.check([(c.call, c.tool, c.kwargs) for c in checked], turn)
            refused = {c.position: text for c, text in zip(checked, texts, strict=True) if text}
            await self._kept([c for c in checked if c.position in refused], refused)
            verdicts = [
                Outcome(status="error", content=refused[c.position], error=refused[c.position])
                if c.position in refused
                else c
                for c in calls
            ]
        return await admit_rest(self.next, verdicts)

    async def _kept(self, calls: Sequence[Prepared], refused: dict[int, str]) -> None:
        """Journal each refused call's observation as its outcome, before any call of
        the turn runs or waits: a later life answers it so (the journal layer)."""
        journal = self.journal
        if journal is None:
            return
        for call in calls:
            text = refused[call.position]
            await journal.intent(call.turn, call.call, call.kwargs)
            observation = Outcome(status="error", content=text, error=text).observation(call.call)
            await journal.outcome(call.turn, observation)

    def _judged(self, call: Prepared) -> bool:
        """Whether the run's record shows the guards judged ``call`` before (it passed,
        or its refusal is journaled)."""
        turn, call_id = call.turn, call.call.id
        if self.journal is not None and self.journal.recorded(turn, call_id) is not None:
            return True
        return self.asked is not None and self.asked.recorded(turn, call_id) is not None
