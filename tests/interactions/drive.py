"""A cell's run, life after life: the first life (stopped where a tool holds it, when
a feature asks for that), then, while the run is not over, a new Executor that
decides what waits for approval and resumes it.

Deciding also probes that a decision is final: of like decisions made on one call at
once, exactly one is told it was recorded, and a later, contrary decision is refused
(the first one stands).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import anyio

from honeycomb import Executor, RunResult
from honeycomb.approvals import PendingApproval
from honeycomb.errors import ApprovalError
from runtime import Event
from tests.interactions.hive import TASK, Hive
from tests.interactions.toolkit import toolkit

__all__ = ["LIVES", "Decided", "Life", "Outcome", "drive", "live", "wanted"]

LIVES = 6
"""Lives a run may take before the cell gives up on it."""


RACERS = 4
"""Decisions made at once on the first call that waits."""


def wanted(pending: PendingApproval) -> bool:
    """How a person decides a call: pay 10, never more."""
    return pending.arguments.get("amount") == 10


@dataclass
class Life:
    """One life of the run: what it ended with, and every event a listener got."""

    number: int
    result: RunResult | None = None
    error: BaseException | None = None
    interrupted: bool = False
    events: list[Event] = field(default_factory=list)
    said: str | None = None
    """How a life that ran in another process ended, as it said."""
    said_partial: str | None = None
    """The status of the partial result of what such a life raised, as it said."""

    @property
    def status(self) -> str:
        if self.interrupted:
            return "interrupted"
        if self.said is not None:
            return self.said
        if self.result is not None:
            return self.result.status
        return f"raised {type(self.error).__name__}"

    @property
    def partial(self) -> RunResult | None:
        """The result, or the partial result of what the run raised."""
        if self.result is not None:
            return self.result
        return getattr(self.error, "partial", None)


@dataclass
class Decided:
    """A decision, and how the probes of its finality went."""

    pending: PendingApproval
    approve: bool
    raced: list[str] = field(default_factory=list)
    """What each of the like decisions made at once said (``ok`` or the error)."""
    again: str = ""
    """What a contrary decision made afterwards said."""


@dataclass
class Outcome:
    """A cell's run: its lives, its decisions, and the Executor of its last life."""

    hive: Hive
    lives: list[Life] = field(default_factory=list)
    decided: list[Decided] = field(default_factory=list)
    executor: Executor | None = None

    @property
    def last(self) -> Life:
        return self.lives[-1]

    @property
    def result(self) -> RunResult | None:
        return self.last.partial

    @property
    def events(self) -> list[Event]:
        return [e for life in self.lives for e in life.events]


async def drive(hive: Hive) -> Outcome:
    """Run the cell's hive to its end, through as many lives as it takes."""
    outcome = Outcome(hive=hive)
    first = 1
    if hive.crash:  # the first life in a child process, killed where a tool holds it
        from tests.interactions.crash import killed_first_life

        outcome.lives.append(await killed_first_life(hive))
        first = 2
    for number in range(first, LIVES + 1):
        if outcome.lives and not _goes_on(outcome.lives[-1], hive):
            break
        executor = hive.executor(number, toolkit)
        outcome.executor = executor
        try:
            before = outcome.lives[-1] if outcome.lives else None
            if before is not None and before.status == "waiting" and hive.decide:
                await _decide(executor, hive.run_id, outcome)
            life = await live(executor, hive, number)
        finally:
            _close(executor)
        outcome.lives.append(life)
    return outcome


def _goes_on(life: Life, hive: Hive) -> bool:
    """Whether the run is to be resumed after ``life``."""
    return life.interrupted or (life.status == "waiting" and hive.decide)


async def live(executor: Executor, hive: Hive, number: int) -> Life:
    """Life ``number`` of the run, on ``executor`` (the first one stopped where a tool
    holds it, when the hive says so)."""
    life = Life(number=number)

    async def run() -> None:
        try:
            if hive.stream:
                async with executor.stream(TASK, run_id=hive.run_id) as events:
                    async for event in events:
                        life.events.append(event)
                life.result = events.result
            else:
                life.result = await executor.run(
                    TASK, run_id=hive.run_id, on_event=[life.events.append]
                )
        except Exception as exc:
            life.error = exc

    if not (hive.interrupt and number == 1):
        await run()
        return life
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            # A tool writes the file, in this process or in a Ray actor.
            while not hive.ledger.halted.exists():  # noqa: ASYNC110
                await anyio.sleep(0.005)
            life.interrupted = True
            group.cancel_scope.cancel()

        async def until_done() -> None:
            try:
                await run()
            finally:
                group.cancel_scope.cancel()

        group.start_soon(watch)
        group.start_soon(until_done)
    return life


async def _decide(executor: Executor, run_id: str, outcome: Outcome) -> None:
    """Decide every call that waits (the first one twice at once), then try to
    reverse each decision."""
    for index, pending in enumerate(await executor.pending(run_id)):
        approve = wanted(pending)
        decided = Decided(pending=pending, approve=approve)

        async def one(yes: bool, pending: PendingApproval = pending) -> str:
            try:
                await executor.decide(run_id, pending.call_id, approve=yes, worker=pending.worker)
            except ApprovalError as exc:
                return str(exc)
            return "ok"

        if index == 0:
            decided.raced = list(await asyncio.gather(*(one(approve) for _ in range(RACERS))))
        else:
            decided.raced = [await one(approve)]
        decided.again = await one(not approve)
        outcome.decided.append(decided)


def _close(executor: Executor) -> None:
    """Close what a life's Executor opened: its store's writer, its memory file."""
    if executor.store is not None:
        executor.store.close()
    memory: Any = executor.memory
    if memory is not None and hasattr(memory, "close"):
        memory.close()
