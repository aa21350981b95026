"""A worker's room (its slot of a run's ``max_workers``) while it waits for a person:
left once, and taken again once, however many of its waits overlap."""

from __future__ import annotations

import asyncio

from runtime.concurrency import within
from runtime.limits.room import Room, out_of_room


async def test_overlapping_waits_for_a_person_leave_the_slot_once_and_take_it_once() -> None:
    """Two nested workers of one worker ask at once, and both are answered while
    another worker holds the slot: each took a slot again, so one waited for a second
    slot forever (and the worker would have held two)."""
    slots = asyncio.Semaphore(1)
    room = Room(slots)
    await room.take()
    inside = [asyncio.Event(), asyncio.Event()]
    done = [asyncio.Event(), asyncio.Event()]
    answered = asyncio.Event()

    async def asks(entered: asyncio.Event, ended: asyncio.Event) -> None:
        async with out_of_room():
            entered.set()
            await answered.wait()
            ended.set()  # then, in the same step, the block's end: a slot wanted again

    with within(5):  # the room taken above is this task's
        async with asyncio.TaskGroup() as group:
            for entered, ended in zip(inside, done, strict=True):
                group.create_task(asks(entered, ended))
            for entered in inside:
                await entered.wait()
            assert not room.held
            await slots.acquire()  # another worker takes the slot
            answered.set()
            for ended in done:
                await ended.wait()
            slots.release()  # and ends: the room has it again
    assert room.held
    assert slots.locked()  # the one slot is the room's
    room.give_back()
    assert not slots.locked()
