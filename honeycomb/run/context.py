"""``RunContext``: what one run shares between its planner, workers and aggregator."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

import anyio
import msgspec
from pydantic import BaseModel

from runtime import Budget, Journal, LockTable, Model, Tracer
from runtime.tools.approvals import ApprovalLog, Approver
from runtime.value import Value
from workers import Checkpoint, LoopState, Role, Worker, WorkerResult, WorkerSetup
from workers.guards import Judge, ResolvedGuards
from workers.state import DEFAULT_OUTPUT_TOKENS

if TYPE_CHECKING:
    from honeycomb.run.worker_record import WorkerRecord
    from honeycomb.trace.spans import SpanRecorder

__all__ = ["Backend", "RunContext", "with_default_instructions"]


class Backend(Protocol):
    """Where a run's subtask workers run, when not in the run's own event loop (the
    Ray backend): the run itself (its plan, budget, locks, store, events) stays here."""

    async def run_worker(
        self,
        context: RunContext,
        worker: Worker,
        task: str,
        *,
        inputs: Mapping[str, str] | None,
        resume: LoopState | None,
        record: WorkerRecord | None,
    ) -> WorkerResult:
        """Run ``worker`` (made by ``context``) on ``task``, as ``worker.run`` would;
        ``record`` is its checkpoint and journal, for a stored run."""
        ...


class RunContext(Value, frozen=True, kw_only=True):
    """One run's shared state; planners and aggregators use it to make workers.

    Attributes:
        run_id: The run's id.
        roles: Every role of the Executor, by name.
        max_subtasks: Largest plan accepted from a planner model (a plan the caller
            gives, or a splitter function makes, is not bounded).
        plan_attempts: Times a planner may try for a valid plan.
        budget: The run's budget, shared by all its workers.
        tracer: The run's event tracer.
        model_for: The model a role thinks with.
        summarizer_for: The model that writes a role's summaries, when it is not the
            role's own (its ``compaction.model``).
        prepare: Gives roles their tools from MCP servers (starting those servers
            when first needed): await it before :meth:`worker` makes a worker of a
            role that names MCP tools, or a catalog lists the roles' tools.
        approver: Decides on calls that need approval (None: they wait in the store).
        approval_timeout_s: Seconds a call waits for a decision before it is denied.
        guards: The run's own guards (its argument guards check every worker's calls).
        judge: Asks the roles that guards name as their judges, under the run's budget.
        model_limiter: Bounds the model calls in flight (the Executor's, or the
            calling run's for a sub-run; ``model_for`` already applies it).
        backend: Where subtask workers run (None: here, in the run's event loop).
        max_output_tokens: The output limit of every model call whose role sets none
            (the policy's ``max_output_tokens``).
        spans: Records the run's spans, if it keeps them (a sub-run's go there too).
    """

    run_id: str
    roles: Mapping[str, Role]
    max_subtasks: int
    plan_attempts: int
    budget: Budget
    tracer: Tracer
    locks: LockTable
    tool_limiter: anyio.CapacityLimiter | None
    model_for: Callable[[Role], Model]
    setup_for: Callable[[Role, type[BaseModel] | None], WorkerSetup]
    summarizer_for: Callable[[Role], Model | None] = lambda role: None
    prepare: Callable[[Sequence[Role]], Awaitable[None]] = msgspec.field(
        default_factory=lambda: _nothing_to_prepare
    )
    approver: Approver | None = None
    approval_timeout_s: float | None = None
    guards: ResolvedGuards = ResolvedGuards()
    judge: Judge | None = None
    backend: Backend | None = None
    model_limiter: anyio.CapacityLimiter | None = None
    max_output_tokens: int = DEFAULT_OUTPUT_TOKENS
    spans: SpanRecorder | None = None

    def worker(
        self,
        role: str | Role,
        *,
        name: str | None = None,
        output_type: type[BaseModel] | None = None,
        checkpoint: Checkpoint | None = None,
        journal: Journal | None = None,
        approvals: ApprovalLog | None = None,
        output_retries: int | None = None,
        max_output_tokens: int | None = None,
    ) -> Worker:
        """A worker for ``role`` (a name, or a Role) wired to this run's budget, locks,
        limiter and tracer (and, for a stored run, its checkpoint and journal); its
        answers sent back for failing ``output_type`` at most ``output_retries`` times,
        when that is fewer than its role's own. Its calls' output limit is its role's,
        else ``max_output_tokens`` (what its answers can need), else the run's."""
        found = self.roles[role] if isinstance(role, str) else role
        setup = self.setup_for(found, output_type)
        settings = setup.settings
        if output_retries is not None and output_retries < settings.output_retries:
            settings = msgspec.structs.replace(settings, output_retries=output_retries)
        limit = max_output_tokens or self.max_output_tokens
        if found.max_output_tokens is None and settings.max_output_tokens != limit:
            settings = msgspec.structs.replace(settings, max_output_tokens=limit)
        if settings is not setup.settings:
            setup = msgspec.structs.replace(setup, settings=settings)
        return Worker(
            setup,
            self.model_for(found),
            name=name or found.name,
            locks=self.locks,
            tool_limiter=self.tool_limiter,
            budget=self.budget,
            tracer=self.tracer,
            run_id=self.run_id,
            checkpoint=checkpoint,
            journal=journal,
            summarizer=self.summarizer_for(found),
            approver=self.approver,
            approvals=approvals,
            approval_timeout_s=self.approval_timeout_s,
            guards=self.guards,
            judge=self.judge,
        )


async def _nothing_to_prepare(roles: Sequence[Role]) -> None:
    """No role of this run names MCP tools."""


def with_default_instructions(role: Role, instructions: str) -> Role:
    """The role, given ``instructions`` when it has none of its own."""
    if role.instructions:
        return role
    return role.model_copy(update={"instructions": instructions})
