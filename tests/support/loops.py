"""Event loops besides the test's own: one that runs in another thread while the test
goes on (two loops at once), and one closed with work still holding what it took (a
loop gone, whose holders never give back)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")

LIMIT_S = 30.0
"""How long the test waits for the other thread: far past any load, short of a hang."""


class LoopInThread:
    """An event loop running in a thread of its own for as long as the ``with`` block
    lasts, idle between the coroutines given to it: a second loop that runs at once
    with the test's."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> LoopInThread:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(LIMIT_S)
        assert not self._thread.is_alive(), "the other thread's loop did not stop"
        self.loop.close()

    def start(self, work: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``work`` on the loop; its result is the future's."""
        return asyncio.run_coroutine_threadsafe(work, self.loop)

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the loop, and wait for its result."""
        return self.start(work).result(LIMIT_S)

    def call(self, function: Callable[[], object]) -> None:
        """Call ``function`` on the loop (to set one of its events)."""
        self.loop.call_soon_threadsafe(function)


@contextmanager
def stranded(
    *holding: Callable[[], Awaitable[object]], closed: bool = False
) -> Iterator[list[object]]:
    """Await each of ``holding`` in a new event loop, which then stops with the tasks
    they started still pending: what those hold is held by a loop that no longer runs.
    At the end of the block the loop runs again to cancel them, so that they give back
    what they took on it, and is closed; or, ``closed``, it is closed at once, the tasks
    never cancelled: what they hold is held by a loop that is gone.

    Each one starts its holder (``loop.create_task``) and returns once it holds; the
    block is given what they returned (the tasks), which keeps the holders alive: with
    ``closed``, the test drops it when they are to be collected.
    """
    ended = asyncio.new_event_loop()
    # Tasks destroyed pending, when collected: what asyncio says of them is expected.
    ended.set_exception_handler(lambda _loop, _context: None)

    async def start_all() -> list[object]:
        return [await start() for start in holding]

    kept = ended.run_until_complete(start_all())
    if closed:
        ended.close()
        yield kept
        return
    try:
        yield kept
    finally:
        ended.run_until_complete(_cancel_all())
        ended.close()


async def _cancel_all() -> None:
    here = asyncio.current_task()
    pending = [task for task in asyncio.all_tasks() if task is not here]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


async def hold(*held: contextlib.AbstractAsyncContextManager[object]) -> asyncio.Task[None]:
    """Start a task that holds each of ``held`` until it is cancelled; return it once it
    holds them."""
    holding = asyncio.Event()

    async def holder() -> None:
        async with contextlib.AsyncExitStack() as stack:
            for each in held:
                await stack.enter_async_context(each)
            holding.set()
            await asyncio.Event().wait()

    task = asyncio.get_running_loop().create_task(holder())
    await holding.wait()
    return task
