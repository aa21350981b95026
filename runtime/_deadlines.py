"""Time limits for many tool calls at once, with one timer per event loop.

A call under a time limit registers its deadline (``loop.time() + limit``) and its
task. Calls with the same limit reach their deadlines in the order they started, so
each limit keeps its calls in a dict in start order, and one timer is armed at the
earliest deadline of all. When it fires, it cancels every task past its deadline and
arms itself for the next one. Starting and ending a call cost a dict insertion and a
deletion; no timer is made, armed or cancelled per call.

A cancelled call turns the cancellation into a timeout as ``asyncio.timeout`` does:
the task's cancellation is taken back (``Task.uncancel``) only when this table asked
for it, so a cancellation from anywhere else still propagates.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import weakref
from collections.abc import Awaitable
from typing import Any, TypeVar

__all__ = ["TimedOut", "within"]

T = TypeVar("T")


class TimedOut(Exception):
    """A call ran past its time limit and was cancelled (or, a call that cannot be
    interrupted, was waited for to its end past it)."""


class _Deadlines:
    """The calls under a time limit on one event loop, and the one timer."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._calls: dict[float, dict[int, tuple[float, asyncio.Task[Any]]]] = {}
        self._keys = itertools.count()
        self._expired: set[int] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._armed_for = math.inf

    def start(self, limit: float, task: asyncio.Task[Any]) -> int:
        when = self._loop.time() + limit
        key = next(self._keys)
        self._calls.setdefault(limit, {})[key] = (when, task)
        if when < self._armed_for:
            self._arm(when)
        return key

    def end(self, limit: float, key: int) -> bool:
        """Forget a call; True when its deadline passed (its task was cancelled)."""
        self._calls[limit].pop(key, None)
        if key in self._expired:
            self._expired.discard(key)
            return True
        return False

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._armed_for = when
        self._timer = self._loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._timer, self._armed_for = None, math.inf
        now, earliest = self._loop.time(), math.inf
        for calls in self._calls.values():
            while calls:
                key, (when, task) = next(iter(calls.items()))
                if when > now:
                    earliest = min(earliest, when)
                    break
                del calls[key]
                self._expired.add(key)
                task.cancel()
        if earliest < math.inf:
            self._arm(earliest)


_TABLES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Deadlines] = (
    weakref.WeakKeyDictionary()
)


async def within(limit: float, running: Awaitable[T]) -> T:
    """``await running``, cancelled once ``limit`` seconds have passed.

    Raises:
        TimedOut: when the limit passed (the call was cancelled, or ignored the
            cancellation and ended late: its result is dropped either way).
    """
    loop = asyncio.get_running_loop()
    table = _TABLES.get(loop)
    if table is None:
        table = _TABLES[loop] = _Deadlines(loop)
    task = asyncio.current_task()
    assert task is not None, "within() runs in a task"
    key = table.start(limit, task)
    try:
        value = await running
    except BaseException as exc:
        if not table.end(limit, key):
            raise
        # The deadline passed and cancelled the call, which ended with this.
        if task.uncancel() > 0 and isinstance(exc, asyncio.CancelledError):
            raise  # cancelled from elsewhere too: that wins
        raise TimedOut from None
    if table.end(limit, key):  # it swallowed the cancellation and returned: too late
        task.uncancel()
        raise TimedOut
    return value
