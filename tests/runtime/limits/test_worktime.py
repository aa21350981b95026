"""A time limit that leaves out the waits for a person: only while nothing else of the
work goes on."""

from __future__ import annotations

import asyncio

import pytest

from runtime.concurrency import TimedOut
from runtime.limits.worktime import asking_a_person, nested_strand, within_own_time


async def test_a_nested_workers_wait_stops_the_clock_only_once_nothing_else_works() -> None:
    """One nested strand waits for a person while another works 0.3s: the clock
    stopped as the wait began, so the work ran past its limit of 0.1s uncut."""
    answered = asyncio.Event()

    async def asks() -> None:
        with nested_strand(), asking_a_person():
            await answered.wait()

    async def works() -> None:
        with nested_strand():
            await asyncio.sleep(0.3)  # its work, beside the wait
        answered.set()

    async def both() -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(asks())
            group.create_task(works())

    with pytest.raises(TimedOut), within_own_time(0.1):
        await both()


async def test_a_wait_with_nothing_else_working_is_not_counted() -> None:
    answered = asyncio.Event()

    async def asks() -> None:
        with nested_strand(), asking_a_person():
            await asyncio.sleep(0.3)  # the person's time
        answered.set()

    with within_own_time(0.2) as deadline:
        async with asyncio.TaskGroup() as group:
            group.create_task(asks())
            group.create_task(asks())
    assert answered.is_set()
    assert not deadline.expired
