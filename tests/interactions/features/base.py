"""What a feature of the matrix is, and what its checks share."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from honeycomb import AssistantMessage, SubtaskResult, ToolCall, ToolMessage
from tests.interactions.drive import Outcome
from tests.interactions.hive import Hive
from tests.interactions.invariants import Report

__all__ = [
    "SECRET",
    "Env",
    "Feature",
    "calls_of",
    "cut_off",
    "finished",
    "observations",
    "top_level",
    "top_observations",
]

SECRET = "SECRET-7731"
"""What output guards refuse: every worker's and the aggregator's first answer holds it."""


@dataclass(frozen=True)
class Env:
    """What the session shares with the cells: the MCP server (one per test process),
    and the Ray pool (for the Ray twin of a cell; None for its local twin)."""

    mcp_url: str | None = None
    mcp_token: str | None = None
    mcp_notes: Path | None = None
    backend: Any = None


class Feature:
    """A feature of the matrix: it puts its part in a cell's hive, and checks what it
    promises once the run is over. A check never assumes the run went as it would
    alone: another feature may have stopped a worker (a budget, a guard) or paused
    it (an approval); it checks what a finished worker must show, and that nothing
    happened that must not.

    Attributes:
        name: Its id in cell ids and the tables.
        title: Its name in docs/interactions.md.
        about: What it turns on in a cell's hive.
        promises: What it checks, beyond the universal invariants.
        allowed: Errors a run of a cell with it may end with.
        needs: Session fixtures its cells use (``mcp``, ``ray``).
    """

    name: ClassVar[str]
    title: ClassVar[str]
    about: ClassVar[str]
    promises: ClassVar[str]
    allowed: ClassVar[tuple[type[BaseException], ...]] = ()
    needs: ClassVar[frozenset[str]] = frozenset()

    def apply(self, hive: Hive, env: Env) -> None:
        raise NotImplementedError

    async def prepare(self, hive: Hive) -> None:
        """Make what must exist before the first life (files, records)."""

    def check(self, outcome: Outcome, report: Report) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.name


def finished(outcome: Outcome) -> dict[str, SubtaskResult]:
    """The subtasks whose workers answered."""
    result = outcome.result
    if result is None:
        return {}
    return {k: s for k, s in result.subtasks.items() if s.ok and s.worker is not None}


def observations(subtask: SubtaskResult, tool: str | None = None) -> list[ToolMessage]:
    """A subtask worker's observations (of one tool)."""
    if subtask.worker is None:
        return []
    return [
        m
        for m in subtask.worker.transcript.messages
        if isinstance(m, ToolMessage) and (tool is None or m.name == tool)
    ]


def calls_of(subtask: SubtaskResult, tool: str) -> list[ToolCall]:
    """A subtask worker's calls of ``tool``, as its model asked for them."""
    if subtask.worker is None:
        return []
    return [
        call
        for m in subtask.worker.transcript.messages
        if isinstance(m, AssistantMessage)
        for call in m.tool_calls
        if call.name == tool
    ]


def cut_off(outcome: Outcome, message: ToolMessage) -> bool:
    """Whether an observation says its call's outcome is unknown, as it must for a
    side-effecting call journaled in a life that was cut off (it may or may not have
    run: it is never run again)."""
    return message.status == "unknown" and len(outcome.lives) > 1


def top_level(worker: str | None) -> bool:
    """Whether a worker runs a subtask (a nested worker is named ``CALLER/CALL``)."""
    return worker is not None and "/" not in worker


def top_observations(outcome: Outcome, tool: str) -> Iterable[tuple[str, ToolMessage]]:
    """The observations of ``tool`` by the subtask workers that answered."""
    for sid, subtask in finished(outcome).items():
        for message in observations(subtask, tool):
            yield sid, message
