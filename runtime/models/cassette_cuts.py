"""Where a cassette's runs were cut off by their wall time, as a replay reaches them.

A run recorded while its wall time ran out has a ``cut`` line where it fell (after the
calls of its case answered before it) and the calls it cut off under way after it,
each recorded ``cut``, and the calls whose approver it cut off asking, each a
``decision`` recorded ``cut``. Answered at once, its replay would run further; so it is
cut where the recording was: a call (or ask) recorded cut is not answered but waits,
and once every call answered (and decided) before the cut was given and every call it
cut is waiting, the replay's
wall time runs out then (:class:`runtime.limits.cut.RunCut`), as having used what the
recording had: the run stops over its budget as the recorded one did, the same calls
under way. A worker that was between calls as the cut fell (running a tool) and asks,
replayed, once all its recorded calls were given, asks past the cut: its call waits
too. One that asks what was not recorded before then is a mismatch, as in any replay.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable
from contextvars import ContextVar

from runtime.limits.cut import RunCut
from runtime.models.cassette_lines import Cut, Decided, Line, Recorded

__all__ = ["Cuts", "Pending", "once_taken"]


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


class Pending:
    """One cut recorded, as a replay comes to it.

    Attributes:
        line: Where it fell, and the seconds the run had used.
        before: The calls of its case answered (and decided) before it, since its
            case's last cut.
        cut: The calls it cut off under way, and the asks it cut off waiting.
        waiting: How many of them (or calls past it) the replay is holding.
        fell: Whether the replay's cut fell.
    """

    __slots__ = ("before", "cut", "fell", "line", "waiting")

    def __init__(self, line: Cut, before: list[Given]) -> None:
        self.line, self.before = line, before
        self.cut: list[Given] = []
        self.waiting = 0
        self.fell = False


class Cuts:
    """The cuts of a cassette's runs, by case, in file order.

    Args:
        lines: The cassette's lines, in file order.
    """

    def __init__(self, lines: Iterable[Line]) -> None:
        self._by_case: dict[str | None, list[Pending]] = {}
        since: dict[str | None, list[Given]] = {}
        for line in lines:
            if isinstance(line, Cut):
                pending = Pending(line, since.pop(line.case, []))
                self._by_case.setdefault(line.case, []).append(pending)
            elif isinstance(line, Given) and line.cut and self._by_case.get(line.case):
                self._by_case[line.case][-1].cut.append(line)
            elif isinstance(line, Given):
                since.setdefault(line.case, []).append(line)

    def __bool__(self) -> bool:
        return bool(self._by_case)

    def next(self, case: str | None) -> Pending | None:
        """The first cut of ``case`` that has not fallen in this replay (None: none)."""
        return next((p for p in self._by_case.get(case, ()) if not p.fell), None)

    def past(self, worker: str | None, case: str | None, given: set[int]) -> bool:
        """Whether a call of ``worker`` that was not recorded asks past the next cut of
        ``case``: every call of the worker recorded before it was given."""
        pending = self.next(case)
        return pending is not None and all(
            id(call) in given for call in pending.before if call.worker == worker
        )

    def taken(self, case: str | None, given: set[int], cut: RunCut | None) -> None:
        """:meth:`check`, once the answer just given was taken (:data:`once_taken`):
        the cut falls with its call ended, as it had when recorded, not under way."""
        if cut is not None:
            once_taken.get()(functools.partial(self.check, case, given, cut))

    def check(self, case: str | None, given: set[int], cut: RunCut | None) -> None:
        """Cut the run off (``cut``) where the next cut of ``case`` fell, once every call
        answered before it was ``given`` and every call it cut is waiting."""
        pending = self.next(case)
        if pending is None or cut is None or pending.waiting < len(pending.cut):
            return
        if all(id(call) in given for call in pending.before):
            pending.fell = True
            cut.now(pending.line.used)
