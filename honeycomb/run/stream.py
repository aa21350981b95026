"""``RunStream``: a run's events as an async iterator, then its result."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, NoReturn

from honeycomb.run.events import RunFinished, RunStarted
from runtime import Event, EventHandler
from runtime.concurrency import require_asyncio
from runtime.errors import StreamBusy

if TYPE_CHECKING:
    from honeycomb.run.result import RunResult

__all__ = ["RunStream", "streamed"]


class RunStream:
    """Iterate to get every event of the run as it happens.

    When the events end, :attr:`result` holds the run's result; if the run raised, the
    iteration raises that error after the last event (``RunFinished``), once, as an
    async generator does: asked again, it ends. :attr:`error` keeps it.

    It reads as an :class:`asyncio.Queue` does: a wait for the next event that is
    cancelled (``asyncio.timeout``, ``asyncio.wait_for``) takes nothing, and the next
    ``anext`` gets that event. It has one reader at a time: a task that asks for the
    next event while another waits for one gets :class:`~runtime.errors.StreamBusy`.

    The run gives it each event (it is the run's event handler, which a tracer asks
    once a kind what takes those events: :meth:`handler_for`) and says when it is done
    (:meth:`close`); events wait in a queue without bound until they are read.
    """

    def __init__(self) -> None:
        self.result: RunResult | None = None
        self.error: BaseException | None = None  # what the run raised
        self._error_raised = False
        self._queue: deque[Event] = deque()
        self._closed = False
        self._run_id: str | None = None  # the run's own (not a sub-run's), as it starts
        self._last: Event | None = None  # that run's RunFinished, once it is queued
        # The reader has read the run's RunFinished: the run only records its end now,
        # unless another event comes (a new life, for a call decided as it ended).
        self._ended = False
        self.on_more: Callable[[], object] | None = None  # called by an event after the end
        # Set while a reader is in ``__anext__`` waiting, until that reader resumes:
        # whoever else asks meanwhile is a second reader.
        self._wake: asyncio.Future[None] | None = None

    def __call__(self, event: Event) -> None:
        """Queue ``event`` for the reader (waking it, if it waits)."""
        self.handler_for(event.kind)(event)

    def handler_for(self, kind: str) -> Callable[[Any], None]:
        """What takes the events of ``kind``: a run's start and end are looked at, each
        piece of its text only queued (benchmark J: they are most of its events)."""
        if kind == RunStarted.kind:
            return self._started
        if kind == RunFinished.kind:
            return self._finished
        return self.put

    def put(self, event: Event) -> None:
        """Queue ``event`` for the reader (waking it, if it waits)."""
        if self._ended:  # an event after the end the reader saw
            self._ended = False
            if self.on_more is not None and self._goes_on(event):
                self.on_more()
        self._queue.append(event)
        self._woken()

    def _goes_on(self, event: Event) -> bool:
        """Whether ``event`` is of the run whose end the reader saw, going on (a new
        life, for a call decided as it ended); not of a run that follows it (a
        session's message, answered after the turn it resumed first), which is the
        block's own, and which a reader that left at that end does not stop."""
        last = self._last
        return last is None or event.run_id is None or event.run_id == last.run_id

    def _started(self, event: RunStarted) -> None:
        if event.caller is None:
            # The run's own; a session's message may be answered after the turn it
            # resumes first, a run of its own.
            self._run_id = event.run_id
        self.put(event)

    def _finished(self, event: RunFinished) -> None:
        if event.run_id == self._run_id:
            self._last = event
        self.put(event)

    @property
    def ended(self) -> bool:
        """Whether the last event read is the run's ``RunFinished``, with none of that
        run after it: the run has ended, and only records its end (or a run follows
        it, a session's message)."""
        return self._ended and not any(self._goes_on(event) for event in self._queue)

    def close(self) -> None:
        """No more events: the iteration ends once the queued ones are read."""
        self._closed = True
        self._woken()

    def _woken(self) -> None:
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    def __aiter__(self) -> RunStream:
        return self

    async def __anext__(self) -> Event:
        """The next event: at once if one is queued, else once the run sends one.

        Raises:
            StopAsyncIteration: after the last event, when the run returned.
            BaseException: after the last event, what the run raised (once; after it,
                StopAsyncIteration).
            StreamBusy: when another task is waiting for the next event.
        """
        if self._wake is not None:
            raise StreamBusy()
        # No generator: a cancelled wait (a reader's timeout) leaves the stream as it
        # was, where a generator would be closed by it, ending the iteration for good.
        while not self._queue:
            if self._closed:
                # Raised once: raised again, the one error would pile up a traceback
                # per ask, and a reader that went on would never see the end.
                if self.error is not None and not self._error_raised:
                    self._error_raised = True
                    raise self.error
                raise StopAsyncIteration
            wake = self._wake = asyncio.get_running_loop().create_future()
            try:
                await wake
            finally:
                self._wake = None
        event = self._queue.popleft()
        self._ended = event is self._last  # read on past it: a run that follows it
        return event


def streamed(run: Callable[[EventHandler], Awaitable[RunResult]]) -> StreamBlock:
    """A block over ``run(handler)``, started in the background as the block is
    entered: the block gets the stream of the events given to ``handler``, then the
    run's result (or its error). Leaving the block before the run's ``RunFinished`` was
    read cancels the run (left there, it ends as it would have); an error
    raised in the block is raised as itself."""
    return StreamBlock(run)


class StreamBlock(AbstractAsyncContextManager[RunStream]):
    """What ``Executor.stream`` and ``Session.stream`` return: a block to enter with
    ``async with``, whose value is the :class:`RunStream`. Iterating it without the
    block raises a TypeError that says how to."""

    def __init__(self, run: Callable[[EventHandler], Awaitable[RunResult]]) -> None:
        self._run = run
        self._block: AbstractAsyncContextManager[RunStream] | None = None

    async def __aenter__(self) -> RunStream:
        """Start the run.

        Raises:
            RuntimeError: when this block is entered already (in another task): each
                ``stream(...)`` is one block at a time, as an async generator is.
        """
        if self._block is not None:
            raise RuntimeError(
                "this stream(...) block is entered already, and runs its run: call "
                "stream(...) again for a block of its own (another run), or read the "
                "events of this one inside its block"
            )
        self._block = _run_in_block(self._run)
        try:
            return await self._block.__aenter__()
        except BaseException:
            self._block = None
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        block, self._block = self._block, None
        assert block is not None  # entered
        return await block.__aexit__(exc_type, exc, traceback)

    def __aiter__(self) -> NoReturn:
        raise TypeError(
            "stream(...) gives a block, not the events: read them inside it, as "
            "`async with executor.stream(task) as events: async for event in events: ...` "
            "(the block cancels the run if it is left early)"
        )


@asynccontextmanager
async def _run_in_block(
    run: Callable[[EventHandler], Awaitable[RunResult]],
) -> AsyncIterator[RunStream]:
    """:func:`streamed`'s block: the run in a task group beside it.

    Raises:
        UnsupportedEventLoop: at once, under another async library than asyncio.
    """
    # Before the task group, whose own error would not say why (Session.stream, an
    # Executor's run streamed too, is reported as Executor.stream).
    require_asyncio("Executor.stream")
    stream = RunStream()
    stopping: list[str] = []  # what the run's stop could not do (record its end)

    async def produce() -> None:
        try:
            stream.result = await run(stream)
        except asyncio.CancelledError as exc:
            stopping.extend(getattr(exc, "__notes__", ()))
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
    try:
        async with asyncio.TaskGroup() as group:
            running = group.create_task(produce())
            try:
                yield stream
            except Exception as exc:
                # Raised by the caller's block: re-raise it as itself, not wrapped in the
                # task group's ExceptionGroup.
                body_error = exc
            finally:
                if stream.ended:
                    # Left at the run's last event: the run is recording its end (its
                    # store row, its lease, a session's turn), which it finishes, and its
                    # result is kept; unless it goes on, in a new life (a call decided as
                    # it ended).
                    stream.on_more = running.cancel
                else:
                    running.cancel()  # the run has ended by now, unless the block left early
    except asyncio.CancelledError as exc:
        # The block's own cancellation says what the run's said, as run() raises it: a
        # run stopped with the block whose store could not record it as interrupted.
        for note in stopping:
            exc.add_note(note)
        raise
    if body_error is not None:
        raise body_error
