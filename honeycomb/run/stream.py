"""``RunStream``: a run's events as an async iterator, then its result."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import anyio

from runtime import Event, HoneycombError

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream

    from honeycomb.run.result import RunResult

__all__ = ["RunStream"]


class RunStream:
    """Iterate to get every event of the run as it happens.

    When the events end, :attr:`result` holds the run's result; if the run raised, the
    iteration re-raises that error after the last event (``RunFinished``).
    """

    def __init__(self, receive: MemoryObjectReceiveStream[Event]) -> None:
        self._receive = receive
        self.result: RunResult | None = None
        self.error: HoneycombError | None = None

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events()

    async def _events(self) -> AsyncIterator[Event]:
        receive = self._receive
        async with receive:
            while True:
                # The events already sent are taken at once; only an empty stream is
                # waited on (each wait is a turn of the event loop, per event).
                try:
                    event = receive.receive_nowait()
                except anyio.WouldBlock:
                    try:
                        event = await receive.receive()
                    except anyio.EndOfStream:
                        break
                except anyio.EndOfStream:
                    break
                yield event
        if self.error is not None:
            raise self.error
