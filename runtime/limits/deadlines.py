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
import math
import weakref
from typing import Any

__all__ = ["TimedOut", "within"]


class TimedOut(Exception):
    """A call ran past its time limit and was cancelled (or, a call that cannot be
    interrupted, was waited for to its end past it)."""


class _Deadlines:
    """The calls under a time limit on one event loop, and the one timer."""

    def __init__(self) -> None:
        # Per limit, each running block and its deadline: the block is the key, and
        # holds its task (no key or tuple is made per call).
        self._calls: dict[float, dict[within, float]] = {}
        # Weakly: the loop holds its timer while it is due, and a timer holds its loop.
        self._timer: weakref.ref[asyncio.TimerHandle] | None = None
        self._armed_for = math.inf

    def start(self, loop: asyncio.AbstractEventLoop, limit: float, block: within) -> None:
        when = loop.time() + limit
        self._calls.setdefault(limit, {})[block] = when
        if when < self._armed_for:
            self._arm(loop, when)

    def end(self, limit: float, block: within) -> None:
        """Forget a block (whose deadline may have passed)."""
        self._calls[limit].pop(block, None)

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        armed = self._timer() if self._timer is not None else None
        if armed is not None:
            armed.cancel()
        self._armed_for = when
        self._timer = weakref.ref(loop.call_at(when, self._fire, loop))

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer, self._armed_for = None, math.inf
        now, earliest = loop.time(), math.inf
        for calls in self._calls.values():
            while calls:
                block, when = next(iter(calls.items()))
                if when > now:
                    earliest = min(earliest, when)
                    break
                del calls[block]
                block._expired = True
                block._task.cancel()
        if earliest < math.inf:
            self._arm(loop, earliest)


_TABLES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Deadlines] = (
    weakref.WeakKeyDictionary()
)
"""Each event loop's table (a table does not refer to its loop: the loop's entry goes
with it)."""

_last: tuple[weakref.ref[asyncio.AbstractEventLoop], _Deadlines] | None = None
"""The table last used, and its loop: almost every look-up is for the same loop, and a
weak mapping's look-up costs far more than this."""


def _table(loop: asyncio.AbstractEventLoop) -> _Deadlines:
    global _last
    last = _last
    if last is not None and last[0]() is loop:
        return last[1]
    table = _TABLES.get(loop)
    if table is None:
        table = _TABLES[loop] = _Deadlines()
    _last = (weakref.ref(loop), table)
    return table


class within:  # used as a function would be: ``with within(5): ...``
    """A block cancelled once ``limit`` seconds have passed: ``with within(limit):
    await call``. A context manager, not a coroutine: a call waiting under it keeps one
    small object alive, not a frame.

    Raises:
        TimedOut: when the limit passed (the call was cancelled, or ignored the
            cancellation and ended late: its result is dropped either way).
    """

    __slots__ = ("_expired", "_limit", "_table", "_task")  # one is alive per running call

    def __init__(self, limit: float) -> None:
        self._limit = limit
        self._expired = False  # its deadline passed and cancelled its task

    def __enter__(self) -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None, "within() runs in a task"
        self._table, self._task = _table(loop), task
        self._table.start(loop, self._limit, self)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _: Any) -> None:
        self._table.end(self._limit, self)
        if not self._expired:
            return  # in time: whatever happened is the call's own
        # The deadline passed and cancelled the call, which ended with ``exc`` (or
        # swallowed the cancellation and returned).
        if self._task.uncancel() > 0 and kind is asyncio.CancelledError:
            return  # cancelled from elsewhere too: that wins
        raise TimedOut from None
