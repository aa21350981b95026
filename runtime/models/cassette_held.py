"""The calls a recorded run cancelled under way, as a replay comes to them.

A model call its worker was cancelled in (the run stopped: another worker failed
under ``failure: fail_fast``, a quorum could no more be reached, a budget ran out) has
no answer; the cassette keeps it ``cancelled``, with the text it had streamed (a
memory's embeddings call so cancelled too, with what its attempts spent), and an
ask of the run's approver so cancelled is a ``decision`` recorded ``cancelled`` (none
was made). Answered at once, a replay would let that worker run on where the
recording's stopped; so the call (the ask) is held, never answered, until the replayed
run cancels its worker as the recorded one did. So that nothing hangs when the
replayed run goes otherwise (the worker whose failure stopped the run succeeds now), a
held call is bounded by the other workers of its run: once every worker still running
is held so (or waits in a nested worker or judge that is) and the run is not stopping,
nothing is left to cancel them, and each held call is answered instead as a later life
of its run answered it (a run stopped over its budget, resumed with more, asks it
again: a replay of that life comes to the call the first life's stop cancelled, file
order first), else fails its worker with a :class:`~runtime.errors.CassetteMismatch`
naming the worker and the call.

Whether the run is stopping is asked of the run (:meth:`Held.ran`'s ``stopping``), a
turn of the event loop after a worker ended or a call was held: a run stops a worker
after it told of the end that stops it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from runtime.errors import CassetteMismatch
from runtime.models.cassette_lines import Decided, Embedded, Recorded

__all__ = ["Held", "later_life", "run_stopping"]

T = TypeVar("T")
Given = TypeVar("Given", Recorded, Embedded, Decided)


def later_life(
    found: Sequence[Given], given: set[int], case: str | None, worker: str | None
) -> Callable[[], Given | None]:
    """What gives, of ``found`` (lines of one key), one a later life of its run
    answered (not cancelled, cut off nor left waiting), marked in ``given`` (by id):
    the case's and worker's first, one not given first; None: none was."""

    def later() -> Given | None:
        made = [line for line in found if not _unanswered(line)]
        fresh = [line for line in made if id(line) not in given] or made
        best = max(
            fresh, key=lambda line: (line.case == case, _worker(line) == worker), default=None
        )
        if best is not None:
            given.add(id(best))
        return best

    return later


def _unanswered(line: Recorded | Embedded | Decided) -> bool:
    """Whether ``line`` gave no answer: cancelled, cut off, or left waiting."""
    if isinstance(line, Embedded):
        return line.cancelled
    return line.cancelled or line.cut or (isinstance(line, Decided) and line.waited)


def _worker(line: Recorded | Embedded | Decided) -> str | None:
    """The worker that asked ``line`` (None: not known, as of embeddings)."""
    return None if isinstance(line, Embedded) else line.worker


def run_stopping(writer: object) -> bool:
    """Whether the run of the task asking is stopping its workers, as its run tells
    ``writer`` (a :class:`~runtime.models.cassette_writer.CassetteWriter`'s
    ``stopping``; a stand-in of one in a Ray actor, as the driver said cancelling the
    worker there): a call cancelled then is kept ``cancelled``."""
    stopping = getattr(writer, "stopping", None)
    return stopping is not None and bool(stopping())


def _root_worker(name: str) -> str:
    """The worker of a run that a call of ``name`` is made in: itself, or the worker a
    judge (``reviewer of s1``) or a nested worker (``s1/call_1``) works for."""
    return name.rpartition(" of ")[2].partition("/")[0]


class _Hold:
    """One call held: its future (set only once nothing is left to cancel it: to the
    answer of a later life, or to fail it), and what names it."""

    __slots__ = ("future", "instead", "kind", "model", "what", "worker")

    def __init__(
        self, model: str, what: str, worker: str, kind: str, instead: Callable[[], Any]
    ) -> None:
        self.future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.model, self.what, self.worker, self.kind = model, what, worker, kind
        self.instead = instead


class Held:
    """The calls held of a cassette's replays, by case, and the workers running.

    Args:
        path: The cassette's file (what a mismatch names).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._running: dict[str | None, set[str]] = {}
        self._held: dict[str | None, list[_Hold]] = {}
        self._stopping: Callable[[], bool] | None = None  # None: not told of workers

    def ran(
        self, worker: str, case: str | None, *, ended: bool, stopping: Callable[[], bool]
    ) -> None:
        """``worker`` (of ``case``) started, or ``ended`` (``stopping``: whether its run
        is stopping its workers, asked in the context it ended in): a call held may
        then be all that is left running."""
        self._stopping = stopping
        running = self._running.setdefault(case, set())
        if not ended:
            running.add(worker)
            return
        running.discard(worker)
        if self._held.get(case):
            asyncio.get_running_loop().call_soon(self._check, case)

    async def hold(
        self,
        model: str,
        what: str,
        *,
        worker: str | None,
        case: str | None,
        instead: Callable[[], T | None],
        kind: str = "model",
    ) -> T:
        """Hold a call the recording cancelled under way (``what``: which it was, as a
        mismatch names it; ``kind``: ``model``, ``embeddings``, or ``decision``, an ask
        of the approver), until the replay cancels it too; once nothing is left to,
        what ``instead`` gives: the call as a later life answered it.

        Raises:
            CassetteMismatch: once nothing is left in the replayed run to cancel it,
                and no later life answered it.
        """
        hold = _Hold(model, what, worker or "", kind, instead)
        held = self._held.setdefault(case, [])
        held.append(hold)
        if self._stopping is not None:  # told of the run's workers: bounded by them
            asyncio.get_running_loop().call_soon(self._check, case)
        try:
            answered: T = await hold.future
        finally:
            held.remove(hold)
        return answered

    def _check(self, case: str | None) -> None:
        """Answer the calls held of ``case``'s run as a later life did, or fail them,
        once each worker still running is held and the run is not stopping them."""
        held = [hold for hold in self._held.get(case, ()) if not hold.future.done()]
        running = {_root_worker(name) for name in self._running.get(case, ())}
        roots = {_root_worker(hold.worker) for hold in held}
        stopping = self._stopping
        if not running or not running <= roots or stopping is None or stopping():
            return
        for hold in held:
            if _root_worker(hold.worker) in running:
                answered = hold.instead()
                if answered is not None:
                    hold.future.set_result(answered)
                else:
                    hold.future.set_exception(self._unanswered(hold, case))

    def _unanswered(self, hold: _Hold, case: str | None) -> CassetteMismatch:
        """What fails a call held that nothing cancelled."""
        difference = (
            f"{hold.what} was under way when the recorded run cancelled its worker (the "
            "run stopped: another worker failed, say), and no answer was recorded; "
            "replayed, the run's other workers ended and nothing cancelled it"
        )
        worker = hold.worker or None
        return CassetteMismatch(
            self.path, hold.model, difference, worker=worker, case=case, kind=hold.kind
        )
