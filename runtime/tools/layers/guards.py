"""The tool-call layer of argument guards: every call of a turn, its arguments
validated, gets the guards' verdict before any call of the turn runs (and before a
person is asked about any); a refused call's observation is the guards' reason, and
it never runs. A call is judged once: one the run's record shows was judged in an
earlier life (the journal knows it: it kept the verdict, or the call began then; or
it was asked about: it passed before a person was asked) keeps that verdict, and is
not judged again as its turn goes on (a judge's tokens spent twice, and maybe another
verdict on a call a person approved). The verdicts are journaled before any call of
the turn runs or waits: a refused call's observation as its outcome, so that a turn
resumed (it waited for a decision on another call, or its process stopped) answers it
from the journal, neither judged again nor run on a verdict that changed its mind; a
passed call's as ``passed``, so that it runs on the verdict it had (a call to a worker
as a tool whose nested worker waited for a person, say)."""

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
from runtime.tools.layers.journal import journal_answer

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
        # A call refused in an earlier life keeps its refusal here, where it was given:
        # passed on, it would be shown to a person (the approval layer asks about it).
        verdicts: list[Admitted] = [self._refused_before(c) or c for c in calls]
        checked = [c for c in calls if not self._judged(c)]
        if checked:
            turn = checked[0].turn
            texts = await self.guard.check([(c.call, c.tool, c.kwargs) for c in checked], turn)
            if self.journal is not None:  # kept before any call of the turn runs or waits
                kept = [(c.call, c.kwargs, text) for c, text in zip(checked, texts, strict=True)]
                await self.journal.judged(turn, kept)
            refused = {c.position: text for c, text in zip(checked, texts, strict=True) if text}
            verdicts = [
                Outcome(status="error", content=refused[c.position], error=refused[c.position])
                if c.position in refused
                else verdict
                for c, verdict in zip(calls, verdicts, strict=True)
            ]
        return await admit_rest(self.next, verdicts)

    def _refused_before(self, call: Prepared) -> Outcome | None:
        """The refusal the journal keeps of ``call`` from an earlier life that never
        asked a person about it (None: none): the guards' (or the error of a call that
        needed no approval, which the journal would answer alike)."""
        turn, asked = call.turn, call.call
        answer = journal_answer(self.journal, turn, asked) if self.journal is not None else None
        if answer is None or answer.status != "error":
            return None
        if self.asked is not None and self.asked.recorded(turn, asked.id) is not None:
            return None  # it passed before a person was asked (an edit's refusal is theirs)
        return answer

    def _judged(self, call: Prepared) -> bool:
        """Whether the run's record shows the guards judged ``call`` before (the journal
        keeps their verdict, or the call began then; or it was asked about)."""
        turn, call_id = call.turn, call.call.id
        if self.journal is not None and self.journal.recorded(turn, call_id) is not None:
            return True
        return self.asked is not None and self.asked.recorded(turn, call_id) is not None
