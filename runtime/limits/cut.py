"""Where a run's wall time cut it off, or a worker's own time limit cut the worker off:
the run that has a wall-time budget sets a :class:`RunCut` for the tasks it starts
(:data:`run_cut`), and a worker under its policy's ``worker_timeout_s`` one for its own
(:data:`worker_cut`), so that what works inside them can be told when the cut falls (a
recording keeps where it fell), or make it fall now (a replay cuts its run or worker
where the recording's was cut, having been answered at once: its own clock would let
it run further)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import Protocol, runtime_checkable

__all__ = ["CutKept", "RunCut", "keep_cut", "run_cut", "worker_cut"]


class RunCut:
    """The cut of one run's wall time (or of one worker's time limit).

    Args:
        expire: Cuts the run (the worker) off now, naming the seconds it used (None:
            its own elapsed time); what its deadline calls as it passes.

    Attributes:
        used: The seconds it had used when the cut fell (None: it has not).
    """

    __slots__ = ("_expire", "_told", "used")

    def __init__(self, expire: Callable[[float | None], None]) -> None:
        self._expire = expire
        self._told: dict[int, Callable[[float], None]] = {}
        self.used: float | None = None

    def tell(self, told: Callable[[float], None], key: object) -> None:
        """Call ``told`` with the seconds used as the cut falls, or now if it fell
        already (a Ray actor's recording asks through the driver, which may hear it
        after): once a ``key``, as the same writer asks at each call."""
        if id(key) in self._told:
            return
        self._told[id(key)] = told
        if self.used is not None:
            told(self.used)

    def now(self, used: float | None = None) -> None:
        """Cut the run off now, as if it had used ``used`` seconds (nothing, once the
        cut fell)."""
        if self.used is None:
            self._expire(used)

    def fell(self, used: float) -> None:
        """The cut fell, the run having used ``used`` seconds: those told of it are
        told (the run's deadline calls it, as it cuts the run off)."""
        if self.used is not None:
            return
        self.used = used
        for told in self._told.values():
            told(used)


@runtime_checkable
class CutKept(Protocol):
    """What keeps where a run's wall time (or a worker's time limit) cuts it off (a
    recording's cassette): an event handler of the run, told of each cut as it is set
    (:func:`keep_cut`), so that the cut is kept whether or not a call was made under
    it."""

    def keep_cut(self, cut: RunCut, worker: str | None) -> None:
        """Be told by ``cut`` (the run's, or ``worker``'s) where it falls
        (:meth:`RunCut.tell`)."""
        ...


def keep_cut(handlers: Iterable[object], cut: RunCut, worker: str | None = None) -> None:
    """Tell those of a run's event ``handlers`` that keep cuts (:class:`CutKept`) of
    ``cut``, the run's wall time's (or ``worker``'s time limit's), as it is set."""
    for handler in handlers:
        if isinstance(handler, CutKept):
            handler.keep_cut(cut, worker)


run_cut: ContextVar[RunCut | None] = ContextVar("honeycomb_run_cut", default=None)
"""The cut of the wall time of the run the current task works in (None: it has no
wall-time budget)."""

worker_cut: ContextVar[RunCut | None] = ContextVar("honeycomb_worker_cut", default=None)
"""The cut of the time limit of the worker the current task works for (its policy's
``worker_timeout_s``; None: it has none)."""
