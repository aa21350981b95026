"""The tool-call layer of argument guards: every call of a turn, its arguments
validated, gets the guards' verdict before any call of the turn runs (and before a
person is asked about any); a refused call's observation is the guards' reason, and
it never runs. A call the journal knows from an earlier life was checked before it
ran then, and is not checked again."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from runtime.messages import ToolCall
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
    """

    def __init__(self, next: ToolHandler, guard: CallGuard, journal: Journal | None) -> None:
        super().__init__(next)
        self.guard = guard
        self.journal = journal

    async def admit(self, calls: Sequence[Prepared]) -> list[Admitted]:
        journal = self.journal
        checked = [
            c for c in calls if journal is None or journal.recorded(c.turn, c.call.id) is None
        ]
        verdicts: list[Admitted] = list(calls)
        if checked:
            turn = checked[0].turn
            texts = await self.guard.check([(c.call, c.tool, c.kwargs) for c in checked], turn)
            refused = {c.position: text for c, text in zip(checked, texts, strict=True) if text}
            verdicts = [
                Outcome(status="error", content=refused[c.position], error=refused[c.position])
                if c.position in refused
                else c
                for c in calls
            ]
        return await admit_rest(self.next, verdicts)
