"""The room a worker runs in (one of a run's ``max_workers`` slots), which it leaves
while it waits for a person.

A call that needs approval pauses only its worker: a worker paused in the run store
for a decision leaves its slot (the scheduler's), and one whose approver is asked in
the run leaves it too, for as long as the approver takes (:func:`out_of_room`), so the
run's other subtasks take the slot and go on; once the person has decided, the worker
waits for a slot again (not counted in its own time limit: a wait for room). The room
is found through a context variable, which the tasks the worker starts (its tool
calls, its nested workers) inherit.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar

from runtime.limits.worktime import waiting_for_room

__all__ = ["Room", "out_of_room"]


class Room:
    """One worker's slot among ``slots``: taken, left and given back, never released
    nor taken twice (``held`` says whether it holds it). Left while any of its waits
    for a person goes on (a worker's nested workers may ask at once), it is taken
    again once the last of them has ended."""

    __slots__ = ("_away", "_slots", "held")  # one a worker, as long as it runs

    def __init__(self, slots: asyncio.Semaphore) -> None:
        self._slots = slots
        self.held = False
        self._away = 0  # its waits for a person going on

    async def take(self) -> None:
        """Wait for a slot, and hold it. The task that takes it first is the worker's,
        for the worker's whole life: its work is in this room from then on (what
        :func:`out_of_room` finds), and that of the tasks it starts. No block marks it,
        nor is it unmarked: a worker waiting on its model holds nothing more for it
        (benchmarks A and E, where 10,000 workers wait at once)."""
        await self._slots.acquire()
        self.held = True
        if _room.get() is not self:
            _room.set(self)

    def give_back(self) -> None:
        """Let the slot go, if it holds it."""
        if self.held:
            self.held = False
            self._slots.release()

    def leave(self) -> None:
        """A wait for a person begins: the first lets the slot go."""
        self._away += 1
        if self._away == 1:
            self.give_back()

    async def back(self, *, cancelled: bool = False) -> None:
        """A wait for a person ended: the last takes a slot again (not when it was
        cancelled: nothing of the worker goes on)."""
        self._away -= 1
        if self._away == 0 and not self.held and not cancelled:
            with waiting_for_room():  # the worker's own time limit does not count it
                await self.take()


_room: ContextVar[Room | None] = ContextVar("honeycomb_room", default=None)


@asynccontextmanager
async def out_of_room() -> AsyncIterator[None]:
    """The block waits for a person: the worker it is part of gives its slot back
    meanwhile, and takes one again once the block ends (a failure in it too) and no
    other of its waits for a person goes on; not once it is cancelled. Nothing without
    a room."""
    room = _room.get()
    if room is None:
        yield  # no slots to share
        return
    room.leave()
    try:
        yield
    except Exception:
        await room.back()
        raise
    except BaseException:
        await room.back(cancelled=True)
        raise
    await room.back()
