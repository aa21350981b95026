"""``Worker``: a role, a model and tools, running one subtask to a ``WorkerResult``."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal

from msgspec.structs import replace
from pydantic import BaseModel, ConfigDict, Field

from runtime import (
    BudgetExceeded,
    ConfigError,
    Dispatcher,
    DispatchPolicy,
    HoneycombError,
    Memory,
    Message,
    Model,
    ModelRequest,
    SystemMessage,
    Tool,
    ToolRegistry,
    Transcript,
    Usage,
    UserMessage,
    logs,
)
from runtime.concurrency import require_asyncio
from runtime.events import Caller
from runtime.limits.spending import paid_by, paying
from runtime.secrets import masked
from runtime.tools.approval_gate import ApprovalGate
from runtime.tools.approvals import (
    ApprovalRule,
    PendingApproval,
)
from runtime.value import Value
from workers.calls import tool_calls
from workers.context import ContextWindow, checked_counter
from workers.guards import GuardRunner, ResolvedGuards, resolve_guards, tripped
from workers.loop import AgentLoop
from workers.memory import (
    MemorySpending,
    keep_result,
    memory_tools,
    recall_at_start,
    recall_room,
)
from workers.role import Role
from workers.services import Services
from workers.state import (
    DEFAULT_OUTPUT_TOKENS,
    Failed,
    Final,
    LoopSettings,
    LoopState,
    Waiting,
)

__all__ = [
    "CUT_OFF_NOTE",
    "DEPENDENCY_HEADER",
    "Worker",
    "WorkerError",
    "WorkerResult",
    "WorkerSetup",
    "format_task",
    "handed_on",
]

WorkerStatus = Literal["ok", "failed", "over_budget", "waiting"]


class WorkerError(BaseModel):
    """Why a worker failed: the error's type name and message."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    type: str
    message: str

    def __str__(self) -> str:
        return f"{self.type}: {self.message}"


class WorkerResult(BaseModel):
    """What one worker produced.

    Attributes:
        worker: The worker's name (the subtask id under an Executor).
        role: The role it played.
        status: ``ok``, ``failed``, or ``over_budget`` (its next model call would
            have gone past the run's budget), or ``waiting`` (calls wait for a
            person's approval: ``pending``; a resumed run continues it).
        output: The answer: text, or the validated output-schema object.
        text: The answer as text.
        transcript: The whole conversation, system prompt and task first.
        usage: Tokens, model calls and tool calls its model calls and tool calls
            spent (a failed call's included); what its memory's embeddings spent
            counts in the run's usage and its trace, not here.
        turns: Model calls made.
        started_at: Wall-clock start (``time.time()``).
        duration_s: How long it ran.
        error: Why it failed, when it did.
        pending: The calls waiting for approval, when it is ``waiting``.
        cut_off: Its answer ended at the output limit (the model's ``finish_reason``
            was ``length``): ``text`` is the answer as far as it goes. Raise the role's
            or the policy's ``max_output_tokens``, or ask for a shorter answer.
    """

    model_config = ConfigDict(defer_build=True, frozen=True, arbitrary_types_allowed=True)

    worker: str
    role: str
    status: WorkerStatus
    output: Any = None
    text: str = ""
    transcript: Transcript = Field(default_factory=Transcript)
    usage: Usage = Field(default_factory=Usage)
    turns: int = 0
    started_at: float = 0.0
    duration_s: float = 0.0
    error: WorkerError | None = None
    pending: tuple[PendingApproval, ...] = ()
    cut_off: bool = False
    exception: BaseException | None = Field(default=None, exclude=True, repr=False)
    """The exception behind ``error``, for callers that want to re-raise it."""
    state: Any = Field(default=None, exclude=True, repr=False)
    """The loop state a ``waiting`` worker continues from, once its calls are decided."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def handed_on(self) -> str:
        """The answer as another model is given it (the caller's of a nested worker,
        a dependent subtask's, the aggregator's): :func:`handed_on`."""
        return handed_on(self.text, self.cut_off)


CUT_OFF_NOTE = "[cut off at its output limit]"
"""Ends an answer that was cut off, as another model is given it."""


def handed_on(text: str, cut_off: bool) -> str:
    """An answer as another model is given it: ``text``, every secret masked (a tool's
    result or a server's message may have put one in it), followed by a note that it
    is incomplete when it was ``cut_off`` at its output limit, so that no model takes a
    part for the whole."""
    shown = masked(text)
    return f"{shown} {CUT_OFF_NOTE}" if cut_off else shown


class WorkerSetup(Value, frozen=True, kw_only=True):
    """What workers of one role need, resolved once and shared by all of them.

    Attributes:
        role: The role.
        tools: The role's tools, resolved.
        policy: How the tools are dispatched (cap, timeout).
        settings: How the loop runs (turns, output type, window).
        system_prompt: The role's system prompt.
        memory: The long-term memory its ``memory:`` uses (None: it has none).
        approvals: Which of its calls need a person's approval.
        guards: Its role's guards, resolved.
    """

    role: Role
    tools: ToolRegistry
    policy: DispatchPolicy
    settings: LoopSettings
    system_prompt: str
    memory: Memory | None = None
    approvals: ApprovalRule = ApprovalRule()
    guards: ResolvedGuards = ResolvedGuards()

    @classmethod
    def of(
        cls,
        role: Role,
        tools: ToolRegistry | Sequence[Tool[Any, Any] | Callable[..., Any]] | None = None,
        output_type: type[BaseModel] | None = None,
        memory: Memory | None = None,
    ) -> WorkerSetup:
        """Resolve a role: if it names tools, look them up in ``tools`` (import paths
        need none); if it names none, it gets exactly ``tools``.

        Raises:
            UnknownToolError: for a tool name that cannot be found.
            ConfigError: for an import path or output schema that cannot be imported,
                or a role with ``memory:`` and no ``memory``.
        """
        given = tools if isinstance(tools, ToolRegistry | None) else ToolRegistry(tools)
        return cls.resolved(
            role,
            role.resolve_tools(given) if role.tools else (given or ToolRegistry()),
            output_type or role.resolve_output(),
            memory,
        )

    @classmethod
    def resolved(
        cls,
        role: Role,
        tools: ToolRegistry,
        output_type: type[BaseModel] | None,
        memory: Memory | None = None,
    ) -> WorkerSetup:
        """A role's setup from its tools and output type as resolved already: nothing
        is looked up or imported again (an Executor resolves its roles once). A role
        whose ``memory:`` says ``remember`` gets the memory's tools too.

        Raises:
            ConfigError: for a role with ``memory:`` and no ``memory``, or a guard or
                a token counter whose import path does not import a callable.
            DuplicateToolError: when one of its tools is named ``recall`` or ``remember``.
        """
        uses = role.memory
        if uses is not None and memory is None:  # the Executor names the role, as for all
            raise ConfigError(
                "memory: is set, but there is no memory to use: give the hive a top-level "
                "memory: (or the Executor or Worker memory=...)"
            )
        if uses is not None and memory is not None and uses.remember:
            tools = ToolRegistry([*tools, *memory_tools(memory, uses, role.name)])
        return cls(
            role=role,
            tools=tools,
            policy=DispatchPolicy(
                max_concurrency=role.concurrency, default_timeout=role.tool_timeout
            ),
            settings=LoopSettings(
                max_turns=role.max_turns,
                max_repeats=role.max_repeats,
                output_type=output_type,
                output_retries=role.output_retries,
                window=ContextWindow(max_chars=role.max_context_chars),
                model_timeout=role.model_timeout,
                max_output_tokens=role.max_output_tokens or DEFAULT_OUTPUT_TOKENS,
                compaction=role.compaction.resolved() if role.compaction is not None else None,
            ),
            system_prompt=role.system_prompt,
            memory=memory if uses is not None else None,
            approvals=(
                role.approvals.rule(role.name)
                if role.approvals is not None
                else ApprovalRule(owner=role.name)
            ),
            guards=resolve_guards(role.guards),
        )

    def retyped(self, output_type: type[BaseModel] | None) -> WorkerSetup:
        """The same setup, its answers of another output type."""
        return replace(self, settings=replace(self.settings, output_type=output_type))


class Worker:
    """Runs subtasks for one role.

    Args:
        role: What the worker is for, its limits and tool names; or a
            :class:`WorkerSetup` made from a role once, for many workers.
        model: The model it thinks with.
        tools: If the role names tools, the registry to find them in (import paths
            need none); if it names none, exactly these tools.
        name: Worker name in events and results (default: the role's name).
        output_type: Overrides the role's ``output_schema``.
        services: What it shares with the rest of its run (its budget, tracer, locks,
            approver, store ...; see :class:`~workers.services.Services`). Default: a
            worker on its own.
    """

    # benchmark E: one per worker (A at N=10000 has 10,000 at once), no instance dict
    __slots__ = ("_dispatcher", "_guards", "model", "name", "role", "services", "setup", "tools")

    def __init__(
        self,
        role: Role | WorkerSetup,
        model: Model,
        *,
        tools: ToolRegistry | Sequence[Tool[Any, Any] | Callable[..., Any]] | None = None,
        name: str | None = None,
        output_type: type[BaseModel] | None = None,
        services: Services | None = None,
    ) -> None:
        kept = self.services = services if services is not None else Services()
        setup = (
            role
            if isinstance(role, WorkerSetup)
            else WorkerSetup.of(role, tools, output_type, kept.memory)
        )
        self.setup = setup
        self.role = setup.role
        self.model = model
        self.name = name or setup.role.name
        self.tools = setup.tools
        run_id, tracer, store = kept.run_id, kept.tracer, kept.store
        own = setup.guards.with_arguments(kept.guards.arguments)
        self._guards: GuardRunner | None = None
        if not own.empty:
            self._guards = GuardRunner(
                own,
                tracer=tracer,
                judge=kept.judge,
                role=setup.role.name,
                worker=self.name,
                run_id=run_id,
                budget=kept.budget,
            )
        log = store.approvals if store is not None else None
        gate = None
        if log is not None or _may_ask(setup):  # a stored run's log: its decisions stand
            gate = ApprovalGate(
                setup.approvals,
                approver=kept.approver,
                log=log,
                worker=self.name,
                role=setup.role.name,
                run_id=run_id,
                timeout_s=kept.approval_timeout_s,
                tracer=tracer,
                cannot_wait=kept.cannot_wait,
            )
        caller = Caller(worker=self.name, run_id=run_id, tracer=tracer)
        calls = tool_calls(
            setup.policy,
            caller,
            setup.tools,
            guard=self._guards if own.arguments else None,
            gate=gate,
            locks=kept.locks,
            slots=kept.tool_slots,
            journal=store,
            budget=kept.budget,
        )
        self._dispatcher = Dispatcher(
            setup.tools,
            policy=setup.policy,
            calls=calls,
            caller=caller,
            journal=store,
            approvals=log,
        )

    @property
    def summarizer(self) -> Model | None:
        """The model that writes its summaries, when it is not its own."""
        return self.services.summarizer(self.setup.settings.compaction)

    def __repr__(self) -> str:
        return f"Worker({self.name!r}, role={self.role.name!r}, model={self.model!r})"

    async def run(
        self,
        task: str,
        *,
        inputs: Mapping[str, str] | None = None,
        resume: LoopState | None = None,
        conversation: str = "",
        keep: bool = True,
    ) -> WorkerResult:
        """Run one subtask, from the start or from a state saved by its checkpoint.
        Never raises for a failure (the result says ``failed``); cancellation
        propagates. Its input guards read what it is told; once they pass it, a role
        with ``memory:`` recalls what it holds for ``task`` (not when resumed: the
        recall is in the saved conversation), and they read what it recalled before
        its first model call.

        Args:
            task: The subtask's instruction.
            inputs: The results of the subtasks it depends on, shown after it (its
                input guards read them too).
            resume: The state it continues from.
            conversation: What it is shown of a session's conversation, after
                ``task`` (its input guards read it too; its memory recall does not:
                it searches for the task alone).
            keep: Keep its answer in its role's memory (``store_result``) as it ends;
                False: its caller does, with :meth:`keep`, once something after it
                (a run's output guards) accepts the answer.

        Raises:
            UnsupportedEventLoop: at once, under another async library than asyncio
                (no failure of the subtask: it was never run).
        """
        # Here, before its input guards and memory recall run: its loop's own check
        # comes after them, and would be caught below as the subtask's failure.
        require_asyncio("Worker.run")
        told = f"{task}\n\n{conversation}" if conversation else task
        prompt = resume.task if resume is not None else format_task(told, inputs or {})
        loop = self._loop()
        started_at, started = time.time(), time.perf_counter()
        bound = logs.bind(run_id=self.services.run_id, worker=self.name)
        # Its memory's calls (its recall, its tools') are paid by it, wherever made.
        paid = paying.set(self._memory_payer()) if self.setup.memory is not None else None
        try:
            if resume is None:  # a resumed worker passed its input guards before
                # All it is told: a subtask's dependencies' results too, which a model
                # wrote (what one of them read may tell it to ignore its instructions).
                # The instruction first: one refused is searched for in no memory.
                refused = await self._refused(prompt)
                recalled = await self._recalled(task, prompt) if refused is None else None
                if recalled is not None:  # text earlier runs kept, which models wrote
                    refused = await self._refused(_recalled_text(recalled))
                if refused is not None:  # what it recalled goes nowhere: it never ran
                    return self._result(
                        refused[0],
                        Transcript(),
                        Usage(),
                        0,
                        started_at,
                        started,
                        error=refused[1],
                    )
                resume = recalled
                if resume is not None and self.services.store is not None:
                    # Kept before its first model call: a worker resumed from the
                    # middle of that call has what it recalled, and recalls no more.
                    self.services.store.save(resume)
            outcome = await loop.run(prompt, resume)
        except Exception as exc:  # a bug outside the model (a checkpoint ...): it fails alone
            return self._result("failed", Transcript(), Usage(), 0, started_at, started, error=exc)
        finally:
            logs.unbind(bound)
            if paid is not None:
                paying.reset(paid)
        result = self._ended(outcome, loop.head(prompt), started_at, started)
        if keep and result.ok:
            await self.keep(result)
        return result

    # Helpers of run(): what is in its own frame is held by every worker while it runs.

    def _loop(self) -> AgentLoop:
        """A loop for one run of this worker."""
        return AgentLoop(
            self.model,
            self._dispatcher,
            instructions=self.setup.system_prompt,
            settings=self.setup.settings,
            worker=self.name,
            services=self.services,
            guards=self._guards,
        )

    def _ended(
        self,
        outcome: Final | Failed | Waiting,
        head: tuple[Message, ...],
        started_at: float,
        started: float,
    ) -> WorkerResult:
        """The result of a run whose loop ended with ``outcome``; ``head``: the messages
        before the loop's state (the system prompt and the task)."""
        state = outcome.state
        transcript = Transcript(messages=head + state.messages)
        if isinstance(outcome, Waiting):
            waiting = self._result(
                "waiting",
                transcript,
                state.usage,
                state.turn,
                started_at,
                started,
                pending=outcome.pending,
            )
            return waiting.model_copy(update={"state": state})
        if isinstance(outcome, Failed):
            return self._result(
                "over_budget" if isinstance(outcome.error, BudgetExceeded) else "failed",
                transcript,
                outcome.usage,
                state.turn,
                started_at,
                started,
                error=outcome.error,
            )
        return self._result(
            "ok",
            transcript,
            state.usage,
            state.turn,
            started_at,
            started,
            output=outcome.output,
            text=outcome.text,
            cut_off=outcome.cut_off,
        )

    async def _refused(self, task: str) -> tuple[WorkerStatus, HoneycombError] | None:
        """Why the input guards refuse the instruction ``task``, if they do: the
        worker's status and error (None: it may start)."""
        runner = self._guards
        if runner is None or not runner.guards.input:
            return None
        try:
            refusals = await runner.input(task)
        except BudgetExceeded as exc:
            return "over_budget", exc
        if not refusals:
            return None
        return "failed", tripped("input", refusals)

    async def keep(self, result: WorkerResult) -> None:
        """Keep its answer ``result`` in the memory, if its role says ``store_result``
        (a worker of the plan's, one called as a tool, or one run on its own alike), as
        another model is given it: one cut off at its output limit says so."""
        memory = self.setup.memory
        if memory is None:  # most roles: nothing to pay for
            return
        role = self.role
        with self.paying_for_memory():
            await keep_result(
                memory,
                role.memory,
                result.handed_on,
                run_id=self.services.run_id,
                role=role.name,
                worker=self.name,
                timeout_s=role.tool_timeout,
            )

    def paying_for_memory(self) -> AbstractContextManager[None]:
        """The block's memory calls (their embeddings) are paid by this worker: they
        spend its run's budget, each reported as its own (:mod:`runtime.limits.spending`;
        its own run and keep are so paid)."""
        return paid_by(self._memory_payer())

    def _memory_payer(self) -> MemorySpending:
        """Who pays for its memory's calls (see :meth:`paying_for_memory`)."""
        kept = self.services
        caller = Caller(worker=self.name, run_id=kept.run_id, tracer=kept.tracer)
        return MemorySpending(kept.budget, caller)

    async def _recalled(self, task: str, prompt: str) -> LoopState | None:
        """The first state of a worker whose role recalls at its start: the memories
        found for ``task``, as the first message after the task, fitted to what its
        model holds beside its first request, ``prompt`` (None: no recall)."""
        memory, uses = self.setup.memory, self.role.memory
        if memory is None or uses is None or uses.recall == 0:
            return None
        settings = self.setup.settings
        count = checked_counter(settings.compaction) if settings.compaction else None
        head = (SystemMessage(content=self.setup.system_prompt), UserMessage(content=prompt))
        first = ModelRequest(messages=head, tools=self.setup.tools.schemas)
        message = await recall_at_start(
            memory,
            uses,
            task,
            tracer=self.services.tracer,
            worker=self.name,
            run_id=self.services.run_id,
            timeout_s=self.role.tool_timeout,
            room=recall_room(self.model, settings, first, count),
            count=count,
        )
        return LoopState(task=prompt, messages=(message,)) if message is not None else None

    def _result(
        self,
        status: WorkerStatus,
        transcript: Transcript,
        usage: Usage,
        turns: int,
        started_at: float,
        started: float,
        *,
        output: Any = None,
        text: str = "",
        error: BaseException | None = None,
        pending: tuple[PendingApproval, ...] = (),
        cut_off: bool = False,
    ) -> WorkerResult:
        if isinstance(error, BudgetExceeded):  # one not its budget's own: a cost cap's
            self.services.budget.refusal(error)
        return WorkerResult(
            worker=self.name,
            role=self.role.name,
            status=status,
            output=output,
            text=text,
            transcript=transcript,
            usage=usage,
            turns=turns,
            started_at=started_at,
            duration_s=time.perf_counter() - started,
            error=WorkerError(type=type(error).__name__, message=str(error)) if error else None,
            exception=error,
            pending=pending,
            cut_off=cut_off,
        )


def _may_ask(setup: WorkerSetup) -> bool:
    """Whether any call of the setup's tools can need approval."""
    rule = setup.approvals
    return any(rule.why(t) is not None for t in setup.tools)


DEPENDENCY_HEADER = "Results of the subtasks this one depends on:"
"""Written under a task, above the results of the subtasks it depends on."""


def _recalled_text(recalled: LoopState) -> str:
    """The memories a worker ``recalled`` at its start (the messages of its first
    state), as its input guards read them, once they passed its instruction."""
    return "\n\n".join(m.content for m in recalled.messages if isinstance(m, UserMessage))


def format_task(task: str, inputs: Mapping[str, str]) -> str:
    """The task, followed by the results of the subtasks it depends on."""
    if not inputs:
        return task
    parts = [task, "", DEPENDENCY_HEADER]
    for name, text in inputs.items():
        parts += ["", f"### {name}", text]
    return "\n".join(parts)
