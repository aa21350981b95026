"""``RunContext``: what one run shares between its planner, workers and aggregator."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

import msgspec
from pydantic import BaseModel

from honeycomb.run.conversation import Conversation, SessionMode, conversation_shown
from honeycomb.run.crew import Crew
from honeycomb.run.policy import Policy
from runtime import Budget, Tracer
from runtime.tools.approvals import NoApprover
from runtime.value import Value
from workers import LoopState, Role, Worker, WorkerResult
from workers.services import Services, WorkerStore

if TYPE_CHECKING:
    from honeycomb.trace.spans import SpanRecorder, SubRunSpans

__all__ = [
    "NOT_KEPT",
    "NOT_WAITING",
    "Backend",
    "RunContext",
    "unwaited",
    "with_default_instructions",
]


class Backend(Protocol):
    """Where a run's subtask workers run, when not in the run's own event loop (the
    Ray backend): the run itself (its plan, budget, locks, store, events) stays here."""

    async def run_worker(
        self,
        worker: Worker,
        task: str,
        *,
        inputs: Mapping[str, str] | None,
        resume: LoopState | None,
        conversation: str = "",
        keep: bool = True,
        started: Callable[[], None] | None = None,
    ) -> WorkerResult:
        """Run ``worker`` on ``task``, as ``worker.run`` would (its answer kept in its
        role's memory as it ends unless not ``keep``), its services (its budget, locks,
        store ...) served from here. ``started`` is called as the worker starts, once
        it has room (not while it waits for that: for the pool to start, room in it,
        its role installed), and at most once: its span and timings begin then (when
        :data:`~runtime.events.told_at` says, told later). The result's ``started_at``
        and ``duration_s`` are its work's, in this process's clock: its span ends then."""
        ...


class RunContext(Value, frozen=True, kw_only=True):
    """One run as its planner, scheduler and aggregator see it; they make its workers.

    Attributes:
        services: What the parts of the run share (its id, budget, tracer, locks,
            slots, approver, guards, judge ...), built once for the run.
        crew: The roles, their models (under the run's model slots) and setups; await
            ``crew.prepare`` before :meth:`worker` makes a worker of a role that
            names MCP tools, or a catalog lists the roles' tools.
        policy: The Executor's policy: plan size and attempts, the output limit of
            model calls whose role sets none.
        backend: Where its subtask workers run (None: here, in the run's event loop).
        spans: Records the run's spans, if it keeps them (a sub-run's go there too:
            its own are where its caller's are).
        conversation: The session's conversation before this run's message, when it
            answers one (:mod:`honeycomb.run.session`).
        aggregator: The role that merges the run's results (None: none does, a
            function or ``concat`` merges them), which a planner gives no subtask.
        kept: Whether the run keeps a store, where its subtasks' workers' calls (and
            their nested workers') wait for decisions. Its other workers' cannot
            (its planner's and aggregator's, and the agents they call): with no
            approver, their calls are denied saying so (:data:`NOT_KEPT`).
        holds_answers: Whether its answer is made of its subtasks' answers (``concat``,
            a function) and its output guards check it: their answers are kept in
            their roles' memory once the guards passed it, not as each ends.
    """

    services: Services
    crew: Crew
    policy: Policy
    backend: Backend | None = None
    spans: SpanRecorder | SubRunSpans | None = None
    conversation: Conversation | None = None
    aggregator: str | None = None
    kept: bool = False
    holds_answers: bool = False

    def shown_to(self, role: str) -> str:
        """What a worker of ``role`` (a subtask's, a nested agent's) is shown of the
        session's conversation after its instruction: as much as its role's
        ``session:`` says (none by default)."""
        return conversation_shown(self.conversation_for(self.roles.get(role), "none"))

    def conversation_for(self, role: Role | None, default: SessionMode) -> str:
        """What ``role`` sees of the session's conversation (its ``session:``, else
        ``default``): '' outside a session."""
        if self.conversation is None:
            return ""
        mode = role.session if role is not None and role.session is not None else default
        return self.conversation.for_mode(mode)

    @property
    def run_id(self) -> str:
        return self.services.run_id or ""

    @property
    def budget(self) -> Budget:
        return self.services.budget

    @property
    def tracer(self) -> Tracer:
        return self.services.tracer

    @property
    def roles(self) -> dict[str, Role]:
        return self.crew.roles

    def worker(
        self,
        role: str | Role,
        *,
        name: str | None = None,
        output_type: type[BaseModel] | None = None,
        store: WorkerStore | None = None,
        output_retries: int | None = None,
        max_output_tokens: int | None = None,
        streams_unvalidated: bool = False,
    ) -> Worker:
        """A worker for ``role`` (a name, or a Role) given the run's services (and, for
        a stored run, its part of the store: ``store``); its answers sent back for
        failing ``output_type`` at most ``output_retries`` times, when that is fewer
        than its role's own. Its calls' output limit is its role's, else
        ``max_output_tokens`` (what its answers can need), else the policy's. The text
        of an answer its output schema checks is held until it validates, unless
        ``streams_unvalidated`` (a planner's: its progress shows)."""
        found = self.crew.roles[role] if isinstance(role, str) else role
        setup = self.crew.setup_for(found, output_type, self.services.memory)
        settings = setup.settings
        if output_retries is not None and output_retries < settings.output_retries:
            settings = msgspec.structs.replace(settings, output_retries=output_retries)
        limit = max_output_tokens or self.policy.max_output_tokens
        if found.max_output_tokens is None and settings.max_output_tokens != limit:
            settings = msgspec.structs.replace(settings, max_output_tokens=limit)
        if streams_unvalidated:
            settings = msgspec.structs.replace(settings, streams_unvalidated=True)
        if settings is not setup.settings:
            setup = msgspec.structs.replace(setup, settings=settings)
        services = self.services.kept_in(store)
        if store is None and self.kept:
            services = unwaited(services)
        return Worker(setup, self.crew.model_for(found), name=name or found.name, services=services)


NOT_WAITING = (
    "a call of the run's planner or aggregator (or of an agent either calls) cannot wait "
    "for a decision: a run waits for one only in its subtasks' workers"
)
"""Why a call of a stored run's worker that is not its subtask's (its planner's, its
aggregator's, an agent's they call) cannot wait in the store: told in its denial when
nobody decides it (an approver that decides nothing)."""

NOT_KEPT = (
    f"no approver is attached, and {NOT_WAITING}. Attach an approver "
    "(Executor(approver=...), or run it on a terminal: honeycomb run asks there)"
)
"""Why such a call is denied when the run has no approver."""


_not_kept = NoApprover(NOT_KEPT)
"""The approver of a stored run's worker that is not kept, when the run has none."""


def unwaited(services: Services) -> Services:
    """``services`` for a worker of a stored run whose calls cannot wait in its store
    (its planner's, its aggregator's, an agent's they call): the run's approver decides
    them, or they are denied (:data:`NOT_KEPT`); one that decides nothing denies them
    too (:data:`NOT_WAITING`)."""
    approver = services.approver if services.approver is not None else _not_kept
    return msgspec.structs.replace(services, approver=approver, cannot_wait=NOT_WAITING)


def with_default_instructions(role: Role, instructions: str) -> Role:
    """The role, given ``instructions`` when it has none of its own."""
    if role.instructions:
        return role
    return role.model_copy(update={"instructions": instructions})
