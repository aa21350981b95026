"""The approval events of a worker on Ray, told once each, when one process tells them.

In one process, a worker paused on calls waiting in the run store tells the decisions
kept there (``approval.decided``) as it starts again, before any other worker's start;
sent to an actor, it would tell them only once it runs there, after the pool started,
it had room in an actor and its role was installed. The driver tells them as it sends
the worker (:func:`decided_as_sent`), and passes on no event of a call's approval twice
(:class:`Told`): neither the actor's telling of those, nor a later life's of what an
earlier one told (a worker that moves to another actor asks again about a call its
approver is deciding, and goes on with decisions it told before).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from runtime import ApprovalDecided, ApprovalRequested, AssistantMessage, Event
from runtime.tools.approvals import decided_event
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
