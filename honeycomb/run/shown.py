"""A stored run as every view shows it (``honeycomb trace``, ``honeycomb serve``'s
page): one status per worker and one timeline, made here from the store, so no two
views of a run say different things."""

from __future__ import annotations

from collections.abc import Sequence

from honeycomb.run.decide import ENDED
from honeycomb.run.phase_names import phase_of
from honeycomb.run.plan import Plan
from honeycomb.store import StoredRun
from honeycomb.trace.spans import Span
from honeycomb.trace.timeline import Timeline, build_timeline

__all__ = ["answers_held", "stored_timeline", "worker_statuses"]

_PASSED = ("ok", "partial")
"""A run that ended so ended with an answer: its output guards passed it."""

_LEFT_AS = {
    "running": "running",
    "waiting": "waiting",
    "interrupted": "interrupted",
    "over_budget": "over_budget",  # stopped by the budget, as its result and trace say
}
"""What a worker with no outcome is at, by what its run is at (else: ``cancelled``)."""

_CUT_OFF = ("cancelled", "over_budget")
"""What the store says of a nested worker its call cut off (:mod:`honeycomb.run.agents`)."""


def worker_statuses(run: StoredRun, status: str | None = None) -> dict[str, str]:
    """What each worker of ``run`` is at: its outcome once it has one (``ok``,
    ``failed`` ...); ``waiting`` while a call of it waits for a person (not in a run
    that ended for good, which left the call undecided: :data:`ENDED`); ``cancelled``
    (``over_budget``) once its call cut it off (a nested worker: its caller may go
    on); else what its run is at (``running``, ``interrupted``; ``over_budget`` for a
    run a budget stopped, ``cancelled`` for one that ended otherwise).

    Args:
        run: The stored run.
        status: The run's status, if known better than the store's row says (a run
            whose process is gone reads ``interrupted``: ``RunStore.summary``).
    """
    now = status or run.status
    statuses: dict[str, str] = {}
    for name, worker in run.workers.items():
        if worker.result is not None:
            statuses[name] = worker.status
        elif now not in ENDED and any(e.decision is None for e in worker.approvals.values()):
            statuses[name] = "waiting"
        elif worker.status in _CUT_OFF:  # a nested worker its call cut off
            statuses[name] = worker.status
        else:
            statuses[name] = _LEFT_AS.get(now, "cancelled")
    return statuses


def answers_held(run: StoredRun, worker: str, status: str | None = None) -> bool:
    """Whether every view holds back the answer of ``worker`` (its name in the store)
    of ``run``, as the stream holds its text: the run's answer is made of it (its
    workers' under ``concat`` or an aggregator function; its aggregator role's worker's,
    which writes it) and its output guards have not passed it (they will check it,
    check it now, or refused it); ``status`` as :func:`worker_statuses` takes it."""
    if (status or run.status) in _PASSED:
        return False
    phase = phase_of(worker)
    return (run.held == "workers" and phase is None) or run.held == phase == "aggregate"


def stored_timeline(run: StoredRun, spans: Sequence[Span], status: str | None = None) -> Timeline:
    """The timeline of a stored run: its spans laid out with its plan, each worker
    with the status :func:`worker_statuses` gives it."""
    plan = Plan.model_validate_json(run.plan).subtasks if run.plan else ()
    statuses = worker_statuses(run, status)
    if (status or run.status) == "running":
        # A worker the store has no row of yet (its first turn not saved: a tool call,
        # or a guard's check of its answer, under way) whose calls are kept, and that
        # has not ended (its own span kept): it runs.
        ended = {s.worker for s in spans if s.kind == "worker"}
        for span in spans:
            if span.worker is not None and span.worker not in ended:
                statuses.setdefault(span.worker, "running")
    return build_timeline(
        spans,
        plan,
        run_id=run.run_id,
        task=run.task,
        status=status or run.status,
        statuses=statuses,
        phases=_phases_under_way(run),
    )


def _phases_under_way(run: StoredRun) -> dict[str, str]:
    """The planner's and the aggregator's workers of ``run`` kept without a result
    (under way, or cut off in a life), by their names in the store, each with its
    phase's row on the timeline: ``plan``, ``round 2`` (a later round's), or
    ``aggregate``. Their calls' spans are kept as they end, before their phase's."""
    phases: dict[str, str] = {}
    for name, worker in run.workers.items():
        phase = phase_of(name)
        if phase is None or worker.result is not None:
            continue
        round = name.split(":")[1].partition(".")[0] if phase == "plan" else "1"
        phases[name] = phase if round == "1" else f"round {round}"
    return phases
