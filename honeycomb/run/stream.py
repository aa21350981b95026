"""``RunStream``: a run's events as an async iterator, then its result."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

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
        async with self._receive:
            async for event in self._receive:
                yield event
        if self.error is not None:
            raise self.error
