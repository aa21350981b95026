"""Agents as tools: a role's ``agent:ROLE`` tool runs a nested worker of ``ROLE`` on
the instruction the model gives; its answer is the call's observation.

The tools are made once, with the Executor's setups, and serve every run: a call
finds the run it belongs to in :data:`_current_run` (set by the run for its whole
life, so every task of the run sees it). The nested worker is one of the run's own:
its budget, limiters, exclusive locks, tracer, approver and store are the run's.
It is named after its call (``s1/call_1``; the planner's or the aggregator's, after
the name of the attempt that calls it: ``aggregate:0b7d44e2/call_1``), is kept in the
run store under that name, and a resumed run continues it: the caller's state
asking for the call is saved before the call runs (the tool is ``durable``), so a
resumed caller makes that very call again, and the nested worker goes on from its last
turn (or, if it had finished, its answer is given at once, as it is to a turn run again
in the same life).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Annotated, Any

from msgspec.structs import replace
from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from honeycomb.run.context import RunContext, unwaited
from honeycomb.run.events import WorkerFinished, WorkerStarted
from honeycomb.run.plan import Subtask
from honeycomb.run.result import SubtaskResult
from honeycomb.run.scheduler import stopped_error, stopped_status, why_stopped
from honeycomb.run.sub_runs import CANNOT_WAIT, NO_WAIT, asked_as, may_ask, nobody_decides
from runtime import BudgetExceeded, HoneycombError, ModelRetry, Tool, ToolContext
from runtime.errors import NotStarted
from runtime.events import event_time
from runtime.limits.budget import Budget
from runtime.limits.cut import run_cut
from runtime.limits.room import nested_work
from runtime.secrets import masked
from runtime.tools.approvals import ApprovalNeeded, Approver, NoApprover
from workers import LoopState, Role, WorkerError, WorkerResult
from workers.nesting import AGENT_PREFIX, agent_ref

if TYPE_CHECKING:
    from honeycomb.run.record import RunRecord
    from honeycomb.run.restore import Resumed
    from honeycomb.run.worker_record import WorkerRecord
    from honeycomb.trace.spans import SubRunSpans

__all__ = [
    "CANNOT_WAIT",
    "Instruction",
    "NestedRuns",
    "agent_tool",
    "agent_tools",
    "current_run",
    "may_ask",
    "nested_name",
    "nobody_decides",
]


class NestedRuns:
    """What one run's nested workers need of it: its context, its store record and
    what an earlier life of it left."""

    def __init__(
        self, context: Callable[[], RunContext], record: RunRecord | None, resumed: Resumed | None
    ) -> None:
        self._context = context
        self.record = record
        self.resumed = resumed
        # Nested workers paused for approval in this life, by name: the call that runs
        # one again once its calls are decided continues it from there.
        self._paused: dict[str, LoopState] = {}
        # The calls of callers not kept, by call id and caller: how many had it in this
        # life.
        self._unkept: dict[tuple[str, str], int] = {}
        # The kept nested workers cut off in this life (stored ``cancelled``, or
        # ``over_budget``), by name.
        self._cut: set[str] = set()
        # The kept nested workers that ended in this life, by name: a turn run again
        # (once a call beside theirs was decided) is answered as a resumed run is.
        self._ended: dict[str, WorkerResult] = {}
        # The planner's or the aggregator's worker running now, by its own name (its
        # role's): the name its agents are named after (phase_workers.phase_name).
        self._phases: dict[str, str] = {}

    @property
    def context(self) -> RunContext:
        """The run's context as it is now (a session's run is told its conversation
        as it plans)."""
        return self._context()

    def sub_run_spans(self) -> SubRunSpans | None:
        """Where the spans of the run's sub-runs (hives called as tools) go: into every
        recorder of its spans, its store's and its listeners' (a span recorder, an
        OpenTelemetry exporter given to ``on_event``), and, for a sub-run, where its
        own go; None when nothing records them."""
        from honeycomb.trace.spans import SubRunSpans  # loaded by the runs that call hives

        context = self.context
        spans = SubRunSpans.of(context.run_id, context.tracer.handlers, context.spans)
        return spans if spans.places else None

    def sub_run_context(self, caller: str, call_id: str) -> RunContext:
        """The run's context as the sub-run that the call ``call_id`` of its worker
        ``caller`` runs (a hive called as a tool) sees it. What it borrows of this run
        names the sub-run's workers as this run does (``CALLER/CALL/WORKER``, as its
        trace does), not as the sub-run does: the approver, who decides for a sub-run
        that has none of its own, is told of its calls so, in this run, and the budget
        reports its calls in flight so (a wall time that cuts them off names them), so
        that the sub-runs of two callers, whose workers have the same names in their
        own runs, are told apart. With no approver, its calls that need one are denied
        saying why (a sub-run keeps no store for them to wait in) and what to attach."""
        context = self.context
        services, prefix = context.services, f"{caller}/{call_id}/"
        approver = services.approver
        asked: Approver = NO_WAIT
        if approver is not None and not isinstance(approver, NoApprover):
            asked = asked_as(approver, context.run_id, prefix)
        named = replace(services, budget=services.budget.named(prefix), approver=asked)
        return replace(context, services=named)

    @contextmanager
    def active(self) -> Iterator[None]:
        """The agent tools called inside the block (in any task it starts) run their
        nested workers in this run."""
        token = _current_run.set(self)
        try:
            yield
        finally:
            _current_run.reset(token)

    @contextmanager
    def calling(self, worker: str, name: str) -> Iterator[None]:
        """Inside the block, the planner's or the aggregator's worker ``worker`` (its
        role's name) runs under ``name`` (:func:`~honeycomb.run.phase_names.phase_name`):
        the agents it calls are named after ``name``, and kept when it is."""
        self._phases[worker] = name
        try:
            yield
        finally:
            del self._phases[worker]

    async def call(self, role: str, instruction: str, ctx: ToolContext) -> str:
        """Run a nested worker of ``role`` on ``instruction`` for the call ``ctx``;
        its answer.

        Raises:
            ModelRetry: when the nested worker did not succeed (the call's error
                observation says why).
            ApprovalNeeded: when its calls wait in the run store for a decision.
            NotStarted: when an earlier life left it paused, and it cannot start again.
        """
        caller = ctx.worker or role
        caller = self._phases.get(caller, caller)
        if self.record is None or not self.record.keeps(caller):
            if caller in self._phases.values():  # its name is its attempt's own
                name = nested_name(caller, ctx.call_id)
                return await self._run(role, instruction, ctx, name, None, None)
            return await self._unkept_call(role, instruction, ctx, caller)
        name = nested_name(caller, ctx.call_id)
        resumed = self.resumed
        ended = self._ended.get(name)
        if ended is None and resumed is not None:
            before = resumed.finished.get(name)
            ended = before.worker if before is not None else None
        if ended is not None:  # it ended, in this life (a turn run again) or an earlier one
            return _answer(role, ended)
        state = self._paused.pop(name, None)
        if state is None and resumed is not None:
            state = resumed.states.get(name)
        # Kept as its caller is, turn by turn: a resumed run continues it.
        record = self.record.worker(name, len(state.messages) if state else 0)
        return await self._run(role, instruction, ctx, name, state, record)

    async def _unkept_call(self, role: str, instruction: str, ctx: ToolContext, caller: str) -> str:
        """A call of a caller that is not kept (a worker of a run without a store, but
        the planner's and the aggregator's, named after their attempt: :meth:`call`):
        its nested worker is not either (it cannot wait for a decision, nor be
        resumed), and is named anew when its name was taken in this life or an earlier
        one, its caller's call ids starting over (``s1/call_1``, then ``s1/call_1~2``;
        in the run's second life ``s1/call_1@2``, then ``s1/call_1@2~2``)."""
        call_id = ctx.call_id
        taken = self._unkept[call_id, caller] = self._unkept.get((call_id, caller), 0) + 1
        life = self.record.life if self.record is not None else 1
        if life > 1:  # an earlier life's trace has its own
            call_id = f"{call_id}@{life}"
        if taken > 1:
            call_id = f"{call_id}~{taken}"
        return await self._run(role, instruction, ctx, nested_name(caller, call_id), None, None)

    async def _keep(self, outcome: SubtaskResult) -> None:
        """Keep the outcome of a kept nested worker in the store, and, once final, for
        a call of it made again in this life (as a resumed run finds it there)."""
        from honeycomb.run.record import finished, unfinished  # a run with a store's

        assert self.record is not None
        assert outcome.worker is not None
        await self.record.subtask_finished(outcome)
        if finished(outcome) and not unfinished(outcome.worker.exception):
            self._ended[outcome.subtask.id] = outcome.worker

    async def _run(
        self,
        role: str,
        instruction: str,
        ctx: ToolContext,
        name: str,
        state: LoopState | None,
        record: WorkerRecord | None,
    ) -> str:
        """Run the nested worker ``name`` of ``role`` (from ``state``, kept in
        ``record`` if given) for the call ``ctx``; its answer."""
        ctx_run = self.context
        if record is not None and not record.waits:  # under the planner or the aggregator
            ctx_run = replace(ctx_run, services=unwaited(ctx_run.services))
        try:
            await ctx_run.crew.prepare([ctx_run.roles[role]])  # its MCP tools, as any worker's
        except HoneycombError as exc:
            if state is None:
                raise  # a fresh one: its caller's model reads why, as for any tool
            raise NotStarted(name, str(exc)) from exc  # its caller stops with it, unfinished
        if record is not None and (self.resumed is not None or name in self._cut):
            await record.going_on()  # a call of it (an earlier life's) may have cut it off
        worker = ctx_run.worker(role, name=name, store=record)
        told = _Told(name, role, ctx_run, ctx)
        backend = ctx_run.backend  # where the run's workers run: its nested ones too
        shown = ctx_run.shown_to(role)
        try:
            async with nested_work():  # in its caller's room: it works there, its caller waits
                if backend is None:
                    told.started()
                    result = await worker.run(instruction, resume=state, conversation=shown)
                else:  # started once it has begun there (its role installed in an actor)
                    result = await backend.run_worker(
                        worker,
                        instruction,
                        inputs=None,
                        resume=state,
                        conversation=shown,
                        started=told.started,
                    )
        except asyncio.CancelledError:  # its call cut off (a time limit, a run that stops)
            # Stopped by a budget (the wall time too) as its caller is, or else cancelled.
            reason = _stopped_by(ctx_run.budget)
            if record is not None:  # the store says what the trace does
                record.cut_off(stopped_status(reason))
                self._cut.add(name)
            if told.began is not None:  # one cut off before it began never started
                told.ended(stopped_status(reason), stopped_error(reason))
            raise
        outcome = SubtaskResult(
            subtask=Subtask(id=name, role=role, instruction=instruction),
            status=result.status,
            worker=result,
            error=result.error,
            duration_s=told.elapsed_s(),
        )
        try:
            if record is not None:
                await self._keep(outcome)  # durable before it is reported
        finally:  # reported even if its call is cut off as it is kept: it has ended
            told.ended(result.status, result.error)
        if result.status == "waiting" and record is not None:
            # Its calls wait in the store: its caller waits with it, and the call made
            # again (in this life, or a resumed run) continues it from there, decided.
            self._paused[name] = result.state
            raise ApprovalNeeded(result.pending)
        return _answer(role, result)


def _not_blank(text: str) -> str:
    if not text.strip():  # as a run's task: a worker would be asked to do nothing
        raise PydanticCustomError(
            "string_too_short", "String should have at least 1 character other than blanks"
        )
    return text


Instruction = Annotated[
    str,
    Field(min_length=1, description="What the worker is to do, said in full."),
    AfterValidator(_not_blank),
]
"""The one argument of an agent tool (or a hive's): an empty or blank one is the model's
to mend."""

_current_run: ContextVar[NestedRuns | None] = ContextVar("honeycomb_nested_runs", default=None)
"""The run whose task (or one of its tasks) is running now."""


def current_run() -> NestedRuns | None:
    """The run the current task is part of, if any (for a tool that starts a sub-run
    under its budget: a hive called as a tool)."""
    return _current_run.get()


def nested_name(caller: str, call_id: str) -> str:
    """The name of the nested worker a call of ``caller`` runs: ``caller/call_id``
    (unique in the run, as call ids are in a conversation), shortened by a hash of
    its call when that is longer than a worker name may be (64 characters)."""
    name = f"{caller}/{call_id}"
    if len(name) <= 64:
        return name
    digest = hashlib.blake2b(name.encode(), digest_size=6).hexdigest()
    return f"{caller[:51]}/{digest}"


class _Told:
    """What is told of a nested worker, run for the call ``ctx``: its start, once it
    starts (at once in this process; on a backend, once it has begun there, its role
    installed in an actor: not its wait for that), and its end."""

    def __init__(self, name: str, role: str, run: RunContext, ctx: ToolContext) -> None:
        self._name, self._role, self._run, self._ctx = name, role, run, ctx
        self.began: float | None = None  # when it started (time.perf_counter)

    def started(self) -> None:
        """It starts now, or, on the run's backend, when it began there, which
        :data:`~runtime.events.told_at` says (told once: not again as it goes on in
        another actor)."""
        if self.began is not None:
            return
        self.began = time.perf_counter() - (time.time() - event_time())
        if self._run.tracer.enabled:
            ctx = self._ctx
            self._run.tracer.emit(
                WorkerStarted(
                    worker=self._name,
                    run_id=self._run.run_id,
                    role=self._role,
                    parent=ctx.worker,
                    call_id=ctx.call_id,
                    turn=ctx.turn,
                )
            )

    def elapsed_s(self) -> float:
        """How long it has run (0 if it never started)."""
        return 0.0 if self.began is None else time.perf_counter() - self.began

    def ended(self, status: str, error: WorkerError | None) -> None:
        """It ended (``status``); one that ended before it started (its role could not
        be set up in an actor, say) is told started first, under its call."""
        self.started()
        if self._run.tracer.enabled:
            ctx = self._ctx
            self._run.tracer.emit(
                WorkerFinished(
                    worker=self._name,
                    run_id=self._run.run_id,
                    role=self._role,
                    status=status,
                    duration_s=self.elapsed_s(),
                    error=str(error) if error is not None else None,
                    parent=ctx.worker,
                    call_id=ctx.call_id,
                    turn=ctx.turn,
                )
            )


def _stopped_by(budget: Budget) -> HoneycombError | None:
    """What stopped the run as it cut a nested worker off: what stopped its worker
    phase (a budget, the failure policy), or its wall time (as its planner or its
    aggregator worked); None when the call alone ended (its time limit)."""
    reason, cut, wall = why_stopped(), run_cut.get(), budget.limits.wall_time_s
    if reason is None and cut is not None and cut.used is not None and wall is not None:
        return budget.refusal(BudgetExceeded("wall_time_s", wall, cut.used))
    return reason


def _answer(role: str, result: WorkerResult) -> str:
    """The nested worker's answer, or why it has none (a :class:`ModelRetry`, the
    caller's to read), every secret masked, as a subtask hands on its own to another
    model; a budget it ran out of is the run's: it stops its caller too."""
    if result.ok:
        return result.handed_on
    if isinstance(result.exception, BudgetExceeded):
        raise result.exception
    if result.status == "waiting":
        raise ModelRetry(
            f"the {role} worker waits for a person's approval of a call: it cannot "
            "answer now; go on without it"
        )
    why = masked(str(result.error))  # a tool's or a server's message may quote one
    raise ModelRetry(f"the {role} worker did not answer ({result.status}): {why}")


def agent_tool(role: Role) -> Tool[..., Any]:
    """The tool that runs a nested worker of ``role``: one argument, the instruction;
    named after the role, described by its description."""
    name = role.name

    async def call(instruction: Instruction, context: ToolContext) -> str:
        runs = _current_run.get()
        if runs is None:
            raise ModelRetry(f"the {name} worker can be called only inside an Executor's run")
        return await runs.call(name, instruction, context)

    about = role.description or f"Ask the {name} worker."
    return Tool(
        call,
        name=name,
        description=f"{about} Give it an instruction; its answer comes back.",
        durable=True,
        pinned=True,  # a nested worker of this process's run
        nests=True,  # its nested worker's calls hold the run's tool slots, not this one
    )


def agent_tools(role: Role, roles: Mapping[str, Role]) -> list[Tool[..., Any]]:
    """The agent tools ``role`` names (``agent:ROLE``), of the roles in ``roles``
    (a name that is none of them is skipped: the nesting check reports it), each once,
    as a tool the role lists twice is."""
    found = dict.fromkeys(agent_ref(ref) for ref in role.tools if ref.startswith(AGENT_PREFIX))
    return [agent_tool(roles[name]) for name in found if name is not None and name in roles]
