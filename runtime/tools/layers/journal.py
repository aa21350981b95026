"""The tool-call layer of the journal of side effects: a side-effecting call is run
at most once across crashes and resumes (see :mod:`runtime.tools.journal`).

Its intent is made durable before it runs (once what it needs first is ready: its MCP
server started) and its outcome when it ends. A call the
journal knows from an earlier life is not run again: one that ended is answered with
its recorded observation; one that was running when the process died is an
``unknown`` observation (or run again, when its tool is ``idempotent``). A call
whose worker was cancelled while it ran, but that ran to its end all the same (a sync
tool's thread is waited for), has its outcome kept as it ends: it was not cut off; one
cancelled before its thread took it up, or as its intent was written, never began, and
a resumed worker runs it. What the
journal knows wins over what the call's tool is declared as now: a tool no longer
side-effecting (a setting changed, an MCP server that now says ``readOnlyHint``)
does not make an effect of an earlier life run twice, and a call the dispatcher
cannot run now (its tool gone) gets the journal's answer too (:func:`journal_answer`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any

from runtime.concurrency import shielded
from runtime.errors import StoreError
from runtime.messages import ToolCall
from runtime.tools.journal import Journal, JournalEntry, began, unknown_outcome_text
from runtime.tools.layers.base import Outcome, Prepared, ToolHandler, ToolLayer
from runtime.tools.layers.run import known_outcome
from runtime.tools.threads import ran_to_its_end

__all__ = ["Journaled", "journal_answer"]


class Journaled(ToolLayer):
    """Journals each side-effecting call in ``journal``, and answers from it each call
    it knows from an earlier life, whatever that call's tool is declared as now."""

    def __init__(self, next: ToolHandler, journal: Journal) -> None:
        super().__init__(next)
        self.journal = journal

    def __call__(self, call: Prepared) -> Coroutine[Any, Any, Outcome]:
        asked = call.call
        entry = began(self.journal.recorded(call.turn, asked.id), asked)
        if entry is not None:  # a call of an earlier life
            if entry.status is not None or not call.tool.idempotent:
                return self._answered(call.turn, asked, entry)
            return self._journaled(call)  # cut off, and safe to run again
        if call.tool.side_effects:
            return self._journaled(call)
        return self.next(call)

    async def _answered(self, turn: int, asked: ToolCall, entry: JournalEntry) -> Outcome:
        outcome = _recorded_outcome(asked, entry)
        if entry.status is None:  # kept, so that a later life says the same
            await self.journal.outcome(turn, outcome.observation(asked))
        return outcome

    async def _journaled(self, call: Prepared) -> Outcome:
        journal, asked, turn = self.journal, call.call, call.turn
        ready = call.tool.ready
        if ready is not None:
            # What the call needs first (its MCP server started) is not its effect: a
            # call cut off meanwhile never reached its tool, and is no intent a resumed
            # worker must take for begun. Should it fail, the tool says so as it is
            # called (it asks again; a server that cannot start stays down).
            with contextlib.suppress(Exception):
                await ready()
        try:
            await journal.intent(turn, asked, call.kwargs)
        except asyncio.CancelledError:
            # Cut off as its intent was written, which may be durable all the same: the
            # call never began, and a resumed worker runs it (not an unknown outcome).
            await _never_began(journal, call)
            raise
        try:
            outcome = await self.next(call)
        except asyncio.CancelledError as exc:
            await _stopped(journal, call, exc)
            raise
        await journal.outcome(turn, outcome.observation(asked))
        return outcome


async def _stopped(journal: Journal, call: Prepared, cancelled: BaseException) -> None:
    """Keep what ``call``, whose worker was cancelled as it ran, is known to have done
    (else its intent stays: its outcome is unknown): how it ended, when it ran to its
    end all the same (a sync tool's thread is waited for), or that it never began (its
    thread never took it up), as an entry that says so (``passed``: a resumed worker
    runs it, as a call the argument guards passed and that had not begun)."""
    ended = known_outcome(cancelled)
    ran = ran_to_its_end(cancelled)
    if ended is not None:
        with contextlib.suppress(StoreError):  # not kept: unknown, as if cut off
            await shielded(journal.outcome(call.turn, ended.observation(call.call)))
    elif ran is not None and not ran.began:
        await _never_began(journal, call)


async def _never_began(journal: Journal, call: Prepared) -> None:
    """Keep that ``call``, whose worker was cancelled, never began, as an entry that
    says so (``passed``: a resumed worker runs it, as a call the argument guards passed
    and that had not begun). Not kept (the store failed): its intent, if written,
    stays, and its outcome is unknown, as if cut off."""
    with contextlib.suppress(StoreError):
        await shielded(journal.judged(call.turn, [(call.call, call.kwargs, None)]))


def journal_answer(journal: Journal, turn: int, call: ToolCall) -> Outcome | None:
    """What ``journal`` answers for ``call`` of ``turn``; None when it does not know the
    call.

    The dispatcher asks it about a call it refuses before the layers see it (its tool
    gone, its arguments no longer valid): a call of an earlier life is answered from
    the journal instead, whatever became of its tool. Nothing is written: the call
    does not run.
    """
    entry = began(journal.recorded(turn, call.id), call)
    return _recorded_outcome(call, entry) if entry is not None else None


def _recorded_outcome(call: ToolCall, entry: JournalEntry) -> Outcome:
    """What the model is told of ``call``, a call of an earlier life that ``entry``
    records and that is not run again: its recorded observation if it ended, else
    that its outcome is unknown (it was running when the process died)."""
    status = entry.status
    if status is not None and status != "passed":  # never "passed": the call began
        error = entry.content if status != "ok" else None
        return Outcome(status=status, content=entry.content, error=error, ran=False)
    text = unknown_outcome_text(call)
    return Outcome(status="unknown", content=text, error=text, ran=False)
