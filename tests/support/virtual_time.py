"""Virtual time: an event loop whose clock stands still while any task can run and,
once every task waits, jumps to the earliest deadline.

A pace judged by the wall clock judges the machine's load too: on a busy machine a
start wakes late, and a gap of 20 ms is 35. In virtual time a start paced 20 ms after
another is 20 ms after it, exactly, and a wait that should not happen is 0 s, not
"under 0.2 s".

Everything on the loop keeps its time: ``asyncio.sleep`` (and anyio's), timers,
``within`` and anyio's cancel scopes, tenacity's waits. Code that reads the time
itself is given the loop's (``AdaptiveLimiter(clock=now)``). Only the loop knows
when every task waits, which is why the clock is the loop's: its selector, asked to
wait for the next timer, moves the time to it instead. Sockets and pipes still wake
the loop, but a thread's work takes no virtual time: what runs in threads (a
rendezvous, a server) belongs on real time.
"""

from __future__ import annotations

import asyncio
import functools
import selectors
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec

P = ParamSpec("P")


class _Jumping(selectors.DefaultSelector):
    """A selector that does not wait for a timer: it moves the time to it (or, asked,
    first tells the tasks waiting for every other task to wait)."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.idle: list[asyncio.Future[None]] = []

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout == 0:  # a callback is ready: no task waits yet
            return super().select(0)
        ready = super().select(0)
        if ready:
            return ready
        if self.idle:  # every task waits: wake those that asked, time stands still
            idle, self.idle = self.idle, []
            for future in idle:
                if not future.done():
                    future.set_result(None)
            return []
        if timeout is None:
            return super().select(None)  # no timer at all: only I/O can wake the loop
        self.now += timeout
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An asyncio loop on virtual time, which starts at 0 (see the module's doc)."""

    def __init__(self) -> None:
        self._jumping = _Jumping()
        super().__init__(self._jumping)

    def time(self) -> float:
        return self._jumping.now

    async def all_waiting(self) -> None:
        """Return once every other task of the loop waits (for a timer, an event, I/O),
        without any time passing."""
        future: asyncio.Future[None] = self.create_future()
        self._jumping.idle.append(future)
        await future


def now() -> float:
    """The running loop's time: a clock to give what reads the time itself."""
    return asyncio.get_running_loop().time()


async def all_waiting() -> None:
    """Return once every other task waits, no time passing (see
    :meth:`VirtualTimeLoop.all_waiting`)."""
    loop = asyncio.get_running_loop()
    assert isinstance(loop, VirtualTimeLoop), "all_waiting() runs in virtual time"
    await loop.all_waiting()


def in_virtual_time(test: Callable[P, Coroutine[Any, Any, None]]) -> Callable[P, None]:
    """An async test run on a :class:`VirtualTimeLoop` of its own (a plain function to
    pytest, which still gives it its fixtures)."""

    @functools.wraps(test)
    def run(*args: P.args, **kwargs: P.kwargs) -> None:
        with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
            runner.run(test(*args, **kwargs))

    return run
