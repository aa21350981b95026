"""Honeycomb's structured concurrency, on asyncio.

- :func:`run_together`: a batch of coroutines; all have ended when it returns, an
  error in one cancels the others, and cancelling the caller cancels them all
  (``asyncio.TaskGroup``). One runs in the calling task itself (the serial lane of a
  turn's tool calls, or its last parallel call): a turn with T calls starts T-1 tasks.
  :func:`together` is the same, and returns what each of them returned.
- :func:`stoppable`: a block that code inside it can stop (a failure policy stopping
  a run's workers).
- :func:`shielded`: cleanup that must finish even if its task is cancelled meanwhile.
- :class:`Bell`: tells whoever waits that something changed, each wait the next ring.
- :class:`within`: a time limit, Honeycomb's one way to bound how long something may
  take (see below).
- :func:`require_asyncio`: Honeycomb runs on asyncio (uvloop included); under another
  async library it fails at once with :class:`~runtime.errors.UnsupportedEventLoop`.
- :func:`usable_cpus`: the CPUs this process may run on.
- :func:`closed_with_loop`: what serves one event loop alone (a model's connection
  pool) closed in that loop as it shuts down.
- :class:`OneLoop`, :class:`PerLoop`, :class:`LoopLock`, :class:`LoopSlots`: what many
  calls share (an Executor's session locks, slots and locks of ``exclusive`` tools; a
  model's rate limiter) serves one event loop at a time (see below).

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

One event loop at a time. An asyncio lock, limiter or event belongs to the loop it was
first used in, and what its holders took on a loop that has ended is never given back.
So what calls of several runs share is a :class:`PerLoop` value: one for each loop
that uses it, the next loop taking over once the last is no longer running
(consecutive ``asyncio.run()`` calls, whatever the last left held), and a second loop
refused with :class:`~runtime.errors.EventLoopConflict` while the first still runs
(another thread's). The values of one Executor answer to one :class:`OneLoop`, so the
first of them a second loop touches refuses it. A use costs one look-up of the running
loop and an identity test.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import os
import threading
import weakref
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Sequence,
)
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Generic, TypeVar

import anyio

from runtime.errors import EventLoopConflict, UnsupportedEventLoop

__all__ = [
    "LoopLock",
    "LoopSlots",
    "OneLoop",
    "PerLoop",
    "TimedOut",
    "closed_with_loop",
    "innermost",
    "require_asyncio",
    "run_together",
    "shielded",
    "stoppable",
    "together",
    "usable_cpus",
    "waited",
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
    cancellation through: for cleanup that must finish (recording how a run ended).
    Work that fails raises its own error, however late the cancellation came: what
    could not be done is said."""
    inner = asyncio.ensure_future(work)
    cancelled: asyncio.CancelledError | None = None
    while not inner.done():
        try:
            await asyncio.wait((inner,))  # a cancellation of this task leaves it be
        except asyncio.CancelledError as exc:
            cancelled = exc  # the work goes on (or ended as it came): its outcome first
    value = inner.result()  # its own error, if it failed: what the cleanup tells
    if cancelled is not None:
        raise cancelled
    return value


class Bell:
    """Rung when something changed that others wait for (a decision recorded, an entry
    kept): each :meth:`next_ring` is set by the ring after it was taken, so a waiter
    that takes it before it looks (at a store, at a table) misses no change made
    meanwhile."""

    def __init__(self) -> None:
        self._next = asyncio.Event()  # replaced as it is set: each wait hears the next

    def ring(self) -> None:
        rung, self._next = self._next, asyncio.Event()
        rung.set()

    def next_ring(self) -> asyncio.Event:
        """Set by the next :meth:`ring`."""
        return self._next


def innermost(exc: BaseException) -> BaseException:
    """What was raised, out of the exception groups of the tasks it went through (a
    task group's, a parallel tool call's, a guard's): the first of each."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


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
        """Forget a block (whose deadline may have passed), and its limit once no block
        has it: a limit worked out per block (an approval's time left) is seldom met
        again, and a long-lived loop would keep each."""
        calls = self._calls.get(limit)
        if calls is not None:
            calls.pop(block, None)
            if not calls:
                del self._calls[limit]

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        armed = self._timer() if self._timer is not None else None
        if armed is not None:
            armed.cancel()
        self._armed_for = when
        # In a context of its own: a timer keeps the context it is made in until it
        # fires, and the block that armed it (a run's, whose context holds the run) may
        # end hours before its limit would have.
        timer = loop.call_at(when, self._fire, loop, context=_NO_CONTEXT)
        self._timer = weakref.ref(timer)

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer, self._armed_for = None, math.inf
        now, earliest = loop.time(), math.inf
        for calls in list(self._calls.values()):  # a limit left with no block goes
            while calls:
                block, when = next(iter(calls.items()))
                if when > now:
                    earliest = min(earliest, when)
                    break
                del calls[block]
                block.expire()
        if earliest < math.inf:
            self._arm(loop, earliest)


_NO_CONTEXT = contextvars.Context()
"""The context the timers of time limits run in (:meth:`_Deadlines._arm`): empty."""

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


async def waited(future: asyncio.Future[Any], limit: float) -> bool:
    """Wait for ``future`` at most ``limit`` seconds, and say whether it is done: a wait
    that gives up leaves it to whoever sets it (:class:`within` would cancel it)."""
    await asyncio.wait((future,), timeout=limit)
    return future.done()


# --- one event loop at a time ---------------------------------------------------------


class OneLoop:
    """The event loop that things shared by many calls serve, one loop at a time (see
    the module's docstring).

    Args:
        what: What serves the loop, as the error names it (``this Executor``).
    """

    __slots__ = ("_guard", "_loop", "what")

    def __init__(self, what: str) -> None:
        self.what = what
        self._loop: asyncio.AbstractEventLoop | None = None
        self._guard = threading.Lock()  # two threads' loops asking at once

    def adopt(self) -> asyncio.AbstractEventLoop:
        """Serve the running loop from now on, and return it.

        Raises:
            EventLoopConflict: while another loop it served still runs.
        """
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            with self._guard:
                _refuse_while_running(self.what, self._loop, loop)
                self._loop = loop
        return loop


def _refuse_while_running(
    what: str, served: asyncio.AbstractEventLoop | None, loop: asyncio.AbstractEventLoop
) -> None:
    """The rule: ``loop`` takes over from the loop ``served`` once that has stopped.

    Raises:
        EventLoopConflict: ``served`` is another loop, and still runs.
    """
    if served is not None and served is not loop and served.is_running():
        raise EventLoopConflict(what)


class PerLoop(Generic[T]):
    """``make()``'s value for the running event loop, made when a loop first asks for
    it (see the module's docstring). A loop keeps its value while it may run again (its
    holders may still give back what they took); a closed loop's goes at the next
    loop's first ask, with whatever its holders held.

    Args:
        make: Makes a loop's value.
        owner: The loop its owner serves (shared by the values of one Executor).
    """

    __slots__ = ("_make", "_owner", "_served", "_values")

    def __init__(self, make: Callable[[], T], owner: OneLoop) -> None:
        self._make, self._owner = make, owner
        self._served: tuple[asyncio.AbstractEventLoop, T] | None = None  # published whole
        self._values: dict[asyncio.AbstractEventLoop, T] = {}

    @property
    def last(self) -> T | None:
        """The value of the loop that asked last (None: none has asked)."""
        return self._served[1] if self._served is not None else None

    def get(self) -> T:
        """The running loop's value.

        Raises:
            EventLoopConflict: while another loop it served (or its owner did) still
                runs.
        """
        served = self._served
        if served is not None and served[0] is asyncio.get_running_loop():
            return served[1]
        loop = self._owner.adopt()  # two loops at once: one of them is refused here
        served = self._served
        if served is None or served[0] is not loop:
            # A loop paused, not closed, may run again while the owner serves another.
            _refuse_while_running(self._owner.what, served[0] if served else None, loop)
            for closed in [old for old in self._values if old.is_closed()]:
                del self._values[closed]
            value = self._values.get(loop)
            if value is None:
                value = self._values[loop] = self._make()
            served = self._served = (loop, value)
        return served[1]

    def here(self) -> T | None:
        """The running loop's value, without making one (None: it has none): for a
        holder giving back what its loop gave it."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a coroutine closed as it is collected, outside any loop
            return None
        served = self._served
        return served[1] if served is not None and served[0] is loop else self._values.get(loop)


def closed_with_loop(close: Callable[[], Awaitable[object]]) -> AsyncGenerator[None, None]:
    """Have the running event loop await ``close()`` as it shuts down, for what serves
    that loop alone (a model's connection pool): ``asyncio.run`` and an
    ``asyncio.Runner`` close the async generators still open before they close their
    loop, the last moment it can be closed there. Left to the garbage collector, it
    could not be: its loop is gone ('unclosed transport'). Keep what this returns for
    as long as what it closes (the loop holds it weakly): dropped earlier, it closes
    it then, in its loop.
    """

    async def until_the_loop_ends() -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            with contextlib.suppress(Exception):  # the loop ends: nothing is left to tell
                await close()

    held = until_the_loop_ends()
    # To its yield, now: its first step makes the running loop hold it (its hooks).
    with contextlib.suppress(StopIteration):
        held.asend(None).send(None)
    return held


def _to_give_back(values: PerLoop[T], kind: type[BaseException] | None) -> T | None:
    """What a holder leaving ``async with`` gives back: its loop's lock or slots. None
    when it is closed unfinished as it is collected (``GeneratorExit``): its loop is
    gone with what it held, and the loop running now, if any, is not the holder's."""
    return None if kind is GeneratorExit else values.here()


class LoopLock:
    """An ``asyncio.Lock`` (``async with lock``) of the running event loop (a
    :class:`PerLoop`): a loop that ended holding it does not hold the next loop's.

    Raises:
        EventLoopConflict: when held, or asked whether it is, from a second event loop
            while the one it serves still runs.
    """

    __slots__ = ("__weakref__", "_locks")  # a session id's, kept while its sessions live

    def __init__(self, owner: OneLoop) -> None:
        self._locks = PerLoop(asyncio.Lock, owner)

    def locked(self) -> bool:
        """Whether the running loop's lock is held."""
        return self._locks.get().locked()

    async def __aenter__(self) -> None:
        await self._locks.get().acquire()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        lock = _to_give_back(self._locks, kind)
        if lock is not None:
            lock.release()


class LoopSlots:
    """``capacity`` slots of the running event loop (``async with slots`` holds one, of
    an ``anyio.CapacityLimiter``; a :class:`PerLoop`): slots taken on a loop that
    ended are not taken on the next.

    Raises:
        EventLoopConflict: when held from a second event loop while the one they serve
            still runs.
    """

    __slots__ = ("_slots", "capacity")

    def __init__(self, capacity: int, owner: OneLoop) -> None:
        self.capacity = capacity
        self._slots = PerLoop(lambda: anyio.CapacityLimiter(capacity), owner)

    def __repr__(self) -> str:
        return f"LoopSlots({self.capacity})"

    async def __aenter__(self) -> bool:
        """Hold a slot: True when none was free, and it waited for one."""
        slots = self._slots.get()
        waits = slots.available_tokens < 1  # (a slot given back goes to the first waiter)
        await slots.acquire()
        return waits

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        slots = _to_give_back(self._slots, kind)
        if slots is not None:
            slots.release()


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, where the system says it), at
    least one."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
