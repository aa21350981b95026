"""Decisions on tool calls that needed approval, in a cassette: a recording keeps each
decision its workers went on with, as the run's ``approval.decided`` events tell them
(its approver's, a person's kept in the run store and read by a later life, a denial
once the time to decide ran out), and a replay is decided from them, the cassette its
approver: a replayed run asks no person and goes on as the recorded one did. A call
the cassette holds no decision on fails its worker, naming the call and its tool
(:meth:`~runtime.models.cassettes.Cassette.decision`). The same events tell a
recording which calls were still asked about, and which workers had ended, where the
run's wall time cut it off, and a replay's workers' ends tell the cassette when it
may cut the replay there (:mod:`runtime.models.cassette_cuts`).
:func:`cassette_approvals` gives a run them, as an Executor whose models are a
cassette's (:mod:`runtime.models.layers.cassette`) does: a run's part, for it holds
both a model's cassette and the approvals of its tools.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from honeycomb.run.events import RunFinished, WorkerFinished, WorkerStarted
from honeycomb.run.scheduler import why_stopped
from runtime.errors import CassetteError
from runtime.events import ApprovalDecided, ApprovalRequested, EventHandler
from runtime.limits.cut import RunCut
from runtime.model import Model
from runtime.models.cassette_cuts import tell_cuts
from runtime.models.cassettes import Cassette, CassetteWriter, Decided
from runtime.models.layers.cassette import RecordingModel, ReplayModel, current_case
from runtime.tools.approvals import ApprovalRequest, Approver, Decision, LeftWaiting

__all__ = ["CassetteApprover", "DecisionsKept", "WorkersFollowed", "cassette_approvals"]

_STOPPED = ("cancelled", "over_budget")
"""The statuses of a worker its run stopped (its calls still asked about then were
cancelled asking, when the run was stopping its workers: not interrupted from
outside, which a later life goes on from)."""


class DecisionsKept:
    """Keeps in a cassette each decision a run's workers go on with, and the calls
    still asked about when the run's wall time cuts it off: an event handler of the
    run, told its ``approval.requested`` and ``approval.decided`` events (each call's
    once).

    Args:
        writer: The cassette's writer (its models').
    """

    def __init__(self, writer: CassetteWriter) -> None:
        self.writer = writer
        writer.stopping = _stopping  # a call its run stopped under way is kept cancelled
        self._ran = WorkersFollowed(writer)  # a cut of the run records which had ended

    def __call__(self, event: Any) -> None:
        handler = self.handler_for(event.kind)
        if handler is not None:
            handler(event)

    def handler_for(self, kind: str) -> Callable[[Any], None] | None:
        """What takes the events of ``kind``: the asks and decisions, the workers'
        starts and ends (a cut of the run records which had ended; a worker the run
        stopped, its calls still asked about, cancelled), and the run's end
        (its calls still asked about are not those of a later run's cut)."""
        if kind == WorkerFinished.kind:
            return self._ended
        if kind == WorkerStarted.kind:
            return self._ran
        if kind == RunFinished.kind:
            return self._finished
        if kind == ApprovalDecided.kind:
            return self._decided
        return self._asked if kind == ApprovalRequested.kind else None

    def keep_cut(self, cut: RunCut, worker: str | None) -> None:
        """Have ``cut`` (the run's wall time's, or ``worker``'s time limit's) tell the
        cassette where it falls, as it is set: a run (a worker) cut before any of its
        calls reached the cassette (its input guards still checking, say) is cut so,
        replayed, too."""
        cuts = (cut, None) if worker is None else (None, cut)
        tell_cuts(self.writer, cuts, case=current_case(), worker=worker)

    def _ended(self, event: WorkerFinished) -> None:
        self._ran(event)
        if event.worker is not None and event.status in _STOPPED and _stopping():
            self.writer.stopped(event.run_id, event.worker)

    def _finished(self, event: RunFinished) -> None:
        self.writer.finished(event.run_id, waiting=event.status == "waiting")

    def _asked(self, event: ApprovalRequested) -> None:
        if event.worker is None:
            return
        asked = Decided(
            worker=event.worker,
            tool=event.tool,
            arguments=event.arguments,
            turn=event.turn,
            approve=False,
            case=current_case(),
            cut=True,
        )
        self.writer.asked(asked, (event.run_id, event.worker, event.turn, event.call_id))

    def _decided(self, event: ApprovalDecided) -> None:
        if event.worker is None or event.arguments is None:
            return  # told by a process that does not say the call's arguments
        decided = Decided(
            worker=event.worker,
            tool=event.tool,
            arguments=event.arguments,
            turn=event.turn,
            approve=event.approved,
            reason=event.reason,
            edited=event.edited_arguments,
            by=event.by,
            case=current_case(),
        )
        self.writer.decided(decided, (event.run_id, event.worker, event.turn, event.call_id))


class WorkersFollowed:
    """Tells a cassette as the run's workers start and end (its ``worker.started`` and
    ``worker.finished`` events): a recording's cut of the run records which had ended,
    and a replay's falls once they have ended replayed too; a replay's calls held as
    cancelled fail once nothing else runs to cancel them.

    Args:
        cassette: The cassette's writer (recording), or the cassette (replaying).
    """

    def __init__(self, cassette: CassetteWriter | Cassette) -> None:
        self.cassette = cassette

    def __call__(self, event: Any) -> None:
        if isinstance(event, WorkerStarted | WorkerFinished) and event.worker is not None:
            ended = isinstance(event, WorkerFinished)
            if isinstance(self.cassette, Cassette):  # its calls held as cancelled too
                self.cassette.ran(event.worker, current_case(), ended=ended, stopping=_stopping)
            else:
                self.cassette.ran(event.worker, current_case(), ended=ended)


def _stopping() -> bool:
    """Whether the run whose worker asks is stopping its workers (the failure policy
    gave up, a budget ran out): it cancels a replay's calls held as cancelled then."""
    return why_stopped() is not None


class CassetteApprover:
    """The approver of a replayed run: decides each call as it was decided when
    recorded (approved or denied, with the same reason or edited arguments, by the same
    person), asking nobody.

    Args:
        cassette: The cassette replayed (its models').

    Raises:
        CassetteMismatch: (from a call) when the cassette holds no decision on such a
            call: the gate fails the worker with it, as a model call not recorded does.
    """

    def __init__(self, cassette: Cassette) -> None:
        self.cassette = cassette

    def __repr__(self) -> str:
        return f"CassetteApprover({str(self.cassette.path)!r})"

    async def __call__(self, request: ApprovalRequest) -> Decision:
        """The recorded decision on the call.

        Raises:
            LeftWaiting: when the recorded run left the call waiting in its store (a run
                with no store fails the worker with a ``CassetteError`` saying so).
            CassetteMismatch: when the cassette holds no decision on such a call.
        """
        found = await self.cassette.decided(
            request.worker or "",
            request.tool,
            request.arguments,
            asked=f"call {request.call_id!r} of turn {request.turn}",
            case=current_case(),
        )
        if found.waited:
            raise LeftWaiting(
                f"call {request.call_id!r} was left waiting when recorded",
                cannot_wait=self._nowhere_to_wait(request),
            )
        return Decision(
            approve=found.approve, reason=found.reason, arguments=found.edited, by=found.by
        )

    def _nowhere_to_wait(self, request: ApprovalRequest) -> CassetteError:
        """What fails the worker of a call the recorded run left waiting in its store,
        replayed by a run with no store to wait in (denied, it would go otherwise)."""
        call = f"call {request.call_id!r} of tool {request.tool!r}"
        how = (
            f"could not wait as recorded: the recorded run left {call} waiting in its run "
            "store, and this replay has none to wait in: replay it with a run store (not "
            "--no-store)"
        )
        self.cassette.went_otherwise(request.worker or "", current_case(), request.run_id, how)
        return CassetteError(f"worker {request.worker!r} {how}", file=str(self.cassette.path))


def cassette_approvals(
    approver: Approver | None, models: Model | Mapping[str, Model]
) -> tuple[Approver | None, tuple[EventHandler, ...]]:
    """Who decides a run's calls on ``models``, and what keeps the decisions: when
    they are a cassette's replay, the cassette (``approver`` is never asked), told of
    the run's workers by the handler of its events returned; when a recording's,
    ``approver``, each decision kept in the cassette by the handler returned; else
    ``approver``, and no handler."""
    named = models.values() if isinstance(models, Mapping) else (models,)
    for model in named:
        if isinstance(model, ReplayModel):
            return CassetteApprover(model.cassette), (WorkersFollowed(model.cassette),)
        if isinstance(model, RecordingModel):
            return approver, (DecisionsKept(model.writer),)
    return approver, ()
