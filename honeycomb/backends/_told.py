"""Which events of a worker on Ray the driver tells, and when: as one process tells
them.

In one process, a worker starts (``worker.started``) once it has one of the run's
``max_workers``, and one paused on calls waiting in the run store tells the decisions
kept there (``approval.decided``) as it starts again. Sent to an actor, it starts once
it has room there and its role is installed (the pool's start and the wait for room
are not its time, in its span nor its timings, nor is the sending of it): the driver
tells its start, then those decisions, as the actor says it began there, its first
message, and as of when it did (:class:`Begin`), and passes on no event of a call's
approval twice (:class:`Told`): neither the actor's telling of those, which follows,
nor a later life's of what an earlier one told (a worker that moves to another actor
asks again about a call its approver is deciding, and goes on with decisions it told
before).

In one process, a model call the budget refuses is refused as it opens, before it is
told (no ``model_call.started``, no ``compaction.started`` of a summary call): it is
never made, nor traced. In an actor the call is told as it opens and reserved at the
driver after: the driver holds what the worker tells from the opening until the
reservation is answered, and drops, with a refused call, what told its opening and
what tells its end (:class:`Opened`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from runtime import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessage,
    CompactionFinished,
    CompactionStarted,
    Event,
    ModelCallFinished,
    ModelCallStarted,
)
from runtime.tools.approval_gate import decided_event
from workers import LoopState, Worker

if TYPE_CHECKING:
    from honeycomb.run.worker_record import WorkerRecord


class Told:
    """The approval events of one worker told so far, by kind, turn and call id."""

    def __init__(self) -> None:
        self._told: set[tuple[str, int, str]] = set()

    def first(self, event: Event) -> bool:
        """Whether ``event`` is to be passed on: it is no approval event, or the first
        of its kind for its call (it is counted told now)."""
        if not isinstance(event, ApprovalRequested | ApprovalDecided):
            return True
        key = event.kind, event.turn, event.call_id
        if key in self._told:
            return False
        self._told.add(key)
        return True


def decided_as_sent(worker: Worker, state: LoopState | None, told: Told) -> None:
    """Tell the decisions kept in the run store that ``worker`` goes on with as it
    continues from ``state`` (a turn whose calls it paused on), as one process tells
    them as the worker starts; ``told`` counts them."""
    tracer = worker.services.tracer
    record = cast("WorkerRecord | None", worker.services.store)
    if not tracer.enabled or record is None or state is None or not state.messages:
        return
    last = state.messages[-1]
    if not isinstance(last, AssistantMessage):
        return  # no turn of calls to go on with
    for call in last.tool_calls:
        entry = record.decisions.get((state.turn, call.id))
        if entry is None or entry.decision is None:
            continue
        event = decided_event(
            entry.pending, entry.decision, entry.decided_by, worker.services.run_id
        )
        if told.first(event):
            tracer.emit(event)


class Begin:
    """A worker's start on Ray, told once, as one process tells it: its ``started``
    (the scheduler's ``worker.started``), then the decisions kept in the run store that
    it goes on with (:func:`decided_as_sent`)."""

    def __init__(
        self,
        worker: Worker,
        resume: LoopState | None,
        told: Told,
        started: Callable[[], None] | None,
    ) -> None:
        self._worker, self._resume, self._told = worker, resume, told
        self._started = started
        self._done = False

    def __call__(self) -> None:
        if self._done:
            return
        self._done = True
        if self._started is not None:
            self._started()
        decided_as_sent(self._worker, self._resume, self._told)


_ENDS: dict[type[Event], type[Event]] = {
    ModelCallStarted: ModelCallFinished,
    CompactionStarted: CompactionFinished,
}
"""What tells a model call's opening (a turn's call, a summary call), and what its end."""


class Opened:
    """A worker's events on their way to ``emit``, held from a model call's opening
    until the driver has reserved the call (:meth:`reserved`), in a run whose budget
    may refuse it."""

    def __init__(self, emit: Callable[[Event, float], None], holds: bool) -> None:
        """``holds``: the run's budget has limits (else the driver only counts the
        worker's calls, refusing none, and nothing is held)."""
        self._emit = emit
        self._holds = holds
        # Since an opening, while it is held: each event, and when it happened.
        self._held: list[tuple[Event, float]] | None = None
        self._unopened: list[tuple[type[Event], int]] = []  # ends of refused calls, by turn

    def tell(self, event: Event, at: float) -> None:
        """Pass ``event`` (which happened at ``at``) on, hold it, or drop it (the end
        of a refused call)."""
        if self._unopened:
            end = (type(event), getattr(event, "turn", 0))
            if end in self._unopened:
                self._unopened.remove(end)
                return
        if self._held is not None:
            self._held.append((event, at))
        elif self._holds and type(event) in _ENDS:
            self._held = [(event, at)]
        else:
            self._emit(event, at)

    def reserved(self, ok: bool) -> None:
        """The call opened last was reserved (``ok``), or refused: what was held is
        passed on, but for a refused call's opening, dropped with its end to come."""
        held, self._held = self._held or [], None
        refused = None
        if not ok:  # the opening told last is the refused call's
            refused = max((i for i, (e, _) in enumerate(held) if type(e) in _ENDS), default=None)
        for place, (event, at) in enumerate(held):
            if place != refused:
                self._emit(event, at)
            else:
                self._unopened.append((_ENDS[type(event)], getattr(event, "turn", 0)))

    def flush(self) -> None:
        """Pass on what is held: the worker's life ended (it stopped, ended, or its
        actor died) before its reservation was answered (its call was opened, and
        told); the ends of its refused calls will not come."""
        self.reserved(True)
        self._unopened.clear()
