"""The tool-call layer of the journal of side effects: a side-effecting call is run
at most once across crashes and resumes (see :mod:`runtime.tools.journal`).

Its intent is made durable before it runs and its outcome when it ends. A call the
journal knows from an earlier life is not run again: one that ended is answered with
its recorded observation; one that was running when the process died is an
``unknown`` observation (or run again, when its tool is ``idempotent``).
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from runtime.tools.journal import Journal, unknown_outcome_text
from runtime.tools.layers.base import Outcome, Prepared, ToolHandler, ToolLayer

__all__ = ["Journaled"]


class Journaled(ToolLayer):
    """Journals each side-effecting call in ``journal``."""

    def __init__(self, next: ToolHandler, journal: Journal) -> None:
        super().__init__(next)
        self.journal = journal

    def __call__(self, call: Prepared) -> Coroutine[Any, Any, Outcome]:
        if not call.tool.side_effects:
            return self.next(call)
        return self._journaled(call)

    async def _journaled(self, call: Prepared) -> Outcome:
        journal, asked, turn = self.journal, call.call, call.turn
        entry = journal.recorded(turn, asked.id)
        if entry is not None and entry.tool == asked.name:
            if entry.status is not None:  # it ended before the crash: never run it again
                error = entry.content if entry.status != "ok" else None
                return Outcome(status=entry.status, content=entry.content, error=error, ran=False)
            if not call.tool.idempotent:  # it was running when the process died
                text = unknown_outcome_text(asked)
                outcome = Outcome(status="unknown", content=text, error=text, ran=False)
                await journal.outcome(turn, outcome.observation(asked))
                return outcome
        await journal.intent(turn, asked, call.kwargs)
        outcome = await self.next(call)
        await journal.outcome(turn, outcome.observation(asked))
        return outcome
