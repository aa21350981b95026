"""A worker's room (its slot of a run's ``max_workers``) while it waits for a person:
left once, and taken again once, however many of its waits overlap."""

from __future__ import annotations

import asyncio

from runtime.concurrency import within
from runtime.limits.room import Room, also_among, in_room, nested_work, out_of_room
from runtime.limits.worktime import within_own_time


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


async def test_the_slot_is_left_only_once_no_nested_worker_works() -> None:
    """One nested worker of a worker asks a person while another works: the room kept
    its slot only until the asking began, so the other worked out of any slot. Now it
    is left once the other ends, and taken again once the person has answered."""
    slots = asyncio.Semaphore(1)
    room = Room(slots)
    await room.take()
    asking, answered, worked = asyncio.Event(), asyncio.Event(), asyncio.Event()
    held_while_working: list[bool] = []

    async def asks() -> None:
        async with nested_work(), out_of_room():
            asking.set()
            await answered.wait()
        held_while_working.append(room.held)  # it works again: in a slot

    async def works() -> None:
        async with nested_work():
            await asking.wait()
            await asyncio.sleep(0)  # one more step of work, beside the wait
            held_while_working.append(room.held)
        worked.set()

    with within(5):  # the room taken above is this task's
        async with asyncio.TaskGroup() as group:
            group.create_task(asks())
            group.create_task(works())
            await worked.wait()
            assert not room.held  # nothing of the worker works: its slot is another's
            answered.set()
    assert held_while_working == [True, True]
    assert room.held
    assert slots.locked()
    room.give_back()
    assert not slots.locked()


async def test_nested_workers_answered_while_the_slot_is_anothers_all_wait_for_it() -> None:
    """Two nested workers of a worker wait for a person, and both are answered while
    another worker holds the slot: the first waited for a slot, and the second, seeing
    one of the room's strands at work, went on working out of any slot."""
    slots = asyncio.Semaphore(1)
    room = Room(slots)
    await room.take()
    asking = [asyncio.Event(), asyncio.Event()]
    answered = asyncio.Event()
    worked: list[bool] = []

    async def asks(entered: asyncio.Event) -> None:
        async with nested_work():
            async with out_of_room():
                entered.set()
                await answered.wait()
            worked.append(room.held)  # it works again: in a slot

    with within(5):  # the room taken above is this task's
        async with asyncio.TaskGroup() as group:
            for entered in asking:
                group.create_task(asks(entered))
            for entered in asking:
                await entered.wait()
            assert not room.held
            await slots.acquire()  # another worker takes the slot
            answered.set()
            for _ in range(5):
                await asyncio.sleep(0)  # each answered wait takes its steps
            assert worked == []  # neither works while the slot is the other's
            slots.release()  # the other ends: the room has it again
    assert worked == [True, True]
    room.give_back()
    assert not slots.locked()


async def test_slots_held_with_a_room_are_left_and_taken_again_with_it() -> None:
    """A Ray actor's room for a worker, held with the worker's slot of max_workers:
    left with it while the worker's approver asks a person, and taken again with it
    (before, the actor's room was held all along, and the run's other workers waited
    for the person). A worker with no slot has a room of its own among them."""
    run, actor = asyncio.Semaphore(1), asyncio.Semaphore(1)
    async with also_among(actor):  # in no room of max_workers: a room of its own
        assert actor.locked()
        async with out_of_room():
            assert not actor.locked()
        assert actor.locked()
    assert not in_room()
    assert not actor.locked()
    room = Room(run)
    await room.take()
    async with also_among(actor):
        assert actor.locked()
        async with out_of_room():
            assert (run.locked(), actor.locked()) == (False, False)  # another may run
        assert (run.locked(), actor.locked()) == (True, True)
    assert not actor.locked()
    room.give_back()


async def test_a_wait_for_slots_held_with_a_room_is_not_the_workers_own_time() -> None:
    """A worker waits for a Ray actor's room (``also_among``) while another worker
    holds it 0.3s, under its own time limit of 0.1s: the wait is not its work, so it is
    not cut, whether it holds a slot of max_workers (a room) or has none."""
    actor = asyncio.Semaphore(1)
    held, waiting = asyncio.Event(), [asyncio.Event(), asyncio.Event()]
    ended: list[bool] = []

    async def waits(room: Room | None, asking: asyncio.Event) -> None:
        if room is not None:
            await room.take()
        with within_own_time(0.1) as deadline:
            asking.set()
            async with also_among(actor):
                pass
        ended.append(deadline.expired)
        if room is not None:
            room.give_back()

    async def holds() -> None:
        async with actor:
            held.set()
            for asking in waiting:
                await asking.wait()
            await asyncio.sleep(0.3)  # its work, as the others wait for the actor

    async with asyncio.TaskGroup() as group:
        group.create_task(holds())
        await held.wait()
        group.create_task(waits(Room(asyncio.Semaphore(1)), waiting[0]))
        group.create_task(waits(None, waiting[1]))
    assert ended == [False, False]
