"""The journal of side-effecting tool calls: what makes a resumed run never execute a
completed side effect twice.

Before a side-effecting call runs, its *intent* is written and made durable; when it
ends, its *outcome* (the observation). When a resumed worker meets the same call
again (same turn, same call id), the dispatcher looks it up first, whatever the
call's tool is declared as now (no longer side-effecting, or gone from the worker's
tools: what ran in an earlier life is what the journal says):

- an outcome is recorded: the call is not executed again; the recorded observation
  is what the model sees;
- only an intent is recorded (the process died mid-call): nobody knows whether it
  took effect. A tool declared ``idempotent`` is simply run again, if the worker
  still has it. Any other call is not: the model gets an ``unknown`` observation
  saying so, or, under ``on_unknown="fail"``, the worker fails with
  :class:`~runtime.errors.OutcomeUnknown`.

It also keeps the argument guards' verdict on each call they judged, as it is given
(before any call of its turn runs or waits): a refused call's observation is its
outcome, so a later life answers it so; a call that passed has an entry that says only
that (status ``passed``), so a later life does not judge it again, whatever its turn
waited for (a person's decision on another call, a nested worker's), and runs it as
any call it never began.

:class:`MemoryJournal` keeps entries in memory; the run store keeps them in SQLite.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

from runtime.messages import ObservationStatus, ToolCall, ToolMessage
from runtime.tools.define import arguments_text
from runtime.value import Value

__all__ = [
    "Journal",
    "JournalEntry",
    "MemoryJournal",
    "OnUnknown",
    "Verdict",
    "began",
    "judged_entry",
    "unknown_outcome_text",
]

OnUnknown = Literal["tell", "fail"]
"""What a resumed worker does about a side effect whose outcome a crash lost: tell
the model (an ``unknown`` observation), or fail."""


Verdict = tuple[ToolCall, Mapping[str, Any], str | None]
"""The argument guards' verdict on a call: the call, its validated arguments, and None
(it passed) or the text of its refusal."""


class JournalEntry(Value, frozen=True, kw_only=True):
    """One journaled call. ``status`` is None while only the intent is recorded, and
    ``passed`` while only the guards' verdict is (the call has not begun)."""

    tool: str
    arguments: str
    status: ObservationStatus | Literal["passed"] | None = None
    content: str = ""


def began(entry: JournalEntry | None, call: ToolCall) -> JournalEntry | None:
    """``entry`` when it is of ``call`` (its tool the same) and the call began in an
    earlier life, or was refused then (the journal answers it: it ended, or its outcome
    is unknown); None for a call the guards only passed, or another call."""
    if entry is None or entry.status == "passed" or entry.tool != call.name:
        return None
    return entry


class Journal(Protocol):
    """Where one worker's side-effecting calls are journaled.

    Attributes:
        on_unknown: What a resumed worker does about a call whose outcome was lost.
        scope: What the calls' idempotency keys are made from besides the worker, turn
            and call id: the identity of the run, the same in each of its lives and
            another for any other run (see :class:`~runtime.tools.ToolContext`).
    """

    on_unknown: OnUnknown
    scope: str

    def recorded(self, turn: int, call_id: str) -> JournalEntry | None:
        """The entry for a call of an earlier life of this run, if any."""

    async def intent(self, turn: int, call: ToolCall, arguments: Mapping[str, Any]) -> None:
        """Record that ``call`` is about to run; return once that is durable."""

    async def outcome(self, turn: int, observation: ToolMessage) -> None:
        """Record how the call ended; return once that is durable."""

    async def judged(self, turn: int, verdicts: Sequence[Verdict]) -> None:
        """Record the guards' verdicts on calls of ``turn`` (a refusal as the call's
        outcome); return once that is durable."""


def unknown_outcome_text(call: ToolCall) -> str:
    """The observation for a call whose outcome was lost."""
    return (
        f"Outcome unknown: the run stopped while {call.name!r} was running (call "
        f"{call.id}), so it may or may not have taken effect. It was not run again. "
        "Check whether it took effect before calling it again."
    )


class MemoryJournal:
    """A journal held in memory: for tests, and for a process that resumes its own
    workers.

    Args:
        on_unknown: What to do about a call with an intent and no outcome.
        scope: The calls' idempotency keys' scope (default: one of its own).
    """

    def __init__(self, on_unknown: OnUnknown = "tell", *, scope: str | None = None) -> None:
        self.on_unknown: OnUnknown = on_unknown
        self.scope = scope if scope is not None else os.urandom(16).hex()
        self.entries: dict[tuple[int, str], JournalEntry] = {}

    def recorded(self, turn: int, call_id: str) -> JournalEntry | None:
        return self.entries.get((turn, call_id))

    async def intent(self, turn: int, call: ToolCall, arguments: Mapping[str, Any]) -> None:
        self.entries[turn, call.id] = JournalEntry(
            tool=call.name, arguments=arguments_text(arguments)
        )

    async def outcome(self, turn: int, observation: ToolMessage) -> None:
        key = (turn, observation.tool_call_id)
        before = self.entries.get(key)
        arguments = before.arguments if before is not None else "{}"
        self.entries[key] = JournalEntry(
            tool=observation.name,
            arguments=arguments,
            status=observation.status,
            content=observation.content,
        )

    async def judged(self, turn: int, verdicts: Sequence[Verdict]) -> None:
        for call, arguments, refusal in verdicts:
            self.entries[turn, call.id] = judged_entry(call, arguments, refusal)


def judged_entry(call: ToolCall, arguments: Mapping[str, Any], refusal: str | None) -> JournalEntry:
    """The entry that keeps the guards' verdict on ``call``."""
    return JournalEntry(
        tool=call.name,
        arguments=arguments_text(arguments),
        status="passed" if refusal is None else "error",
        content=refusal or "",
    )
