"""Where a cassette's runs (or their workers) were cut off by their time, as a replay
reaches them.

A run recorded while its wall time ran out has a ``cut`` line where it fell (after the
calls of its case answered before it; one cut before any call has it too, its run's
recording told of the cut as the run starts) and the calls it cut off under way after it,
each recorded ``cut``, and the calls whose approver it cut off asking, each a
``decision`` recorded ``cut``. A worker its own time limit (``worker_timeout_s``) cut
off has one too, naming the worker, after that worker's calls answered before it, and
its calls cut after it. Answered at once, a replay would run further; so it is cut
where the recording was: a call (or ask) recorded cut is not answered but waits, and
once every call answered (and decided) before the cut was given, every call it cut
is waiting, and every worker that had ended as it fell has ended, the replay's wall
time (the worker's time limit) runs out then (:class:`runtime.limits.cut.RunCut`),
as having used what the recording had: the run
stops over its budget (the worker fails past its time) as the recorded one did, the
same calls under way. A worker that was between calls as the cut fell (running a
tool) and asks, replayed, once all its recorded calls were given, asks past the cut:
its call waits too. One that asks what was not recorded before then is a mismatch, as
in any replay, which fails it: its run's cut then waits for none of its calls.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable
from contextvars import ContextVar

from runtime.limits.cut import RunCut, run_cut, worker_cut
from runtime.models.cassette_lines import Cut, Decided, Line, Recorded
from runtime.models.cassette_writer import CassetteWriter

__all__ = ["Cuts", "Cutting", "Pending", "cutting", "once_taken", "tell_cuts"]


def _next_turn(then: Callable[[], None]) -> None:
    asyncio.get_running_loop().call_soon(then)


once_taken: ContextVar[Callable[[Callable[[], None]], None]] = ContextVar(
    "honeycomb_once_taken", default=_next_turn
)
"""Runs a function once the answer a replay gives now was taken, its call ended: in
one process, on the event loop's next turn (the call returns through its layers
first); for a call made elsewhere (in a Ray actor), as its end is told (the driver
sets it)."""

Given = Recorded | Decided
"""What a replay gives: a model call's answer, or a decision on a tool call (an ask of
the run's approver); recorded ``cut``, each was under way as the cut fell."""

Cutting = tuple[RunCut | None, RunCut | None]
"""The cuts a call is under: its run's wall time's, its worker's time limit's."""


def cutting() -> Cutting:
    """The cuts the current task's calls are under (:data:`Cutting`)."""
    return run_cut.get(), worker_cut.get()


def tell_cuts(
    writer: CassetteWriter, cuts: Cutting, *, case: str | None, worker: str | None
) -> None:
    """Have ``cuts`` (a run's wall time's, ``worker``'s time limit's) tell ``writer``
    where they fall, as the calls of ``case`` under them are recorded (once each)."""
    run, own = cuts
    told = functools.partial(writer.cut, case=case)
    if run is not None:
        run.tell(told, writer)
    if own is not None:
        own.tell(functools.partial(told, worker=worker), writer)


class Pending:
    """One cut recorded, as a replay comes to it.

    Attributes:
        line: Where it fell, whose it was (a worker's, or the run's), and the seconds
            used.
        order: Its place among the cuts of the file.
        before: The calls of its case (of its worker, for a worker's) answered, and
            decided, before it, since the last cut of theirs.
        cut: The calls it cut off under way, and the asks it cut off waiting.
        waiting: How many of them (or calls past it) the replay is holding.
        gone: The workers that a call not recorded failed, replayed, before it fell
            (:meth:`Cuts.strayed`): it waits for no call of theirs.
        fell: Whether the replay's cut fell.
    """

    __slots__ = ("before", "cut", "fell", "gone", "line", "order", "waiting")

    def __init__(self, line: Cut, order: int, before: list[Given]) -> None:
        self.line, self.order, self.before = line, order, before
        self.cut: list[Given] = []
        self.waiting = 0
        self.gone: set[str] = set()
        self.fell = False

    def awaited(self) -> int:
        """How many calls it cut it waits for (not those of workers gone)."""
        return sum(call.worker not in self.gone for call in self.cut)


class Cuts:
    """The cuts of a cassette's runs, by case and by whose they were, in file order.

    Args:
        lines: The cassette's lines, in file order.
    """

    def __init__(self, lines: Iterable[Line]) -> None:
        self._by_scope: dict[tuple[str | None, str | None], list[Pending]] = {}
        self._caught_some: list[Pending] = []  # those that caught calls, in file order
        self._given: set[int] = set()  # the calls (by id) given
        self._taken: set[int] = set()  # those whose answer was taken (their call ended)
        self._ended: dict[str | None, set[str]] = {}  # by case, the workers that ended
        # (as the replayed run's events tell, when its Executor has them told: ran)
        self._strayed: set[tuple[str | None, str]] = set()  # (case, worker): a mismatch
        since: dict[tuple[str | None, str | None], list[Given]] = {}
        for order, line in enumerate(lines):
            if isinstance(line, Cut):
                scope = (line.case, line.worker)
                if line.worker is None:  # the run's: its workers' calls go with it
                    for key in [key for key in since if key[0] == line.case and key[1]]:
                        del since[key]
                pending = Pending(line, order, since.pop(scope, []))
                self._by_scope.setdefault(scope, []).append(pending)
            elif isinstance(line, Given) and line.cut:
                caught = self._last(line.case, line.worker)
                if caught is not None:
                    caught.cut.append(line)
                    if caught not in self._caught_some:
                        self._caught_some.append(caught)
            elif isinstance(line, Given) and not line.cancelled:  # (never answered)
                since.setdefault((line.case, None), []).append(line)
                since.setdefault((line.case, line.worker), []).append(line)

    def __bool__(self) -> bool:
        return bool(self._by_scope)

    def __contains__(self, scope: tuple[str | None, str | None]) -> bool:
        return bool(self._by_scope.get(scope))

    def _last(self, case: str | None, worker: str | None) -> Pending | None:
        """The cut recorded last, so far, of ``case``'s run or of ``worker``."""
        last = [self._by_scope[scope][-1] for scope in _scopes(case, worker) if scope in self]
        return max(last, key=lambda p: p.order, default=None)

    def _next(self, case: str | None, worker: str | None) -> Pending | None:
        """The first cut of ``case``'s run or of ``worker`` that has not fallen in this
        replay (None: none)."""
        pending = [
            p
            for scope in _scopes(case, worker)
            for p in self._by_scope.get(scope, ())
            if not p.fell
        ]
        return min(pending, key=lambda p: p.order, default=None)

    def holding(self, call: Given | None, worker: str | None, case: str | None) -> Pending | None:
        """The cut that holds ``call``, recorded cut (None: a call asked past the next
        cut of its run or worker), as it starts waiting for it to fall (None: none)."""
        pending = self._next(case, worker) if call is None else self._caught(call)
        if pending is not None:
            pending.waiting += call is not None
        return pending

    def _caught(self, call: Given) -> Pending | None:
        """The cut that caught ``call`` (one alike, when it crossed from a Ray actor): the
        first of those that has not fallen."""
        caught = [p for p in self._caught_some if call in p.cut]
        return next((p for p in caught if not p.fell), caught[0] if caught else None)

    def past(self, worker: str | None, case: str | None) -> bool:
        """Whether a call of ``worker`` that was not recorded asks past the next cut of
        ``case``'s run or of the worker: every call of the worker recorded before it was
        given."""
        pending = self._next(case, worker)
        return pending is not None and all(
            id(call) in self._given for call in pending.before if call.worker == worker
        )

    def taken(self, call: Given, case: str | None, worker: str | None, cuts: Cutting) -> None:
        """``call`` was given to ``worker``: once it was taken (:data:`once_taken`), the
        cuts it came before are checked (:meth:`check`), so that one falls with the
        call ended, as it had when recorded, not under way."""
        self._given.add(id(call))
        if cuts == (None, None):  # nothing to cut
            self._taken.add(id(call))
        else:
            once_taken.get()(functools.partial(self._took, id(call), case, worker, cuts))

    def _took(self, call: int, case: str | None, worker: str | None, cuts: Cutting) -> None:
        self._taken.add(call)
        self.check(case, worker, cuts)

    def ran(self, worker: str, case: str | None, *, ended: bool, cuts: Cutting) -> None:
        """``worker`` (of ``case``) started, or ``ended``: a cut of its run falls once
        the workers that had ended when it was recorded have ended (:meth:`check`)."""
        running = self._ended.setdefault(case, set())
        if not ended:
            running.discard(worker)
            self._strayed.discard((case, worker))  # a later run's, of the same name
            return
        running.add(worker)
        pending = next((p for p in self._by_scope.get((case, None), ()) if not p.fell), None)
        if pending is not None and (case, worker) in self._strayed:
            pending.gone.add(worker)  # its calls the cut waits on will never come
        self.check(case, None, cuts)

    def strayed(self, worker: str | None, case: str | None) -> None:
        """``worker`` (of ``case``) asked what was not recorded, which fails it: as it
        ends, the next cut of its run waits no more for its calls recorded before it
        and those it caught, which it will never ask, but falls as the others come to
        it, rather than when the replay's own time runs out."""
        if worker is not None:
            self._strayed.add((case, worker))

    def check(self, case: str | None, worker: str | None, cuts: Cutting) -> None:
        """Cut off the run (``cuts``' first) or ``worker`` (their second) where the
        next cut of theirs fell, once every call answered before it was taken, every
        call it cut is waiting and (the run's) every worker that had ended, ended."""
        for scope, cut in zip(_scopes(case, worker), cuts, strict=False):
            pending = next((p for p in self._by_scope.get(scope, ()) if not p.fell), None)
            if pending is None or cut is None or pending.waiting < pending.awaited():
                continue
            ended = self._ended.get(case)  # (None: not told of the run's workers)
            if ended is not None and not ended.issuperset(pending.line.ended):
                continue
            if all(id(c) in self._taken or c.worker in pending.gone for c in pending.before):
                pending.fell = True
                cut.now(pending.line.used)


def _scopes(case: str | None, worker: str | None) -> list[tuple[str | None, str | None]]:
    """Whose cuts a call of ``worker`` in ``case`` is under: its run's, its own."""
    return [(case, None)] if worker is None else [(case, None), (case, worker)]
