"""``Services``: what the parts of one run share, as one value passed down whole.

A run builds it once: its id, tracer and budget, the locks and slots that bound its
calls, who decides on calls that need approval, the run's guards and judge, the
long-term memory, the models that write summaries, and where its workers run. Each
worker is given it whole, its own part of the run's store (:class:`WorkerStore`: its
checkpoint, journal and approval log) set in ``store`` (:meth:`Services.kept_in`).
A constructor takes what is its own (a role, a model, a name) and this value; the
two calls everything goes through are composed from it (:mod:`runtime.calls`).

``Services()`` is what a worker run on its own has: a budget of its own with no
limits, a tracer that logs only to a configured structlog, nothing kept, no approver
(a call that needs approval is denied: it has nowhere to wait).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import msgspec

from runtime import Budget, Journal, LockTable, Memory, Model, Tracer
from runtime.limits import Slots
from runtime.tools.approvals import ApprovalLog, Approver, MemoryApprovalLog
from runtime.tools.journal import MemoryJournal, OnUnknown
from runtime.value import Value
from workers.context import Compaction
from workers.guards import Judge, ResolvedGuards
from workers.state import Checkpoint, LoopState

__all__ = ["MemoryStore", "Services", "WorkerStore"]


class WorkerStore(Checkpoint, Journal, Protocol):
    """One worker's part of a stored run: its checkpoint (its state every turn), its
    journal of side-effecting calls, and its log of calls asked about and their
    decisions (``approvals``; None: nothing keeps them)."""

    @property
    def approvals(self) -> ApprovalLog | None: ...


class MemoryStore(MemoryJournal):
    """A worker's store held in memory (tests, a process that resumes its own
    workers): its journal, its approval log, and the last state its loop saved.

    Args:
        on_unknown: What to do about a call with an intent and no outcome.
        scope: Its calls' idempotency keys' scope (default: one of its own).
    """

    def __init__(self, on_unknown: OnUnknown = "tell", *, scope: str | None = None) -> None:
        super().__init__(on_unknown, scope=scope)
        self.approvals = MemoryApprovalLog()
        self.state: LoopState | None = None

    def save(self, state: LoopState) -> None:
        self.state = state

    async def flush(self) -> None:
        """Nothing to wait for: it is kept as it is saved."""


class Services(Value, frozen=True, kw_only=True):
    """What the parts of one run share, built once per run.

    Attributes:
        run_id: The run (None: a worker on its own).
        tracer: Receives every event of the run.
        budget: The run's spending and limits, shared by every worker (nested ones,
            sub-runs, judges and summaries too).
        locks: The lock table of ``exclusive`` tools, shared by every worker.
        tool_slots: Bounds the leaf tool calls in flight (None: unbounded).
        model_slots: Bounds the model calls in flight (the models given are bound by
            it already; a sub-run's models and a Ray backend read it).
        approver: Decides on calls that need approval (None: they wait in ``store``,
            or, with none, are denied).
        approval_timeout_s: Seconds a call waits for a decision before it is denied.
        cannot_wait: Why a call that needs approval cannot wait in ``store``'s log for
            a person's decision (the run's planner's and aggregator's calls: their
            approver decides them, or they are denied), which still keeps the decisions
            made; None: a call waits there (with no store, it is denied).
        guards: The run's own guards (its argument guards check every worker's calls).
        judge: Asks the roles that guards name as their judges.
        memory: The long-term memory of roles with ``memory:``.
        models: The run's models by name (those a role's ``compaction.model`` names
            write its summaries).
        store: This worker's part of the run's store (None: nothing is kept).
    """

    run_id: str | None = None
    tracer: Tracer = msgspec.field(default_factory=Tracer)
    budget: Budget = msgspec.field(default_factory=Budget)
    locks: LockTable = msgspec.field(default_factory=LockTable)
    tool_slots: Slots | None = None
    model_slots: Slots | None = None
    approver: Approver | None = None
    approval_timeout_s: float | None = None
    cannot_wait: str | None = None
    guards: ResolvedGuards = ResolvedGuards()
    judge: Judge | None = None
    memory: Memory | None = None
    models: Mapping[str, Model] = msgspec.field(default_factory=dict)
    store: WorkerStore | None = None

    def kept_in(self, store: WorkerStore | None) -> Services:
        """These services for one worker, its part of the run's store in ``store``."""
        return self if store is self.store else msgspec.structs.replace(self, store=store)

    def summarizer(self, compaction: Compaction | None) -> Model | None:
        """The model that writes the summaries of ``compaction``, when it names one of
        the run's models (None: the worker's own)."""
        named = compaction.model if compaction is not None else None
        return self.models.get(named) if named is not None else None

    def within(self, caller: Services) -> Services:
        """These services for a sub-run (a hive called as a tool) of ``caller``'s run:
        it spends its caller's budget and holds its locks and slots; its guards and
        memory are its own, but the caller's argument guards check its calls too (they
        check every call of the caller's run); and so is its approver, if it has one:
        else whoever decides for the caller decides for it (the person at the terminal
        of ``honeycomb run`` is asked about the sub-run's calls too), as for a nested
        worker."""
        own = self.approver is not None
        return msgspec.structs.replace(
            self,
            guards=self.guards.with_callers(caller.guards),
            budget=caller.budget,
            locks=caller.locks,
            tool_slots=caller.tool_slots,
            model_slots=caller.model_slots,
            approver=self.approver if own else caller.approver,
            approval_timeout_s=self.approval_timeout_s if own else caller.approval_timeout_s,
        )
