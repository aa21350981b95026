"""What many calls share serves one event loop at a time (``runtime/concurrency.py``):
made again for the next loop once the last has stopped, whatever that one left held,
and refused at once to a second loop while the first still runs (another thread's)."""

from __future__ import annotations

import asyncio
import gc

import anyio
import pytest

from runtime import EventLoopConflict
from runtime.concurrency import LoopLock, LoopSlots, OneLoop, PerLoop
from tests.support.loops import LIMIT_S, LoopInThread, hold, stranded


async def value_of(values: PerLoop[object]) -> object:
    return values.get()


def test_a_value_is_kept_within_a_loop_and_made_again_for_the_next() -> None:
    values = PerLoop(object, OneLoop("the thing"))

    async def twice() -> tuple[object, object]:
        return values.get(), values.get()

    first, again = asyncio.run(twice())
    second, _ = asyncio.run(twice())
    assert first is again
    assert second is not first
    assert values.last is second


def test_a_second_loop_at_once_is_refused_by_every_value_of_the_owner() -> None:
    owner = OneLoop("the thing")
    used, untouched = PerLoop(object, owner), PerLoop(object, owner)
    with LoopInThread() as there:
        theirs = there.run(value_of(used))
        for values in (used, untouched):
            with pytest.raises(EventLoopConflict, match="for each thread") as refused:
                asyncio.run(value_of(values))
            assert refused.value.what == "the thing"
            assert str(refused.value).startswith("the thing is in use by another event loop")
        assert there.run(value_of(used)) is theirs  # the refused loop took nothing
    assert asyncio.run(value_of(used)) is not theirs  # that loop stopped: this one serves


def test_a_lock_and_slots_a_closed_loop_held_are_free_on_the_next() -> None:
    owner = OneLoop("the thing")
    lock, slots = LoopLock(owner), LoopSlots(1, owner)

    async def next_loop(stranded: list[object]) -> None:
        assert not lock.locked()
        with anyio.fail_after(LIMIT_S):  # a failsafe: they are free at once
            async with lock, slots:
                stranded.clear()
                gc.collect()  # the stranded holder is collected on this loop ...
                assert lock.locked()  # ... and gives back nothing of this loop's
        assert not lock.locked()

    with stranded(lambda: hold(lock, slots), closed=True) as holders:
        asyncio.run(next_loop(holders))
        asyncio.run(next_loop([]))


def test_a_loop_that_stopped_holding_a_lock_and_slots_has_them_when_it_runs_again() -> None:
    owner = OneLoop("the thing")
    lock, slots = LoopLock(owner), LoopSlots(1, owner)

    async def take() -> None:
        with anyio.fail_after(LIMIT_S):  # a failsafe: they are free at once
            async with lock, slots:
                pass

    async def locked() -> bool:
        return lock.locked()

    with stranded(lambda: hold(lock, slots)) as [holder]:
        asyncio.run(take())
        assert isinstance(holder, asyncio.Task)
        # Its holder still holds them there: they are its loop's, not a new loop's.
        assert holder.get_loop().run_until_complete(locked())
    # Its holder, cancelled on its loop as the block ended, gave them back there.
    asyncio.run(take())
