"""Running a batch of coroutines together, structured: all of them have ended when
:func:`run_together` returns, an error in one cancels the others, and cancelling the
caller cancels them all (``asyncio.TaskGroup``).

One coroutine runs in the calling task itself (the serial lane of a turn's tool
calls, or its last parallel call): a turn with T calls starts T-1 tasks, not T.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Sequence
from typing import Any

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
    async with asyncio.TaskGroup() as group:
        for coro in others:
            group.create_task(coro)
        if inline is not None:
            await inline
