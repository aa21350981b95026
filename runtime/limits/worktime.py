"""A time limit on work that does not count the time it waits for a person.

A worker's time limit (a policy's ``worker_timeout_s``) bounds what the worker does,
not how long a person takes to decide on one of its calls: an approver that asks on a
terminal, a chat or a web page waits as long as the person needs, up to the call's
own ``approval_timeout_s``. A worker paused for a decision in the run store waits
outside its limit; one whose approver decides in the run waits inside it, and this
module stops its clock meanwhile.

:func:`within_own_time` is the limit (:class:`OwnTime`, one for work done in
stretches); :func:`asking_a_person` marks a wait for a
person (the approval gate's call of an approver), and :func:`waiting_for_room` a wait
for somewhere to run the work (a Ray actor to start, or one with room for a worker):
the work has not begun, as a subtask waiting for one of the run's ``max_workers`` has
not. A wait inside nested work (a nested worker, a sub-run with limits of its own)
stops the clocks of all the work it is part of. The clocks are found through a context
variable, which the tasks the work starts (its tool calls, its nested workers) inherit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar

from runtime.concurrency import within

__all__ = ["OwnTime", "asking_a_person", "waiting_for_room", "within_own_time"]


class _Clock:
    """The time one piece of work has waited for people, and the clocks of the work
    it is part of."""

    __slots__ = ("asking", "parent", "since", "waited_s", "woken")

    def __init__(self, parent: _Clock | None) -> None:
        self.parent = parent
        self.asking = 0  # waits for a person under way (parallel calls may each wait)
        self.since = 0.0  # when the first of them started
        self.waited_s = 0.0  # the waits that ended, added up
        self.woken: Callable[[], None] | None = None  # the limit's check, once they end


_clock: ContextVar[_Clock | None] = ContextVar("honeycomb_work_clock", default=None)


@contextmanager
def asking_a_person() -> Iterator[None]:
    """The block waits for a person: the time limits of the work it is part of
    (:func:`within_own_time`) do not count it."""
    with _not_counted():
        yield


@contextmanager
def waiting_for_room() -> Iterator[None]:
    """The block waits for somewhere to run the work (a Ray actor to start, a slot of
    one): the time limits of the work it is part of do not count it."""
    with _not_counted():
        yield


@contextmanager
def _not_counted() -> Iterator[None]:
    """The block's time is not the work's own: its clocks stop until it ends."""
    clock = _clock.get()
    if clock is None:
        yield
        return
    loop = asyncio.get_running_loop()
    chain = []
    while clock is not None:
        chain.append(clock)
        clock = clock.parent
    for each in chain:
        if each.asking == 0:
            each.since = loop.time()
        each.asking += 1
    try:
        yield
    finally:
        for each in chain:
            each.asking -= 1
            if each.asking == 0:
                each.waited_s += loop.time() - each.since
                woken, each.woken = each.woken, None
                if woken is not None:
                    woken()


@contextmanager
def within_own_time(limit: float, own: OwnTime | None = None) -> Iterator[within]:
    """A block cancelled once it has worked ``limit`` seconds, the time it waited for
    a person (:func:`asking_a_person`) or for room (:func:`waiting_for_room`) left
    out: ``with within_own_time(5) as deadline: await work``. Yields the block's
    :class:`~runtime.concurrency.within`, whose ``expired`` says whether the limit
    passed. ``own``: the work's time so far, when the block is one stretch of it (see
    :class:`OwnTime`), which the block's own time is added to.

    Raises:
        TimedOut: when the limit passed (the block was cancelled).
    """
    loop = asyncio.get_running_loop()
    clock = _Clock(_clock.get())
    deadline = within(None)
    # Worked before the block: ``started`` is set back by it (no object per call: a
    # tool call's time limit is one of these, and benchmark E holds 30,000 at once).
    started = loop.time() - (own.worked_s if own is not None else 0.0)
    timer: asyncio.TimerHandle | None = None

    def check() -> None:
        nonlocal timer
        timer = None
        if clock.asking:
            clock.woken = check  # again once the person has answered
            return
        left = limit - (loop.time() - started - clock.waited_s)
        if left <= 0:
            deadline.expire()
        else:
            timer = loop.call_at(loop.time() + left, check)

    timer = loop.call_at(started + limit, check)
    token = _clock.set(clock)
    try:
        with deadline:
            yield deadline
    finally:
        _clock.reset(token)
        clock.woken = None
        if timer is not None:
            timer.cancel()
        if own is not None:
            own.worked_s = loop.time() - started - clock.waited_s


class OwnTime:
    """A time limit on work done in stretches, paused between them (a worker paused
    for a decision kept in the run store): each stretch (:meth:`stretch`) is cut once
    the stretches together have worked ``limit`` seconds, so a pause does not give the
    work its limit anew.

    Attributes:
        limit: Seconds of work allowed, all the stretches together.
        worked_s: Seconds the stretches that ended worked.
    """

    __slots__ = ("limit", "worked_s")

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.worked_s = 0.0

    def stretch(self) -> AbstractContextManager[within]:
        """The next stretch of the work (as :func:`within_own_time`), cut once the
        limit is used up.

        Raises:
            TimedOut: when the limit passed (the block was cancelled).
        """
        return within_own_time(self.limit, self)
