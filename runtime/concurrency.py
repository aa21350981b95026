"""Honeycomb's structured concurrency, on asyncio.

- :func:`run_together`: a batch of coroutines; all have ended when it returns, an
  error in one cancels the others, and cancelling the caller cancels them all
  (``asyncio.TaskGroup``). One runs in the calling task itself (the serial lane of a
  turn's tool calls, or its last parallel call): a turn with T calls starts T-1 tasks.
- :func:`stoppable`: a block that code inside it can stop (a failure policy stopping
  a run's workers).
- :func:`shielded`: cleanup that must finish even if its task is cancelled meanwhile.
- :func:`require_asyncio`: Honeycomb runs on asyncio (uvloop included); under another
  async library it fails at once with :class:`~runtime.errors.UnsupportedEventLoop`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from runtime.errors import UnsupportedEventLoop

__all__ = ["require_asyncio", "run_together", "shielded", "stoppable"]

T = TypeVar("T")


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


@asynccontextmanager
async def stoppable() -> AsyncIterator[Callable[[], None]]:
    """A block that code inside it can stop: calling the function it yields cancels
    the block (the task running it, and so every task of a task group in it), which
    then ends quietly. ``asyncio.timeout``, rescheduled to now, is the cancel scope."""
    loop = asyncio.get_running_loop()
    scope = asyncio.timeout(None)

    def stop() -> None:
        if not scope.expired():  # stopping again is stopping
            scope.reschedule(loop.time())

    try:
        async with scope:
            yield stop
    except TimeoutError:
        if not scope.expired():
            raise  # raised inside the block: not the stop


async def shielded(work: Awaitable[T]) -> T:
    """``await work`` to its end even if this task is cancelled meanwhile, then let the
    cancellation through: for cleanup that must finish (recording how a run ended)."""
    inner = asyncio.ensure_future(work)
    cancelled: asyncio.CancelledError | None = None
    while True:
        try:
            value = await asyncio.shield(inner)
        except asyncio.CancelledError as exc:
            if inner.done():
                raise
            cancelled = exc  # the work goes on; wait for it again
            continue
        if cancelled is not None:
            raise cancelled
        return value


def require_asyncio(what: str) -> None:
    """Fail at once, and clearly, when not running on asyncio.

    Raises:
        UnsupportedEventLoop: under another async library (trio, curio ...).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise UnsupportedEventLoop(what) from None
