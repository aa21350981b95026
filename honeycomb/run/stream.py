"""``RunStream``: a run's events as an async iterator, then its result."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from runtime import Event, EventHandler
from runtime.concurrency import require_asyncio

if TYPE_CHECKING:
    from honeycomb.run.result import RunResult

__all__ = ["RunStream", "streamed"]


class RunStream:
    """Iterate to get every event of the run as it happens.

    When the events end, :attr:`result` holds the run's result; if the run raised, the
    iteration re-raises that error after the last event (``RunFinished``).

    The run gives it each event (:meth:`put`, an event handler) and says when it is
    done (:meth:`close`); events wait in a queue without bound until they are read.
    """

    def __init__(self) -> None:
        self.result: RunResult | None = None
        self.error: BaseException | None = None  # what the run raised
        self._queue: deque[Event] = deque()
        self._closed = False
        self._wake: asyncio.Future[None] | None = None  # set while the reader waits

    def put(self, event: Event) -> None:
        """Queue ``event`` for the reader (waking it, if it waits)."""
        self._queue.append(event)
        if self._wake is not None:
            self._woken()

    def close(self) -> None:
        """No more events: the iteration ends once the queued ones are read."""
        self._closed = True
        if self._wake is not None:
            self._woken()

    def _woken(self) -> None:
        wake, self._wake = self._wake, None
        if wake is not None and not wake.done():
            wake.set_result(None)

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events()

    async def _events(self) -> AsyncIterator[Event]:
        queue = self._queue
        while True:
            # The events already queued are taken at once; only an empty queue is
            # waited on (each wait is a turn of the event loop, per event).
            while queue:
                yield queue.popleft()
            if self._closed:
                break
            self._wake = asyncio.get_running_loop().create_future()
            await self._wake
        if self.error is not None:
            raise self.error


@asynccontextmanager
async def streamed(
    run: Callable[[EventHandler], Awaitable[RunResult]],
) -> AsyncIterator[RunStream]:
    """A block over ``run(handler)``, started in the background: the block gets the
    stream of the events given to ``handler``, then the run's result (or its error).
    Leaving the block early cancels the run; an error raised in the block is raised as
    itself.

    Raises:
        UnsupportedEventLoop: at once, under another async library than asyncio.
    """
    # Before the task group, whose own error would not say why (Session.stream, an
    # Executor's run streamed too, is reported as Executor.stream).
    require_asyncio("Executor.stream")
    stream = RunStream()

    async def produce() -> None:
        try:
            stream.result = await run(stream.put)
        except asyncio.CancelledError:
            raise  # the block left early: nobody reads on
        except BaseException as exc:
            # Whatever the run raised, as Executor.run raises it: a Honeycomb error, an
            # aggregator's or planner's own, a tool's KeyboardInterrupt; in the task
            # group it would leave the block as an ExceptionGroup after an iteration
            # that ended as if the run had.
            stream.error = exc
        finally:
            stream.close()

    body_error: Exception | None = None
    async with asyncio.TaskGroup() as group:
        running = group.create_task(produce())
        try:
            yield stream
        except Exception as exc:
            # Raised by the caller's block: re-raise it as itself, not wrapped in the
            # task group's ExceptionGroup.
            body_error = exc
        finally:
            running.cancel()  # the run has ended by now, unless the block left early
    if body_error is not None:
        raise body_error
