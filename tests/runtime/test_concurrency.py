"""Honeycomb's concurrency on asyncio: time limits for many calls with one timer, a
stoppable block, shielded cleanup, a batch's values in order, and a clear error under
another async library."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import gc
import time
import weakref
from typing import Any

import pytest
import trio

from honeycomb import Executor, Role, tool
from honeycomb.testing import ScriptedModel
from runtime import (
    Dispatcher,
    DispatchPolicy,
    ToolCall,
    ToolRegistry,
    UnsupportedEventLoop,
    concurrency,
)
from runtime.concurrency import TimedOut, shielded, stoppable, together, within
from workers import AgentLoop

# The concurrency helpers and the executor hold on uvloop too (the `fast` extra).
pytestmark = pytest.mark.both_loops


async def test_a_call_past_its_limit_is_cancelled_and_timed_out() -> None:
    cancelled = asyncio.Event()

    async def slow() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "late"

    started = time.perf_counter()
    with pytest.raises(TimedOut), within(0.05):
        await slow()
    assert cancelled.is_set()
    assert time.perf_counter() - started < 2  # cancelled at its limit, not run to the end
    with within(1.0):
        assert await asyncio.sleep(0, "on time") == "on time"


async def test_a_cancellation_from_elsewhere_is_not_a_timeout() -> None:
    async def call() -> None:
        with within(10.0):
            await asyncio.sleep(10)

    task = asyncio.create_task(call())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_tools_own_timeout_error_is_its_own() -> None:
    async def raises() -> None:
        raise TimeoutError("the tool's own")

    with pytest.raises(TimeoutError, match="the tool's own"), within(10.0):
        await raises()


async def test_a_timeout_is_a_timeout_error_and_its_block_says_it_expired() -> None:
    block = within(0.01)
    with pytest.raises(TimeoutError), block:
        await asyncio.sleep(10)
    assert block.expired
    in_time = within(10.0)
    with in_time:
        await asyncio.sleep(0)
    assert not in_time.expired


async def test_nested_limits_each_time_out_their_own_block() -> None:
    outer, inner = within(0.05), within(10.0)
    with pytest.raises(TimedOut), outer, inner:
        await asyncio.sleep(10)
    assert (outer.expired, inner.expired) == (True, False)
    outer, inner = within(10.0), within(0.01)
    with outer:
        with pytest.raises(TimedOut), inner:
            await asyncio.sleep(10)
        assert await asyncio.sleep(0, "goes on") == "goes on"  # the outer block is not cancelled
    assert (outer.expired, inner.expired) == (False, True)


async def test_a_limit_of_each_block_s_own_is_forgotten_as_its_block_ends() -> None:
    """A limit worked out per block (an approval's time left, ``deadline - now``) is
    seldom met again: a long-lived event loop (a service's) keeps none of them once
    their blocks have ended, in time, past their limit, or cancelled."""
    table = concurrency._table(asyncio.get_running_loop())
    before = set(table._calls)
    for i in range(200):
        with within(3600.0 - i / 1000):
            await asyncio.sleep(0)
    with pytest.raises(TimedOut), within(0.01 + 1e-9):
        await asyncio.sleep(10)

    async def cancelled() -> None:
        with within(7.5 + 1e-9):
            await asyncio.sleep(10)

    task = asyncio.create_task(cancelled())
    await asyncio.sleep(0)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert set(table._calls) - before == set()


async def test_a_limit_in_a_task_that_swallowed_a_cancellation_still_times_out() -> None:
    """As ``asyncio.timeout``: a cancellation the task caught before the block is not
    one that wins over the block's own (cleanup code that goes on after a cancel)."""

    async def cleanup_after_a_cancel() -> str:
        with contextlib.suppress(asyncio.CancelledError):  # its count of cancels stays 1
            await asyncio.sleep(10)
        try:
            with within(0.01):
                await asyncio.sleep(10)
        except TimedOut:
            return "timed out"
        return "not cut off"

    task = asyncio.create_task(cleanup_after_a_cancel())
    await asyncio.sleep(0.01)
    task.cancel()
    assert await task == "timed out"


async def test_a_block_without_a_limit_ends_when_expired_and_not_after() -> None:
    block = within(None)
    asyncio.get_running_loop().call_later(0.01, block.expire)
    with pytest.raises(TimedOut), block:
        await asyncio.sleep(10)
    assert block.expired
    after = within(None)
    with after:
        await asyncio.sleep(0)
    after.expire()  # the block has ended: nothing is cancelled
    assert await asyncio.sleep(0.01, "still running") == "still running"
    assert not after.expired


async def test_many_calls_under_a_limit_arm_one_timer_not_one_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = asyncio.get_running_loop()
    armed: list[float] = []
    call_at = loop.call_at

    def counting(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        if getattr(callback, "__name__", "") == "_fire":  # the deadlines' timer, not a sleep's
            armed.append(when)
        return call_at(when, callback, *args, **kwargs)

    monkeypatch.setattr(loop, "call_at", counting)

    async def call(seconds: float) -> None:
        with within(60.0):
            await asyncio.sleep(seconds)

    for _ in range(500):
        await call(0)
    await asyncio.gather(*(call(0.001) for _ in range(200)))
    assert len(armed) <= 2  # the first deadline; later ones come after it


async def test_dispatching_many_calls_under_the_default_limit_arms_one_timer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The default time limit (60 s) is on for every call: its cost must not grow with
    the calls (one timer each would be armed and cancelled for every call)."""
    loop = asyncio.get_running_loop()
    armed: list[float] = []
    call_at = loop.call_at

    def counting(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        armed.append(when)
        return call_at(when, callback, *args, **kwargs)

    @tool
    async def lookup(key: str) -> str:
        return key

    dispatcher = Dispatcher(ToolRegistry([lookup]))
    assert dispatcher.policy.default_timeout == 60.0
    monkeypatch.setattr(loop, "call_at", counting)
    for turn in range(100):
        calls = [ToolCall(id=f"{turn}-{i}", name="lookup", arguments=f'{{"key": "{i}"}}')
                 for i in range(3)]  # fmt: skip
        observations = await dispatcher.dispatch(calls, turn=turn)
        assert [o.status for o in observations] == ["ok"] * 3
    assert len(armed) <= 2


async def test_calls_with_different_limits_each_time_out_at_their_own() -> None:
    started = time.perf_counter()
    ends: dict[float, float] = {}

    async def timed(limit: float) -> None:
        try:
            with within(limit):
                await asyncio.sleep(10)
        except TimedOut:
            ends[limit] = time.perf_counter() - started

    await asyncio.gather(timed(1.0), timed(0.05), timed(0.15))
    assert sorted(ends, key=ends.__getitem__) == [0.05, 0.15, 1.0]
    assert all(ends[limit] >= limit * 0.9 for limit in ends)  # none before its own
    # The short ones did not wait for the long one: a loaded machine has most of a
    # second to spare.
    assert ends[0.15] < 1.0


async def test_a_dispatched_call_past_its_limit_is_a_timeout_observation() -> None:
    @tool(timeout=0.05)
    async def slow() -> str:
        await asyncio.sleep(10)
        return "never"

    @tool
    async def quick() -> str:
        return "done"

    dispatcher = Dispatcher(ToolRegistry([slow, quick]), policy=DispatchPolicy())
    calls = [ToolCall(id="a", name="slow"), ToolCall(id="b", name="quick")]
    first, second = await dispatcher.dispatch(calls)
    assert (first.status, second.status) == ("timeout", "ok")


async def test_a_stoppable_block_ends_quietly_when_stopped_from_inside() -> None:
    finished: list[str] = []

    async def worker(name: str, stop: Any) -> None:
        if name == "stopper":
            stop()
            stop()  # twice, as two failures might
        await asyncio.sleep(10)
        finished.append(name)

    async with stoppable() as stop, asyncio.TaskGroup() as group:
        for name in ("a", "b", "stopper"):
            group.create_task(worker(name, stop))
    assert finished == []


async def test_a_timeout_error_inside_a_stoppable_block_stays_itself() -> None:
    with pytest.raises(TimeoutError, match="its own"):
        async with stoppable():
            raise TimeoutError("its own")


async def test_shielded_cleanup_finishes_though_its_task_is_cancelled() -> None:
    done: list[str] = []

    async def cleanup() -> None:
        await asyncio.sleep(0.05)
        done.append("recorded")

    async def run() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            await shielded(cleanup())
            raise

    task = asyncio.create_task(run())
    await asyncio.sleep(0.01)
    task.cancel()
    await asyncio.sleep(0.01)
    task.cancel()  # a second cancellation, while it cleans up
    with pytest.raises(asyncio.CancelledError):
        await task
    assert done == ["recorded"]


async def test_shielded_work_that_fails_as_a_cancellation_comes_raises_its_own_error() -> None:
    """The work ends with its error in the same pass of the loop as a cancellation
    reaches the task waiting for it: the error is what the cleanup tells (a run that
    could not record its interruption says why). It was the cancellation, the error
    lost."""
    ready = asyncio.Event()

    async def record() -> None:
        await ready.wait()
        raise OSError("the store is away")

    waiting = asyncio.create_task(shielded(record()))
    await asyncio.sleep(0)  # it waits for the work now
    ready.set()  # the work fails in the next pass ...
    waiting.cancel()  # ... as the cancellation wakes the task waiting for it
    with pytest.raises(OSError, match="the store is away"):
        await waiting


async def test_together_runs_a_batch_at_once_and_gives_its_values_in_order() -> None:
    started: list[int] = []
    all_started = asyncio.Event()

    async def value(i: int) -> int:
        started.append(i)
        if len(started) == 4:
            all_started.set()
        await all_started.wait()  # ends only once every one of them has started
        return i * 10

    assert await together(value(0), [value(1), value(2), value(3)]) == (0, [10, 20, 30])
    assert await together(value(5), []) == (50, [])


async def test_together_cancels_the_batch_when_one_fails() -> None:
    cancelled = asyncio.Event()

    async def waits() -> int:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return 0

    async def fails() -> int:
        await asyncio.sleep(0)
        raise ValueError("broken")

    with pytest.raises(ExceptionGroup):
        await together(waits(), [fails()])
    assert cancelled.is_set()


def test_under_another_async_library_it_fails_at_once_and_says_why() -> None:
    executor = Executor([Role(name="w")], ScriptedModel(["x"]), aggregator="concat")
    loop = AgentLoop(ScriptedModel(["x"]), Dispatcher(ToolRegistry()))
    for call in (
        lambda: executor.run("t", subtasks=[("w", "do")]),
        lambda: loop.run("t"),
        lambda: Dispatcher(ToolRegistry()).dispatch([]),
    ):
        with pytest.raises(UnsupportedEventLoop, match="runs on asyncio"):
            trio.run(call)


def test_a_limits_timer_keeps_nothing_of_the_block_that_armed_it() -> None:
    """The one timer of a loop's limits was made in the context of the block that armed
    it, and kept that context until it fired: a run's (whose context variables hold the
    run) stayed in memory for as long as its longest limit, an approval's hours, after
    the run had ended; a store it held kept its writer thread."""
    held: contextvars.ContextVar[object] = contextvars.ContextVar("held")

    class Run:
        pass

    kept: list[weakref.ref[Run]] = []

    async def block() -> None:
        run = Run()
        held.set(run)
        kept.append(weakref.ref(run))
        with within(3600.0):  # the loop's first limit: it arms the timer
            await asyncio.sleep(0)

    async def main() -> None:
        await asyncio.create_task(block())  # a task: a context of its own
        for _ in range(3):  # the loop's own handles of the task's end, run and gone
            await asyncio.sleep(0)
        gc.collect()
        assert kept[0]() is None

    asyncio.run(main())  # a loop of its own, which no limit has armed yet


def test_an_event_loops_deadlines_go_with_it() -> None:
    async def call() -> None:
        with within(60.0):
            await asyncio.sleep(0)

    gc.collect()
    before = len(concurrency._TABLES)
    for _ in range(3):
        asyncio.run(call())
    gc.collect()
    assert len(concurrency._TABLES) <= before  # a table does not keep its loop alive
