"""Running a batch of coroutines together, structured: all of them have ended when
:func:`run_together` returns, an error in one cancels the others, and cancelling the
caller cancels them all.

On asyncio this uses ``asyncio.TaskGroup``; elsewhere anyio's task group. Measured on
the benchmark machine, anyio's task group (4.16) costs about five times as much per
task as asyncio's own, because it wraps every task in its own cancel scope, event and
coroutine; with one spawn per model turn that alone was a third of a turn's overhead.
asyncio's group has the same structure: a cancelled caller (including by an anyio
cancel scope, which cancels the host task) cancels every child and waits for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Sequence
from typing import Any

import anyio
import sniffio

__all__ = ["run_together"]


async def run_together(
    inline: Awaitable[None] | None, others: Sequence[Coroutine[Any, Any, None]]
) -> None:
    """Await ``inline`` (if any) in this task and each of ``others`` in a task of its own.

    Coroutines, not functions that make them: they are made anyway, and a partial per
    task would live as long as the task (a worker's whole life, for the scheduler).
    """
    if not others:
        if inline is not None:
            await inline
        return
    if sniffio.current_async_library() == "asyncio":
        async with asyncio.TaskGroup() as group:
            for coro in others:
                group.create_task(coro)
            if inline is not None:
                await inline
        return
    async with anyio.create_task_group() as tg:
        for coro in others:
            tg.start_soon(_awaited, coro)
        if inline is not None:
            await inline


async def _awaited(coro: Coroutine[Any, Any, None]) -> None:
    await coro
