"""Honeycomb's structured concurrency, on asyncio.

- :func:`run_together`: a batch of coroutines; all have ended when it returns, an
  error in one cancels the others, and cancelling the caller cancels them all
  (``asyncio.TaskGroup``). One runs in the calling task itself (the serial lane of a
  turn's tool calls, or its last parallel call): a turn with T calls starts T-1 tasks.
  :func:`together` is the same, and returns what each of them returned.
- :func:`stoppable`: a block that code inside it can stop (a failure policy stopping
  a run's workers).
- :func:`shielded`: cleanup that must finish even if its task is cancelled meanwhile.
- :class:`within`: a time limit, Honeycomb's one way to bound how long something may
  take (see below).
- :func:`require_asyncio`: Honeycomb runs on asyncio (uvloop included); under another
  async library it fails at once with :class:`~runtime.errors.UnsupportedEventLoop`.
- :func:`usable_cpus`: the CPUs this process may run on.

Time limits. ``with within(seconds): await work`` cancels the block's task once the
time has passed and raises :class:`TimedOut` (a ``TimeoutError``); a ``TimedOut``
caught with ``contextlib.suppress`` makes a wait that gives up quietly;
``within(None)`` has no limit until :meth:`within.expire` ends it. Every time limit of
the library is one: a tool call's, an approval's, a worker's, a run's wall time, an MCP
server's start, a paced or polled wait, and :func:`stoppable`.

A block under a time limit registers its deadline (``loop.time() + limit``) and its
task. Calls with the same limit reach their deadlines in the order they started, so
each limit keeps its calls in a dict in start order, and one timer is armed at the
earliest deadline of all. When it fires, it cancels every task past its deadline and
arms itself for the next one. Starting and ending a call cost a dict insertion and a
deletion; no timer is made, armed or cancelled per call.

A cancelled block turns the cancellation into a timeout as ``asyncio.timeout`` does:
the task's cancellation is taken back (``Task.uncancel``) only when the block asked
for it, so a cancellation from anywhere else still propagates.
"""

from __future__ import annotations

import asyncio
import math
import os
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from runtime.errors import UnsupportedEventLoop

__all__ = [
    "TimedOut",
    "require_asyncio",
    "run_together",
    "shielded",
    "stoppable",
    "together",
    "usable_cpus",
    "within",
]

T = TypeVar("T")
U = TypeVar("U")


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


async def together(
    inline: Awaitable[T], others: Sequence[Coroutine[Any, Any, U]]
) -> tuple[T, list[U]]:
    """:func:`run_together`, and what they returned: ``inline``'s, and each of
    ``others``' in their order (their tasks are kept until all have ended, so it
    suits a small batch: a turn's tool calls, not a run's workers)."""
    if not others:
        return await inline, []
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(coro) for coro in others]
        value = await inline
    return value, [task.result() for task in tasks]


@asynccontextmanager
async def stoppable() -> AsyncIterator[Callable[[], None]]:
    """A block that code inside it can stop: calling the function it yields cancels
    the block (the task running it, and so every task of a task group in it), which
    then ends quietly. It is a time limit of none, which the function brings to now."""
    block = within(None)
    try:
        with block:
            yield block.expire  # stopping again is stopping
    except TimedOut:
        if not block.expired:
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


# --- time limits ---------------------------------------------------------------------


class TimedOut(TimeoutError):
    """A block ran past its time limit and was cancelled (or, a call that cannot be
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
                block.expire()
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
    small object alive, not a frame. With ``limit=None`` it has no limit until
    :meth:`expire` is called.

    Raises:
        TimedOut: when the limit passed (the call was cancelled, or ignored the
            cancellation and ended late: its result is dropped either way). Only the
            block's own limit raises it: a cancellation from elsewhere stays one.
    """

    # benchmark E: one per tool call running (A at N=10000 has 30,000), no instance dict
    __slots__ = ("_cancelling", "_expired", "_limit", "_table", "_task")

    def __init__(self, limit: float | None) -> None:
        self._limit = limit
        self._expired = False  # its deadline passed and cancelled its task
        self._task: asyncio.Task[Any] | None = None  # while the block runs

    @property
    def expired(self) -> bool:
        """Whether the block's own limit passed (and cancelled it)."""
        return self._expired

    def expire(self) -> None:
        """End the block now, as if its limit had passed (a block that has ended, or
        expired already, is left as it is)."""
        if self._task is None or self._expired:
            return
        if self._limit is not None:
            self._table.end(self._limit, self)
        self._expired = True
        self._task.cancel()

    def __enter__(self) -> None:
        task = asyncio.current_task()
        assert task is not None, "within() runs in a task"
        self._task, self._cancelling = task, task.cancelling()
        if self._limit is not None:
            loop = asyncio.get_running_loop()
            self._table = _table(loop)
            self._table.start(loop, self._limit, self)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _: Any) -> None:
        task, self._task = self._task, None
        assert task is not None
        if self._limit is not None:
            self._table.end(self._limit, self)
        if not self._expired:
            return  # in time: whatever happened is the call's own
        # The deadline passed and cancelled the call, which ended with ``exc`` (or
        # swallowed the cancellation and returned).
        if task.uncancel() > self._cancelling and kind is asyncio.CancelledError:
            return  # cancelled from elsewhere too: that wins
        raise TimedOut from None


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, where the system says it), at
    least one."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
