"""The room a worker runs in (one of a run's ``max_workers`` slots), which it leaves
while nothing of it works but its waits for a person.

A call that needs approval pauses only its worker: a worker paused in the run store
for a decision leaves its slot (the scheduler's), and one whose approver is asked in
the run leaves it too, for as long as the approver takes (:func:`out_of_room`), so the
run's other subtasks take the slot and go on. A worker's nested workers (an agent
tool's, a sub-run's: :func:`nested_work`) work in its room, each a strand of it, and
their caller's strand does not work while it waits for them: the room is left only
once none of its strands works (each waits for a person, or for strands nested in
it), so a nested worker never works beside the run's other subtasks past
``max_workers``. The first strand to work again takes a slot again (a wait for room,
not counted in the worker's own time limit). The room and the strand are found
through context variables, which the tasks the worker starts (its tool calls, its
nested workers) inherit.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar

from runtime.limits.worktime import asking_a_person, nested_strand, waiting_for_room

__all__ = ["Room", "also_among", "away_for_a_person", "in_room", "nested_work", "out_of_room"]


class Room:
    """One worker's slot among ``slots``: taken, left and given back, never released
    nor taken twice (``held`` says whether it holds it). Left once none of its strands
    works (the worker's own, and one for each nested worker under way), it is taken
    again once one of them works again."""

    __slots__ = ("_also", "_own", "_slots", "_taking", "_working", "held")  # one a worker

    def __init__(self, slots: asyncio.Semaphore) -> None:
        self._slots = slots
        self._also: tuple[asyncio.Semaphore, ...] = ()  # held with it (:func:`also_among`)
        self.held = False
        self._working = 0  # its strands that work
        self._own = _Strand(self)
        self._taking: asyncio.Lock | None = None  # made once a strand waits for a slot

    async def take(self) -> None:
        """Wait for a slot, and hold it: a stretch of the worker's run begins, its own
        strand working. The task that takes it first is the worker's, for the worker's
        whole life: its work is in this room from then on (what :func:`out_of_room`
        finds), and that of the tasks it starts. No block marks it, nor is it
        unmarked: a worker waiting on its model holds nothing more for it (benchmarks
        A and E, where 10,000 workers wait at once)."""
        await self._slots.acquire()
        self.held = True
        self._working = 1
        if _strand.get() is not self._own:
            _strand.set(self._own)

    def give_back(self) -> None:
        """Let the slot go, if it holds it (and those it holds with it)."""
        if self.held:
            self.held = False
            self._slots.release()
            for slots in self._also:
                slots.release()

    async def _acquire(self) -> None:
        """Take a slot, and one of each of the slots it holds with it, or none."""
        await self._slots.acquire()
        taken = [self._slots]
        try:
            for slots in self._also:
                await slots.acquire()
                taken.append(slots)
        except BaseException:
            for slots in taken:
                slots.release()
            raise

    def _less(self) -> None:
        """A strand stops working: the last lets the slot go."""
        self._working -= 1
        if self._working == 0:
            self.give_back()

    async def _more(self, *, cancelled: bool = False) -> None:
        """A strand works again: while the room has no slot, it waits until it has
        one again, the first of them taking it (not when it was cancelled: nothing of
        the worker goes on)."""
        self._working += 1
        if self.held or cancelled:
            return
        if self._taking is None:
            self._taking = asyncio.Lock()
        try:
            with waiting_for_room():  # the worker's own time limit does not count it
                async with self._taking:  # the others, once the first has taken it
                    if not self.held:
                        await self._acquire()
                        self.held = True
        except BaseException:  # cancelled as it waits: it does not work
            self._less()
            raise


class _Strand:
    """A line of a worker's work in its room: the worker's own, or a nested worker's.
    It works unless it waits for a person (``asking``) or for the strands nested in it
    (``nested``)."""

    __slots__ = ("asking", "nested", "room")

    def __init__(self, room: Room) -> None:
        self.room = room
        self.asking = 0  # its waits for a person under way (parallel ones may overlap)
        self.nested = 0  # the strands nested in it under way

    @property
    def works(self) -> bool:
        return not self.asking and not self.nested


_strand: ContextVar[_Strand | None] = ContextVar("honeycomb_strand", default=None)


def in_room() -> bool:
    """Whether the work under way is in a worker's room (one of a run's
    ``max_workers``)."""
    return _strand.get() is not None


@asynccontextmanager
async def out_of_room() -> AsyncIterator[None]:
    """The block waits for a person: its strand does not work meanwhile, and the
    worker gives its slot back once none of its strands does; a slot is taken again
    as the block ends (a failure in it too) and the strand works again, not once it
    is cancelled. Nothing without a room."""
    strand = _strand.get()
    if strand is None:
        yield  # no slots to share
        return
    strand.asking += 1
    if strand.asking == 1 and not strand.nested:
        strand.room._less()
    try:
        yield
    except Exception:
        await _asked(strand, cancelled=False)
        raise
    except BaseException:
        await _asked(strand, cancelled=True)
        raise
    await _asked(strand, cancelled=False)


@asynccontextmanager
async def away_for_a_person() -> AsyncIterator[None]:
    """The block waits for a person: out of its worker's room (:func:`out_of_room`),
    and off the clocks of the time limits of the work it is part of
    (:func:`~runtime.limits.worktime.asking_a_person`)."""
    async with out_of_room():
        with asking_a_person():
            yield


async def _asked(strand: _Strand, *, cancelled: bool) -> None:
    strand.asking -= 1
    if strand.works:
        await strand.room._more(cancelled=cancelled)


@asynccontextmanager
async def also_among(slots: asyncio.Semaphore) -> AsyncIterator[None]:
    """The block's worker holds one of ``slots`` too (a Ray actor's room for it) while
    it holds its room: left with it while nothing of the worker works but its waits for
    a person, and taken again with it. A worker with no room (no ``max_workers`` to
    share) has a room of its own among ``slots`` for the block. The wait for the slot
    is a wait for room, which the worker's own time limit does not count."""
    strand = _strand.get()
    if strand is None:
        room = Room(slots)
        with waiting_for_room():
            await room.take()
        try:
            yield
        finally:
            room.give_back()
            _strand.set(None)  # the worker's task is in no room once the block ends
        return
    room = strand.room
    with waiting_for_room():
        await slots.acquire()  # (the worker works as the block begins: its room is held)
    room._also = (*room._also, slots)
    try:
        yield
    finally:
        room._also = tuple(s for s in room._also if s is not slots)
        if room.held:
            slots.release()


@asynccontextmanager
async def nested_work() -> AsyncIterator[None]:
    """The block runs a nested worker (an agent tool's, or a sub-run's), or a worker's
    own tool call beside its calls that run nested workers, in the room of the worker
    it is part of: a strand of its own, which works while it runs, and its caller's
    strand does not work until it ends (nor until the others nested in it do). So too
    against the time limits of the work it is part of
    (:func:`~runtime.limits.worktime.nested_strand`)."""
    with nested_strand():  # and beside its caller's other work, against their time limits
        caller = _strand.get()
        if caller is None:
            yield
        else:
            async with _nested_in(caller):
                yield


@asynccontextmanager
async def _nested_in(caller: _Strand) -> AsyncIterator[None]:
    """A strand of its own in ``caller``'s room, nested in ``caller``'s for the block."""
    room = caller.room
    own = _Strand(room)
    # It works, in a slot: its caller's, or, when the caller's other nested workers all
    # wait for a person (a call started after them), one taken again.
    await room._more()
    caller.nested += 1
    if caller.nested == 1 and not caller.asking:
        room._less()
    token = _strand.set(own)
    try:
        yield
    finally:
        _strand.reset(token)
        caller.nested -= 1
        if caller.works:  # ``own`` works as its block ends: the room holds a slot
            room._working += 1
        room._less()  # ``own`` ends
