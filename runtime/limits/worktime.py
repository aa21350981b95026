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
not. A wait inside nested work (a nested worker, :func:`nested_strand`; a sub-run with
limits of its own) stops the clocks of the work it is part of only once nothing else of
that work goes on: a nested worker that works while another waits works for them all.
The clocks are found through a context variable, which the tasks the work starts (its
tool calls, its nested workers) inherit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar, Token

from runtime.concurrency import within
from runtime.limits.cut import RunCut, worker_cut

__all__ = [
    "OwnTime",
    "asking_a_person",
    "in_clock",
    "nested_strand",
    "time_left",
    "waiting_for_room",
    "within_own_time",
]


class _Strand:
    """A line of work under a clock: the clock's own block, or a nested worker in it
    (:func:`nested_strand`). It works unless it waits for a person or for room
    (``away``) or for the strands and clocks nested in it (``nested``)."""

    __slots__ = ("away", "clock", "nested")

    def __init__(self, clock: _Clock) -> None:
        self.clock = clock
        self.away = 0  # its waits under way (parallel calls may each wait)
        self.nested = 0  # the strands and clocks nested in it under way

    @property
    def works(self) -> bool:
        return not self.away and not self.nested


class _Clock(_Strand):
    """The time one piece of work has not worked: it runs while one of its strands
    works (its own block, itself, is one; so is each strand and clock nested in it),
    and stops once none does, stopping the clock it is nested in too unless that one
    has another strand that works."""

    __slots__ = ("limit", "named", "parent", "since", "started", "waited_s", "woken", "working")

    def __init__(self, parent: _Clock | None, limit: float, started: float, named: str) -> None:
        super().__init__(self)
        self.parent = parent
        # Its limit, when it started (less what it worked before), and the limit in words.
        self.limit, self.started, self.named = limit, started, named
        self.working = 1  # its strands that work: its own block, as it starts
        self.since = 0.0  # when it stopped last
        self.waited_s = 0.0  # the time it was stopped, added up
        self.woken: Callable[[], None] | None = None  # the limit's check, once it runs

    def worked_s(self, now: float) -> float:
        """The time it has worked by ``now`` (less the stretches it was stopped)."""
        return now - self.started - self.waited_s

    def less(self, now: float) -> None:
        """One of its strands stops working: the last stops the clock."""
        self.working -= 1
        if self.working == 0:
            self.since = now
            if self.parent is not None:
                self.parent.less(now)

    def more(self, now: float) -> None:
        """One of its strands works again: the first starts the clock again."""
        self.working += 1
        if self.working == 1:
            self.waited_s += now - self.since
            if self.parent is not None:
                self.parent.more(now)
            woken, self.woken = self.woken, None
            if woken is not None:
                woken()


_strand: ContextVar[_Strand | None] = ContextVar("honeycomb_work_clock", default=None)


@contextmanager
def asking_a_person() -> Iterator[None]:
    """The block waits for a person: the time limits of the work it is part of
    (:func:`within_own_time`) do not count it, unless other work of theirs goes on."""
    with _not_counted():
        yield


@contextmanager
def waiting_for_room() -> Iterator[None]:
    """The block waits for somewhere to run the work (a Ray actor to start, a slot of
    one): the time limits of the work it is part of do not count it, unless other work
    of theirs goes on."""
    with _not_counted():
        yield


@contextmanager
def _not_counted() -> Iterator[None]:
    """The block's time is not the work's own: its strand does not work meanwhile, and
    its clocks stop once nothing else of them works."""
    strand = _strand.get()
    if strand is None:
        yield
        return
    loop = asyncio.get_running_loop()
    strand.away += 1
    if strand.away == 1 and not strand.nested:
        strand.clock.less(loop.time())
    try:
        yield
    finally:
        strand.away -= 1
        if strand.works:
            strand.clock.more(loop.time())


def in_clock() -> bool:
    """Whether the work under way is under a time limit of :func:`within_own_time`."""
    return _strand.get() is not None


def time_left() -> tuple[float, str] | None:
    """The seconds the work under way may still work before a time limit of it cuts it
    off, and that limit in words: the least of those of its tool call, its worker and
    the work they are part of (a nested worker's caller's); None: none bounds it."""
    strand = _strand.get()
    if strand is None:
        return None
    now = asyncio.get_running_loop().time()
    least: tuple[float, str] | None = None
    clock: _Clock | None = strand.clock
    while clock is not None:  # each works while the work under way does
        left = clock.limit - clock.worked_s(now)
        if least is None or left < least[0]:
            least = (left, clock.named)
        clock = clock.parent
    return least


@contextmanager
def nested_strand() -> Iterator[None]:
    """The block runs a nested worker (an agent tool's, a sub-run's) beside the other
    work of the clocks it is part of: a strand of its own, which works while it runs,
    its caller's strand waiting for it (and for the others nested in it). A wait of
    one nested worker stops the clocks only once nothing else of them works."""
    caller = _strand.get()
    if caller is None:
        yield
        return
    own = _Strand(caller.clock)
    token = _nest(caller, own)
    try:
        yield
    finally:
        _unnest(caller, own, token)


def _nest(caller: _Strand, own: _Strand) -> Token[_Strand | None]:
    """``own`` (a strand, or a clock) works nested in ``caller``'s strand from now on,
    counted among the strands of ``caller``'s clock while it works, ``caller`` waiting
    for it; the token that ends it (:func:`_unnest`)."""
    clock, now = caller.clock, asyncio.get_running_loop().time()
    clock.more(now)  # ``own`` works, and then its caller does not
    caller.nested += 1
    if caller.nested == 1 and not caller.away:
        clock.less(now)
    return _strand.set(own)


def _unnest(caller: _Strand, own: _Strand, token: Token[_Strand | None]) -> None:
    """``own`` ends, and ``caller`` waits for it no more."""
    _strand.reset(token)
    clock, now = caller.clock, asyncio.get_running_loop().time()
    caller.nested -= 1
    if caller.works:
        clock.more(now)
    if own.clock is not own or own.working:  # (a clock counts as long as it runs)
        clock.less(now)


def _worker_cut(deadline: within, limit: float) -> RunCut:
    """A worker's time limit as a cut: ``deadline`` expired as it falls, naming the
    seconds used (``limit``, as its own clock ran out; those a replay names)."""

    def expire(used: float | None = None) -> None:
        deadline.expire()
        cut.fell(limit if used is None else used)

    cut = RunCut(expire)
    return cut


@contextmanager
def within_own_time(limit: float, own: OwnTime | None = None) -> Iterator[within]:
    """A block cancelled once it has worked ``limit`` seconds, the time it waited for
    a person (:func:`asking_a_person`) or for room (:func:`waiting_for_room`) left
    out, unless other work of it (a nested worker) went on meanwhile: ``with
    within_own_time(5) as deadline: await work``. Yields the block's
    :class:`~runtime.concurrency.within`, whose ``expired`` says whether the limit
    passed. ``own``: the work's time so far, when the block is one stretch of it (see
    :class:`OwnTime`), which the block's own time is added to; the block is then a
    worker's, and its cut is :data:`~runtime.limits.cut.worker_cut` in it.

    Raises:
        TimedOut: when the limit passed (the block was cancelled).
    """
    loop = asyncio.get_running_loop()
    caller = _strand.get()
    parent = caller.clock if caller is not None else None
    # Worked before the block: ``started`` is set back by it (no object per call: a
    # tool call's time limit is one of these, and benchmark E holds 30,000 at once).
    started = loop.time() - (own.worked_s if own is not None else 0.0)
    named = "its worker's worker_timeout_s" if own is not None else "the tool call's tool_timeout"
    clock = _Clock(parent, limit, started, named)
    deadline = within(None)
    timer: asyncio.TimerHandle | None = None
    # A worker's limit (``own``) is a cut that a recording keeps and a replay makes fall.
    cut = _worker_cut(deadline, limit) if own is not None else None

    def check() -> None:
        nonlocal timer
        timer = None
        if not clock.working:
            clock.woken = check  # again once some of its work goes on
            return
        left = limit - clock.worked_s(loop.time())
        if left <= 0:
            (cut.now if cut is not None else deadline.expire)()
        else:
            timer = loop.call_at(loop.time() + left, check)

    timer = loop.call_at(started + limit, check)
    # Its work is a strand of the clock of the work it is part of, if any.
    token = _nest(caller, clock) if caller is not None else _strand.set(clock)
    cutting = worker_cut.set(cut) if cut is not None else None
    try:
        with deadline:
            yield deadline
    finally:
        if cutting is not None:
            worker_cut.reset(cutting)
        if caller is not None:
            _unnest(caller, clock, token)
        else:
            _strand.reset(token)
        clock.woken = None
        if timer is not None:
            timer.cancel()
        if own is not None:
            own.worked_s = clock.worked_s(loop.time())


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
