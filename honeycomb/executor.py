"""``Executor``: plan a task, run one worker per subtask in parallel, aggregate.

One Executor serves many concurrent :meth:`Executor.run` calls, each isolated (its
own budget, plan and workers); they share the models, the exclusive-lock table and
the global model and tool limiters.

With a run store, every run is kept turn by turn, and ``run(task, run_id=...)`` (or
:meth:`Executor.resume`) of a run that did not finish continues it: finished workers
are not run again, started ones continue from their last turn, and no completed
side-effecting call is executed twice.

With MCP servers, ``async with Executor(...) as executor:`` shares them between runs:
each starts when a worker first needs its tools and every one stops as the block
ends. A run outside such a block starts those it needs and stops them as it ends.
Models served from this process (``LlamaModel``, llama.cpp) are alike: the server
starts with the first call, and stops with the block, or with the run outside one.
A call that needs a person's approval is decided by the Executor's ``approver``; with
none, it waits in the store: the run ends ``waiting`` once nothing else can proceed,
:meth:`Executor.decide` records a decision, and :meth:`Executor.resume` continues.

:meth:`Executor.session` holds a conversation: each message a run whose planner and
aggregator are told the messages before it (:mod:`honeycomb.run.session`).
"""

from __future__ import annotations

import os
import sys
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, cast

from msgspec.structs import replace
from pydantic import BaseModel, ValidationError

from honeycomb.run.agents import Instruction, current_run, may_ask, nobody_decides
from honeycomb.run.aggregator import AggregatorLike, as_aggregator
from honeycomb.run.conversation import shown_the_conversation
from honeycomb.run.crew import Crew
from honeycomb.run.mcp import McpTools
from honeycomb.run.plan import Plan
from honeycomb.run.planner import PlannerLike, SubtaskSpec, as_planner
from honeycomb.run.policy import Policy, priced_by_models
from honeycomb.run.result import RunResult
from honeycomb.run.run import Run
from honeycomb.run.session_checks import short
from honeycomb.run.setups import open_memory, open_store, resolve_setups
from honeycomb.run.shared import Phases, Reporting, Shared
from honeycomb.run.stream import RunStream, streamed
from runtime import (
    ConfigError,
    ConfigErrors,
    EventHandler,
    HoneycombError,
    LimitedModel,
    LockTable,
    Memory,
    Model,
    StoreError,
    Tool,
    ToolContext,
    ToolRegistry,
)
from runtime.concurrency import LoopLock, LoopSlots, OneLoop, require_asyncio
from runtime.events import event_handlers
from runtime.limits.room import nested_work
from runtime.memory import embeddings_priced
from runtime.model import held, missing_key
from runtime.models.layers.cost_cap import price_of, unpriced_called
from runtime.secrets import masked, masked_errors
from runtime.tools.approvals import Approver, PendingApproval
from runtime.tools.mcp import McpServer
from runtime.value import config_error
from workers import Role
from workers.guards import Guards
from workers.nesting import nested_tool_name
from workers.services import Services
from workers.worker import handed_on

if TYPE_CHECKING:
    from honeycomb.hive import Hive
    from honeycomb.run.context import Backend
    from honeycomb.run.session import Busy, Converse, Session, SessionRows, Unfinished
    from honeycomb.store import RunStore

__all__ = ["Executor"]


class Executor:
    """Plans a task into subtasks, runs them in parallel, and merges the results.

    It serves many runs at once on one event loop, and one event loop at a time:
    consecutive ``asyncio.run()`` calls, not two threads' loops at once (make one
    Executor a thread).

    Args:
        roles: The worker roles (and the planner and aggregator roles).
        models: One model for every role, or models by name (roles pick one with
            ``model:``; ``default_model`` names the one for the rest).
        tools: Where the roles' tool names are looked up (import paths need none).
        planner: A planner role's name, a Planner, a splitter ``fn(task)``, or a fixed
            list of subtasks. Default: the role named ``planner``, if there is one.
        aggregator: An aggregator role's name, ``"concat"``, an Aggregator, or a
            callable ``fn(task, results)``. Default: the role named ``aggregator``, if
            there is one, else ``concat``.
        policy: Parallelism, failure policy, budgets, timeouts and limiters: a
            :class:`Policy`, or its fields as a mapping (as a hive file's ``policy:``).
        output_type: A pydantic model the run's answer is an object of: an aggregator
            role answers in it, a function's or an Aggregator's answer is validated
            against it (see :func:`~honeycomb.run.aggregator.aggregate`).
        default_model: The model for roles that name none.
        on_event: Called with every event of every run, synchronously: plain
            functions, not ``async def`` ones.
        log_events: Also log events through structlog (when it is configured).
        store: Keep every run in this SQLite file, this PostgreSQL database
            (``postgresql://...``) or this :class:`RunStore`, so that a run that
            stopped can be resumed (from any process that shares the store).
        source: Where this Executor was declared (a hive file), kept with each run
            so ``honeycomb resume`` can rebuild it.
        trace: Record each run's spans (:mod:`honeycomb.trace.spans`) in the store.
            Default: when there is a store.
        memory: The long-term memory of the roles with ``memory:`` (a
            :class:`~runtime.memory.Memory`, or the path of an SQLite memory file),
            shared by every run.
        mcp_servers: MCP servers whose tools roles name as ``server:tool`` or
            ``server:*`` (see :mod:`runtime.tools.mcp`).
        approver: Decides on tool calls that need approval (see
            :mod:`runtime.tools.approvals`); None: they wait in the store for
            :meth:`decide`.
        guards: The runs' own guards (see :mod:`workers.guards`): ``input`` on each
            run's task and ``output`` on its final answer, which stop the run with
            ``GuardrailTripped``; ``arguments`` on every tool call of every worker.
        backend: Where subtask workers run: None runs them in each run's event loop;
            ``RayBackend(...)`` in a pool of Ray actors (see docs/ray.md).

    Raises:
        ConfigErrors: naming every unknown model, role or tool.
        ConfigError: naming the argument and what to pass, when ``roles`` is not a
            list of roles, a model is not a :class:`~runtime.model.Model`, or
            ``policy`` not a Policy (or its fields), or ``on_event`` not a list of
            plain functions (one alone, an ``async def`` one); when ``output_type`` is
            given and the aggregator is ``concat`` (named, or the default), which makes
            text; when a budget in dollars is set and none of
            the models (or of a hive called as a tool) has a price.
    """

    def __init__(
        self,
        roles: Iterable[Role] | Mapping[str, Role],
        models: Model | Mapping[str, Model],
        *,
        tools: ToolRegistry | Sequence[Tool[Any, Any] | Callable[..., Any]] = (),
        planner: PlannerLike | None = None,
        aggregator: AggregatorLike | None = None,
        policy: Policy | Mapping[str, Any] | None = None,
        output_type: type[BaseModel] | None = None,
        default_model: str | None = None,
        on_event: Sequence[EventHandler] = (),
        log_events: bool = True,
        store: RunStore | str | Path | None = None,
        source: str | None = None,
        trace: bool | None = None,
        memory: Memory | str | Path | None = None,
        mcp_servers: Sequence[McpServer] = (),
        approver: Approver | None = None,
        guards: Guards | None = None,
        backend: Backend | None = None,
    ) -> None:
        # Replayed, the cassette decides the calls; recorded, it keeps their decisions.
        # Every argument is checked before a store or a memory is opened.
        role_list = _checked_roles(roles)
        model_map = _checked_models(models)
        approver, taped = _cassette_approvals(approver, models)
        handlers = (*event_handlers(on_event), *taped)
        by_name = {r.name: r for r in role_list}
        default = default_model or next(iter(model_map), "default")
        registry = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        kept_memory = _on_cassette(open_memory(memory), model_map)
        mcp = McpTools(mcp_servers)
        phases = Phases(
            planner=as_planner(planner, by_name),
            aggregator=as_aggregator(aggregator, by_name, output_type),
            output_type=output_type,
        )
        readers = shown_the_conversation(role_list, phases.leads)
        kept_policy = _checked_policy(policy).within(
            model_map.values(), readers, embeddings_priced=_memory_priced(kept_memory, role_list)
        )
        setups, run_guards = resolve_setups(
            role_list,
            model_map,
            default,
            registry,
            planner,
            aggregator,
            kept_memory,
            mcp,
            guards,
            kept_policy.max_nesting,
            kept_policy.sessions.context.model,
        )
        kept = open_store(store)
        _one_file_each(kept, kept_memory)
        self._own_store = kept is not store  # made of a path or URL: closed by aclose
        # The models, and the hives called as tools, held by ``async with`` while any
        # of its blocks is open (a service's handlers may each open one).
        self._held: AsyncExitStack | None = None
        self._blocks = 0
        # The event loop it serves, one at a time, with its sessions' locks and its
        # slots: what a stopped loop held in them is not held in the next.
        self._serving = OneLoop("this Executor")
        # One lock a session id, shared by its Session objects while any is alive.
        self._session_locks: weakref.WeakValueDictionary[str, LoopLock] = (
            weakref.WeakValueDictionary()
        )
        self._session_rows: SessionRows | None = None
        self._hive: Hive | None = None  # made from a hive (from_hive): kept with it
        self._stop_pool: Callable[[], None] | None = None  # of the hive's pool it made
        model_slots = self._slots(kept_policy.model_concurrency)
        limited_models = {
            name: LimitedModel(m, model_slots) if model_slots is not None else m
            for name, m in model_map.items()
        }
        self.shared = Shared(
            Crew(by_name, limited_models, default, setups, mcp),
            kept_policy,
            phases,
            Services(
                locks=LockTable(),
                tool_slots=self._slots(kept_policy.tool_concurrency),
                model_slots=model_slots,
                approver=approver,
                approval_timeout_s=kept_policy.approval_timeout_s,
                guards=run_guards,
                memory=kept_memory,
            ),
            Reporting(
                store=kept,
                trace=trace if trace is not None else kept is not None,
                handlers=handlers,
                log_events=log_events,
                source=source,
            ),
            backend,
        )
        self._check_called_prices()

    async def __aenter__(self) -> Self:
        """Share the MCP servers and the models' own servers (llama.cpp) between the
        runs of the block (none starts yet), and so those of the hives its roles call
        as tools between their sub-runs (each started a server of its own a call).
        Blocks open at once (a service's handlers, each ``async with executor``) share
        them, let go of as the last ends."""
        if not self._blocks:
            mcp = self.shared.crew.mcp
            await mcp.open()
            try:
                async with AsyncExitStack() as stack:  # let go again if one cannot be held
                    await stack.enter_async_context(held(self.shared.crew.models.values()))
                    for sub in {id(sub): sub for _, sub in self._called()}.values():
                        await stack.enter_async_context(sub)
                    self._held = stack.pop_all()
            except BaseException:
                await mcp.close()
                raise
        self._blocks += 1
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._blocks -= 1
        if not self._blocks:
            await self.aclose()

    async def aclose(self) -> None:
        """Stop every MCP server the Executor's runs started (and the hives its roles call as
        tools started), the models' servers, and
        the actors of the Ray pool it made for a hive's ``backend: ray``, and close the
        run store it opened from a path or URL (``async with`` does). A backend or a
        :class:`~honeycomb.store.RunStore` given is the caller's to stop. A later run
        starts again what it needs."""
        held_models, self._held = self._held, None
        try:
            if held_models is not None:
                await held_models.aclose()
        finally:
            try:
                await self.shared.crew.mcp.close()
            finally:
                if self._stop_pool is not None:
                    self._stop_pool()  # a later run makes a new pool, stopped again here
                store = self.store
                if self._own_store and store is not None:  # its writer, its connections
                    await store.aclose()

    @property
    def roles(self) -> dict[str, Role]:
        return self.shared.crew.roles

    @property
    def models(self) -> dict[str, Model]:
        return self.shared.crew.models

    @property
    def policy(self) -> Policy:
        return self.shared.policy

    @property
    def store(self) -> RunStore | None:
        return self.shared.reporting.store

    @property
    def memory(self) -> Memory | None:
        return self.shared.services.memory

    @classmethod
    def from_hive(
        cls,
        hive: Hive,
        *,
        model: Model | None = None,
        models: Model | Mapping[str, Model] | None = None,
        policy: Policy | Mapping[str, Any] | None = None,
        **options: Any,
    ) -> Executor:
        """The Executor a loaded hive declares.

        To run a hive on a test model (``ScriptedModel``, ``FunctionModel``), pass it
        as ``model`` (or ``models``): every role then uses it.

        Args:
            hive: The hive (:func:`~honeycomb.hive.load_hive`).
            model: One model for every role, instead of the declared ones.
            models: The hive's models by name (``{"gpt": model}``), used instead of
                the declared ones of those names (the rest are built as declared), in
                the hives it calls as tools too; a model of one of those alone by the
                tool's name, ``{"facts/gpt": model}`` (deeper: ``facts/checks/gpt``);
                or one model, as ``model``.
            policy: Replace the declared policy (a Policy, or its fields as a
                mapping); so do ``planner``, ``aggregator`` and
                ``guards`` given among ``options``.
            options: The Executor's own options (``on_event``, ``output_type``,
                ``store``, ``memory``, ``backend`` ...). The hive's ``store:`` is a
                path relative to the file; so is its ``memory: path:``. Its
                ``backend:`` is used unless ``backend`` is given (None: the local one):
                the Ray pool it makes is the Executor's, whose actors :meth:`aclose`
                (``async with``) stops.

        Raises:
            TypeError: when both ``model`` and ``models`` are given, or ``tools``,
                ``mcp_servers`` or ``default_model``, which the hive declares.
            ConfigErrors: for a name in ``models`` that the hive does not declare.
            ConfigError: naming ``model``, ``models`` or ``policy`` when it is not a
                Model (or a Policy); the errors of the Executor the hive declares.
        """
        declared = sorted({"tools", "mcp_servers", "default_model"} & options.keys())
        if declared:
            raise TypeError(
                f"{' and '.join(declared)}: the hive file declares them (its "
                f"{', '.join(d + ':' for d in declared)}); name them there, or make an "
                "Executor of your own roles"
            )
        if model is not None and models is not None:
            raise TypeError(
                "pass model= (one model for every role) or models= (the hive's models "
                "by name), not both"
            )
        if models is not None and not isinstance(models, Mapping):
            model, models = _checked_model(models, "models"), None
        elif model is not None:
            _checked_model(model, "model")
        one = model
        if model is not None:  # under every name, so the roles' model: still resolve
            models = dict.fromkeys(hive.spec.models, model)
        if hive.store is not None and "store" not in options:
            options["store"] = open_store(hive.store, **hive.store_options)
        if hive.spec.memory is not None and "memory" not in options:
            options["memory"] = hive.memory()
        options.setdefault("source", str(hive.file.resolve()))
        built = None
        if "backend" not in options:  # backend: ray makes a pool (it starts with a worker)
            built = options["backend"] = hive.backend.build(hive.folder)
        from honeycomb.hive.backend import imports_beside

        imports_beside(options["backend"], hive)  # a pool given imports its tools too
        registry = hive.registry
        if hive.hives:  # the hives its roles call as tools, each an Executor of its own
            # One tool a file, however many references name it (``hive:x.yaml`` and
            # ``hive:./x.yaml``), by its stem: load_hive refuses two files of one stem.
            called = {
                sub.file.resolve(): (nested_tool_name(ref), sub) for ref, sub in hive.hives.items()
            }
            subs = [
                cls.from_hive(
                    sub,
                    model=one,
                    models=None if one else _declared(models, sub, name),
                    store=None,
                    trace=False,
                    backend=None,  # its workers run where the worker calling it runs
                    **_beside(options.get("memory"), sub),
                ).as_tool(name)
                for name, sub in called.values()
            ]
            registry = ToolRegistry([*registry, *subs])
        given_policy = hive.policy if policy is None else _checked_policy(policy)  # not the file's
        with hive.imports():  # the roles' import paths, resolved once, as the hive's
            try:
                executor = cls(
                    hive.roles,
                    hive.models(_own(models)),
                    tools=registry,
                    policy=given_policy,
                    default_model=hive.default_model,
                    mcp_servers=hive.mcp_servers,
                    **{  # the hive's, unless given
                        "planner": hive.planner,
                        "aggregator": hive.spec.aggregator,
                        "guards": hive.spec.guards,
                        **options,
                    },
                )
            except ConfigError as error:
                raise _in_file(hive, error) from None
        executor._hive = hive  # what it declares is masked while it lives: its secrets
        if policy is None:  # its budgets are the file's: a run they stop names their line
            executor.shared.budgets_written = partial(_budget_line, hive)
        executor._stop_pool = built.stop if built is not None else None  # its own: aclose
        return executor

    @classmethod
    def from_yaml(
        cls,
        path: str | Path,
        *,
        model: Model | None = None,
        models: Model | Mapping[str, Model] | None = None,
        **options: Any,
    ) -> Executor:
        """An Executor from a hive file (see :mod:`honeycomb.hive`).

        ``from_yaml("hive.yaml", model=ScriptedModel([...]))`` runs the hive on a test
        model.

        Args:
            path: The hive file.
            model: One model for every role, instead of the declared ones.
            models: The hive's models by name, instead of the declared ones of those
                names; or one model, as ``model``.
            options: ``policy`` and the Executor's own options (``store``,
                ``on_event``, ``output_type`` ...).

        Raises:
            ConfigErrors: every mistake in the file, with line, column and field; a
                name in ``models`` the hive does not declare.
            TypeError: when both ``model`` and ``models`` are given.
        """
        from honeycomb.hive import load_hive  # the YAML reader loads with the first hive

        return cls.from_hive(load_hive(path), model=model, models=models, **options)

    def __repr__(self) -> str:
        return f"Executor(roles={list(self.roles)}, models={list(self.models)})"

    def as_tool(
        self, name: str, description: str = "", *, side_effects: bool | None = None
    ) -> Tool[..., Any]:
        """This Executor as a tool of another's roles: a call plans, runs and
        aggregates a sub-run on the instruction given, and its answer is the
        observation. Called inside a run, the sub-run spends that run's budget and is
        under its exclusive locks and tool and model limiters (a call holds no tool
        slot: the sub-run's own calls do); it is cancelled with the call. It keeps no
        store of its own: a resumed caller runs a call that has no side effects again,
        and answers one that has from its journal (one cut off by a crash is
        ``unknown``), as it does any side-effecting tool's.

        Args:
            name: The tool's name.
            description: What the model reads of it (default: says it runs this hive).
            side_effects: Whether a call may have effects outside the run: it then runs
                one at a time and is journaled. None: it has them if a tool of one of
                this Executor's roles has (or an MCP server's may), or a hive it calls
                as a tool does.

        Raises:
            ToolDefinitionError: for a name a tool cannot have.
            ConfigError: when this Executor has no planner: a call gives an instruction,
                never the subtasks a run without one needs.
        """
        if self.shared.phases.planner is None:
            raise ConfigError(
                f"as_tool({name!r}): this Executor has no planner, and a call of its tool "
                "gives it an instruction, not subtasks: define a role named 'planner', or "
                "give the Executor a planner"
            )
        about = description or f"Run the {name} hive on a task: it plans, works and merges."
        return Tool(
            self._sub_run,  # a method: check_keys finds the Executor behind the tool
            name=name,
            description=f"{about} Give it the task as an instruction.",
            side_effects=self._acts() if side_effects is None else side_effects,
            pinned=True,  # a sub-run of this process's run
            nests=True,  # the sub-run's calls hold the run's tool slots, not this one
        )

    def _acts(self) -> bool:
        """Whether a run of this Executor may have side effects: a tool of one of its
        roles has them (a hive it calls as a tool says so of itself), or may (an MCP
        server's, listed only as a run starts)."""
        crew = self.shared.crew
        return any(
            crew.mcp.refs(role) or any(t.side_effects for t in crew.setup_for(role, None).tools)
            for role in crew.roles.values()
        )

    async def _sub_run(self, instruction: Instruction, context: ToolContext) -> str:
        """A call of :meth:`as_tool`'s tool: a sub-run on ``instruction``; its answer."""
        outer = current_run()
        run_id = f"{context.run_id}/{context.worker}/{context.call_id}"
        caller = context.worker or "?"
        # Its calls are spans of the calling run, under this call, in every recorder of
        # that run's spans (its store's, its listeners'), whose traces count them too.
        spans = outer.sub_run_spans() if outer is not None else None
        handlers = () if spans is None else (spans.nested(caller, context.turn, context.call_id),)
        run = Run(
            self.shared,
            instruction,
            run_id if outer else os.urandom(6).hex(),
            handlers,
            within=outer.sub_run_context(caller, context.call_id) if outer is not None else None,
            quiet=spans.keepers if spans is not None else (),
        )
        if spans is not None:  # the sub-runs it runs go under its calls, as its own do
            run.context = replace(run.context, spans=spans.under(caller, context.call_id))
        # In its caller's room: the sub-run works there, its caller waits for it.
        # What it answers or raises reaches its caller's model: masked, as a run's is.
        async with self.shared.crew.scope(), nested_work():
            with masked_errors():
                result = await run.execute(None, resumable=False, steal=False)
        return handed_on(result.answer_text, result.answer_cut_off)

    def check_runnable(self) -> None:
        """Raise what :meth:`run` raises before any run starts, whatever its task: a
        model's API key neither given nor set (:meth:`check_keys`), or a hive its roles
        call as a tool whose calls may need an approval nobody can give (it has no
        approver, and a sub-run's calls cannot wait in the run store). An eval asks
        once, before its first case.

        Raises:
            ConfigErrors: naming each, at its hive line where it has one.
        """
        self.check_keys()
        self._check_deciders()

    def check_keys(self) -> None:
        """Raise if a model of its roles (or of the hives they call as tools), or their
        memory's embeddings when a role uses the memory, needs an API key that is
        neither given nor set: :meth:`run` asks before a run starts.

        Raises:
            ConfigErrors: naming each such model and the variable to set.
        """
        errors = self._missing_keys()
        if errors:
            raise ConfigErrors(errors)

    def _check_called_prices(self) -> None:
        """Refuse a budget in dollars that a hive its roles call as a tool (or one that
        calls) would spend at 0 a call: none of its models has a price (nor, for
        ``cost``, its memory's embeddings).

        Raises:
            ConfigError: naming the budget, the hive tool and how to price its models.
        """
        limits = self.shared.policy.budgets
        if limits.cost is None and limits.cost_per_call is None:
            return
        for name, sub in self._hives_called():
            counted = priced_by_models(limits, sub._memory_priced())
            problem = unpriced_called(counted, f"the hive tool {name!r}", sub._models_priced())
            if problem is not None:
                raise ConfigError(problem[1], field=f"policy.budgets.{problem[0]}")

    def priced(self) -> bool:
        """Whether a model of its roles or its memory's embeddings, or those of a hive
        they call as a tool, have a price: what a budget in dollars of its runs (or of
        an eval of them) counts."""
        return any(e._models_priced() or e._memory_priced() for e in self._all_called())

    def _models_priced(self) -> bool:
        """Whether a model of its roles has a price."""
        return any(price_of(model) is not None for model in self.models.values())

    def _memory_priced(self) -> bool:
        """Whether its roles' memory calls embeddings that have a price."""
        return _memory_priced(self.memory, self.shared.crew.roles.values())

    def _check_deciders(self) -> None:
        """Raise if a hive tool (``hive:PATH``) of the hive file this Executor was made
        from may ask for a person's approval and nobody can decide: it has no approver,
        and a sub-run's calls cannot wait in the run store.

        Raises:
            ConfigErrors: at each such tool's line.
        """
        hive = self._hive
        if hive is None or self.shared.services.approver is not None:
            return
        asking = {name for name, sub in self._called() if sub._may_ask(set())}
        errors = [
            hive.tool_error(name, index, nobody_decides(ref, hive.hives[ref].file.name))
            for name, role in hive.roles.items()
            for index, ref in enumerate(role.tools)
            if ref in hive.hives and nested_tool_name(ref) in asking
        ]
        if errors:
            raise ConfigErrors(errors)

    def _may_ask(self, seen: set[int]) -> bool:
        """Whether a call of its runs, run as a tool, may need a person's approval that
        its caller's approver is to give: it has no approver of its own, and a tool of
        its roles asks, or a hive they call as a tool does (each Executor once:
        ``seen``)."""
        seen.add(id(self))
        if self.shared.services.approver is not None:
            return False
        if may_ask(self.shared.crew):
            return True
        return any(sub._may_ask(seen) for _, sub in self._called() if id(sub) not in seen)

    def _hives_called(self) -> Iterator[tuple[str, Executor]]:
        """Each Executor its roles call as a tool, and those call in turn, once each
        (first found first), by the name of the tool it was found as."""
        seen, called = {id(self)}, deque(self._called())
        while called:
            name, sub = called.popleft()
            if id(sub) not in seen:
                seen.add(id(sub))
                yield name, sub
                called += sub._called()

    def _all_called(self) -> Iterator[Executor]:
        """This Executor, then each of :meth:`_hives_called`."""
        yield self
        yield from (sub for _, sub in self._hives_called())

    def _called(self) -> list[tuple[str, Executor]]:
        """The Executors its roles call as tools (:meth:`as_tool`), by tool name."""
        crew = self.shared.crew
        found: list[tuple[str, Executor]] = []
        for role in crew.roles.values():
            for made in crew.setup_for(role, None).tools:
                sub = getattr(made.fn, "__self__", None)  # an as_tool's Executor
                if isinstance(sub, Executor):
                    found.append((made.name, sub))
        return found

    def _missing_keys(self) -> list[ConfigError]:
        """What :meth:`check_keys` reports, each model once: its roles' models, and
        their memory's embeddings when a role uses the memory."""
        found: list[ConfigError] = []
        seen: set[int] = set()
        for executor in self._all_called():
            crew = executor.shared.crew
            embeddings = getattr(executor.memory, "embeddings", None)
            used = any(role.memory is not None for role in crew.roles.values())
            for role in crew.roles.values():
                for model in (crew.model_for(role), crew.summarizer_for(role)):
                    if model is not None and id(model) not in seen:
                        seen.add(id(model))
                        found += filter(None, [missing_key(model)])
            if used and embeddings is not None and id(embeddings) not in seen:
                seen.add(id(embeddings))
                found += filter(None, [missing_key(embeddings)])
        return found

    async def run(
        self,
        task: str,
        *,
        subtasks: Plan | Sequence[SubtaskSpec] | None = None,
        run_id: str | None = None,
        on_event: Sequence[EventHandler] = (),
        steal: bool = False,
        text_deltas: bool = False,
    ) -> RunResult:
        """Plan (unless ``subtasks`` is given), run the workers, aggregate.

        With a store, the run is leased to this process while it goes; ``run_id`` of a
        stored run that did not finish continues it (see :meth:`resume`).

        With ``text_deltas``, the handlers also get each answer's text as it is written
        (:class:`~runtime.events.TextDelta`): models that can stream are asked to.

        Raises:
            ConfigError: before anything runs or is stored, when ``task`` is empty or
                only whitespace, or ``run_id`` is not valid text (a lone surrogate).
            RunMismatch: before a stored run goes on, when it was started with another
                task, or ``subtasks`` are not the plan it ran.
            ConfigErrors: before the run starts, when a model needs an API key that is
                not set (:meth:`check_keys`).
            PlanError: when no valid plan could be made; ``.partial`` holds what
                the earlier lives of a resumed run did, when its plan no longer fits.
            RunFailed: when the failure policy gave up or aggregation failed;
                ``.partial`` holds the partial result.
            BudgetExceeded: when the run went past a budget; ``.partial`` holds the
                partial result.
            RunBusy: when another process carries the run on (see :meth:`resume`).
            EventLoopConflict: at once, when another thread's event loop uses the
                Executor now: one Executor serves one event loop at a time.
        """
        from honeycomb.run.session import check_id, check_task  # a session's checks too

        check_task(task)
        if run_id is not None:
            check_id(run_id, "run_id")
        return await self._execute(
            task,
            subtasks=subtasks,
            run_id=run_id or os.urandom(6).hex(),
            on_event=on_event,
            steal=steal,
            text_deltas=text_deltas,
            resumable=run_id is not None,
        )

    async def _execute(
        self,
        task: str,
        *,
        run_id: str,
        on_event: Sequence[EventHandler],
        steal: bool,
        text_deltas: bool,
        resumable: bool,
        subtasks: Plan | Sequence[SubtaskSpec] | None = None,
        converse: Converse | None = None,
    ) -> RunResult:
        """:meth:`run`, and a session's turn (told the conversation by ``converse``)."""
        require_asyncio("Executor.run")
        self._serving.adopt()  # another thread's loop using it now: refused before anything
        event_handlers(on_event)  # an async handler refused before anything is kept
        self.check_runnable()
        if converse is None and resumable and subtasks is None and self.store is not None:
            session = await self._session_of(run_id)
            if session is not None:  # a session's turn: continued as the session does
                return await session.resume_run(
                    task, run_id, on_event=on_event, text_deltas=text_deltas, steal=steal
                )
        run = Run(self.shared, task, run_id, on_event, text=text_deltas, converse=converse)
        async with self.shared.crew.scope():  # the servers its calls reach
            with masked_errors():  # what a run returns and raises shows no secret
                return masked(await run.execute(subtasks, resumable=resumable, steal=steal))

    def session(
        self, session_id: str, *, busy: Busy = "wait", unfinished: Unfinished = "raise"
    ) -> Session:
        """The session (conversation) of ``session_id``, new or not: each
        ``await session.run(message)`` is a run whose planner and aggregator (and the
        workers of roles that say so) see the messages before it, their answers and
        what their subtasks found, within the policy's ``sessions`` budget. With a
        run store, its turns are kept there, and a process that starts again goes on
        with it (see ``docs/sessions.md``).

        Args:
            session_id: Any text (a user's id, a chat's); one holding a lone
                surrogate is refused (``ConfigError``): no store could keep it.
            busy: What a message that comes while the session answers another does:
                ``wait`` its turn (in the order they came), or ``refuse`` it with
                ``SessionBusy``. Each message may say otherwise.
            unfinished: What a message does when the session's last turn did not
                finish (the process stopped during it, or it waits for approvals):
                ``raise`` ``SessionError``, ``resume`` that turn first, or ``drop`` it.
                Each message may say otherwise.
        """
        from honeycomb.run.session import Session, check_id

        check_id(session_id, "session_id")
        lock = self._session_locks.get(session_id)
        if lock is None:
            lock = self._session_locks[session_id] = LoopLock(self._serving)
        return Session(
            session_id,
            runner=self._execute,
            rows=self._rows(),
            lock=lock,
            policy=self.policy.sessions,
            opener=lambda other: self.session(other, busy=busy, unfinished=unfinished),
            busy=busy,
            unfinished=unfinished,
        )

    async def _session_of(self, run_id: str) -> Session | None:
        """The session kept in the store whose turn run ``run_id`` answers (None: none),
        which continues it (``Executor.resume``, ``honeycomb resume``) as its own."""
        from honeycomb.store.sessions import StoredSessions

        assert self.store is not None
        session_id = await StoredSessions(self.store).session_of(run_id)
        return None if session_id is None else self.session(session_id)

    def _slots(self, capacity: int | None) -> LoopSlots | None:
        """``capacity`` slots (None: unbounded) of the loop the Executor serves."""
        return LoopSlots(capacity, self._serving) if capacity is not None else None

    def _rows(self) -> SessionRows:
        """Where this Executor's sessions keep their turns: its run store, else here."""
        if self._session_rows is None:
            from honeycomb.run.session import MemoryRows, StoreRows

            store = self.store
            self._session_rows = StoreRows.of(store) if store is not None else MemoryRows()
        return self._session_rows

    async def resume(
        self,
        run_id: str,
        *,
        on_event: Sequence[EventHandler] = (),
        steal: bool = False,
        text_deltas: bool = False,
    ) -> RunResult:
        """Continue the stored run ``run_id`` (or return its result, if it finished).
        A run that answers a turn of a session goes on as ``session.resume()`` would
        continue it (see ``docs/sessions.md``).

        Args:
            run_id: The run.
            on_event: Called with every event of the run.
            steal: Take the run over from a process whose lease expired (it stopped
                renewing it: dead on another host, or hung). A live lease is never
                taken; the lease of a process of this host that is gone needs no steal.
            text_deltas: The handlers also get the answers' text as it is written, as
                with :meth:`run`.

        Raises:
            StoreError: when there is no store, or it has no such run.
            ConfigError: when ``run_id`` is not valid text (a lone surrogate).
            RunBusy: when another process carries the run on: its host and pid, and
                whether its lease expired.
            PlanError, RunFailed, BudgetExceeded: as :meth:`run`.
        """
        from honeycomb.run.session import check_id

        if self.store is None:
            raise StoreError("no run store: give the Executor store=...", path="-")
        check_id(run_id, "run_id")
        stored = await self.store.summary(run_id)
        if stored is None:
            raise StoreError(f"no run {run_id!r} in this store", path=self.store.where)
        return await self.run(
            stored.task, run_id=run_id, on_event=on_event, steal=steal, text_deltas=text_deltas
        )

    async def pending(self, run_id: str) -> list[PendingApproval]:
        """The calls of run ``run_id`` waiting for a decision, in the order they asked,
        each with what it will do where its tool says (its ``describe``: the
        ``summary``).

        Raises:
            StoreError: when there is no store.
        """
        from honeycomb.run.decide import pending_of, summarized

        return summarized(await pending_of(self._store_for(run_id), run_id), self.tool_for)

    async def decide(
        self,
        run_id: str,
        call_id: str,
        *,
        approve: bool,
        reason: str | None = None,
        arguments: dict[str, Any] | None = None,
        worker: str | None = None,
        turn: int | None = None,
        by: str | None = None,
    ) -> PendingApproval:
        """Record a decision on a call of run ``run_id`` that waits for approval. A run
        this Executor carries on goes on with it at once; one that ended ``waiting``
        continues from there when resumed (:meth:`resume`, here or in another process).
        A decision is final: the first one recorded stands.

        Args:
            run_id: The run.
            call_id: The call (``RunResult.pending``, :meth:`pending`).
            approve: Run the call, or deny it.
            reason: Told to the model with a denial (``denied: <reason>``).
            arguments: With an approval, run the call with these instead; they are
                validated against the tool's schema now and again when it runs.
            worker: The worker, when several wait on calls of one id.
            turn: The call's turn (``PendingApproval.turn``): a worker's later call
                may share an earlier one's id.
            by: Who decides, kept with the decision and told to whoever decides the
                call after (default: this process's user and host, ``ann@laptop``).

        Returns:
            The call decided on.

        Raises:
            AlreadyDecided: when the call was decided already, here or by another
                process a moment ago: it says what was decided, by whom and when.
            ApprovalError: naming what is wrong (no such call waiting, timed out,
                arguments that fail validation ...).
            StoreError: when there is no store.
        """
        from honeycomb.run.decide import decide

        decided = await decide(
            self._store_for(run_id),
            run_id,
            call_id,
            approve=approve,
            reason=reason,
            arguments=arguments,
            worker=worker,
            turn=turn,
            tool_for=self.tool_for,
            listing=self._list_tools_of,  # an edit is checked against an MCP tool's too
            by=by,
        )
        bell = self.shared.bells.get(run_id)
        if bell is not None:  # under way here: its worker waiting for it goes on at once
            bell.ring()
        return decided

    def _store_for(self, run_id: str) -> RunStore:
        """The store to find run ``run_id`` in.

        Raises:
            StoreError: when there is none.
            ConfigError: when ``run_id`` is not valid text (a lone surrogate).
        """
        from honeycomb.run.session import check_id

        if self.store is None:
            raise StoreError(
                f"no run store to find run {run_id!r} in: give the Executor store=...", path="-"
            )
        check_id(run_id, "run_id")
        return self.store

    async def list_tools(self, roles: Iterable[str] | None = None) -> None:
        """Have the roles' MCP tools listed now, their servers started for it (and
        stopped again, unless the Executor's block holds them), as a run does as it
        starts: :meth:`tool_for` then finds them. Each role's are listed even when
        another's cannot be (its server down, a tool it no longer lists).

        Args:
            roles: The roles whose tools are listed, by name (None: every role's).

        Raises:
            McpServerError: when a server cannot be started (the first, once every
                role was tried).
            ConfigError: when a server has no tool a role names (likewise).
        """
        crew = self.shared.crew
        wanted = crew.roles.values() if roles is None else [crew.roles[r] for r in roles]
        listed = [role for role in wanted if crew.mcp.refs(role)]
        if not listed:
            return
        failed: HoneycombError | None = None
        async with crew.mcp.scope():
            for role in listed:
                try:
                    await crew.prepare([role])
                except HoneycombError as exc:
                    failed = failed or exc
        if failed is not None:
            raise failed

    async def _list_tools_of(self, pending: PendingApproval) -> None:
        """The MCP tools of the role of a call waiting for approval, listed (those of
        the Executor's other roles are not its concern)."""
        if pending.role in self.roles:
            await self.list_tools([pending.role])

    def tool_for(self, pending: PendingApproval) -> Tool[Any, Any] | None:
        """The tool a call waiting for approval is to (None: its role or tool is not
        this Executor's): what checks its edited arguments and tells what it will do
        (``honeycomb.web.StoreApprovals`` takes it)."""
        role = self.roles.get(pending.role)
        if role is None:
            return None
        return self.shared.crew.setup_for(role, None).tools.get(pending.tool)

    def stream(
        self,
        task: str,
        *,
        subtasks: Plan | Sequence[SubtaskSpec] | None = None,
        run_id: str | None = None,
        steal: bool = False,
        text_deltas: bool = True,
    ) -> AbstractAsyncContextManager[RunStream]:
        """Run in the background and yield its events as they happen.

        ``async with executor.stream(task) as events: async for event in events: ...``
        The last event is :class:`~honeycomb.run.events.RunFinished`; afterwards
        ``events.result`` holds the result. Leaving the block early cancels the run.

        The events include each answer's text as it is written
        (:class:`~runtime.events.TextDelta`), from models that can stream; pass
        ``text_deltas=False`` for one-shot model calls and no deltas.

        Raises:
            ConfigError: at once, when ``task`` is empty or only whitespace, or
                ``run_id`` is not valid text, or a hive tool's calls may need an
                approval nobody can give.
        """
        from honeycomb.run.session import check_id, check_task

        check_task(task)
        if run_id is not None:
            check_id(run_id, "run_id")
        self._check_deciders()

        def run(put: EventHandler) -> Awaitable[RunResult]:
            return self.run(
                task,
                subtasks=subtasks,
                run_id=run_id,
                on_event=[put],
                steal=steal,
                text_deltas=text_deltas,
            )

        return streamed(run)


def _in_file(hive: Hive, error: ConfigError) -> ConfigError:
    """``error`` of the Executor ``hive`` declares, at its field's line of the hive file
    (``policy.budgets.cost``: a model given in place of the hive's may make it one); as
    it is when it names a file already, or no field of the file's."""
    field = error.field
    if type(error) is not ConfigError or error.file is not None or not field or "[" in field:
        return error
    return hive.error_at(tuple(field.split(".")), error.message)


def _budget_line(hive: Hive, limit: str) -> str:
    """Where ``hive``'s file sets its budget ``limit``: ``policy.budgets.cost at
    hive.yaml:7``."""
    at = hive.error_at(("policy", "budgets", limit), "")
    line = f":{at.line}" if at.line is not None else ""
    return f"policy.budgets.{limit} at {at.file}{line}"


def _declared(models: Mapping[str, Model] | None, hive: Hive, tool: str) -> dict[str, Model] | None:
    """Of the models given by name, those ``hive`` (called as the tool ``tool``)
    declares too, and those given for it alone (``tool/NAME``, which win; its own
    hives' ``tool/OTHER/NAME`` are passed on to them)."""
    if models is None:
        return None
    found = {name: m for name, m in models.items() if name in hive.spec.models}
    prefix = f"{tool}/"
    found.update({n.removeprefix(prefix): m for n, m in models.items() if n.startswith(prefix)})
    return found


def _own(models: Mapping[str, Model] | None) -> Mapping[str, Model] | None:
    """Of the models given by name, those of the hive itself (not ``tool/NAME``)."""
    if models is None:
        return None
    return {name: m for name, m in models.items() if "/" not in name}


def _beside(memory: object, sub: Hive) -> dict[str, Any]:
    """The memory option of a hive called as a tool, whose memory is ``sub``'s own
    unless the caller's ``memory`` makes memories beside it (an eval's, of each run's
    own: ``EvalMemory.beside``), which then makes it one for ``sub``'s."""
    beside = getattr(memory, "beside", None)
    if beside is None or sub.spec.memory is None:
        return {}
    return {"memory": beside(sub.memory())}


def _on_cassette(memory: Memory | None, models: Mapping[str, Model]) -> Memory | None:
    """``memory``, its embeddings and searches recorded in or replayed from the
    cassette of ``models`` when they are a cassette's: a replayed run calls no
    endpoint, and recalls what its recording recalled, whatever the memory holds now."""
    if memory is None:
        return memory
    from runtime.models.layers.cassette_embeddings import cassette_memory  # with a memory

    return cast("Memory | None", cassette_memory(memory, models))


def _checked_roles(roles: Iterable[Role] | Mapping[str, Role]) -> list[Role]:
    """``roles`` (a list of roles, or roles by name) as a list.

    Raises:
        ConfigError: naming the argument, or the item, that is not a Role.
    """
    if isinstance(roles, Role):
        raise ConfigError(
            f"it takes a list of roles, not one: write [Role(name={roles.name!r})]",
            field="roles",
        )
    if isinstance(roles, Mapping):
        given = [(f"roles[{name!r}]", role) for name, role in roles.items()]
    elif isinstance(roles, Iterable) and not isinstance(roles, str | bytes):
        given = [(f"roles[{index}]", role) for index, role in enumerate(roles)]
    else:
        given = [("roles", roles)]
    for field, role in given:
        if not isinstance(role, Role):
            raise ConfigError(
                f"{_shown(role)} is not a Role: pass a list of roles "
                "([Role(name='planner'), Role(name='researcher')])",
                field=field,
            )
    return [role for _, role in given]


def _checked_models(models: Model | Mapping[str, Model]) -> dict[str, Model]:
    """``models`` (one model, or models by name) by name.

    Raises:
        ConfigError: naming the argument, or the name, whose value is not a Model;
            when there is none.
    """
    if not isinstance(models, Mapping):
        return {"default": _checked_model(models, "models")}
    if not models:
        raise ConfigError(
            "it is empty: pass a model, or models by name ({'fast': model, ...})",
            field="models",
        )
    return {name: _checked_model(model, f"models[{name!r}]") for name, model in models.items()}


def _checked_model(model: Model, field: str) -> Model:
    """``model``, when it is a Model.

    Raises:
        ConfigError: whose ``field`` is ``field``, saying what to pass.
    """
    if isinstance(model, Model):
        return model
    example = repr(model) if isinstance(model, str) else "'gpt-4o-mini'"
    raise ConfigError(
        f"{_shown(model)} is not a Model: pass a model (OpenAIModel({example}), "
        "OfflineModel() ...), or models by name ({'fast': model, ...})",
        field=field,
    )


def _checked_policy(policy: Policy | Mapping[str, Any] | None) -> Policy:
    """``policy`` as a Policy: a mapping is read as a hive file's ``policy:`` is.

    Raises:
        ConfigError: naming each field that is wrong, or the argument when it is
            neither a Policy nor a mapping (several: ``ConfigErrors``).
    """
    if policy is None:
        return Policy()
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, Mapping):
        try:
            return Policy.model_validate(policy)
        except ValidationError as exc:
            raise config_error(exc, Policy) from exc
    raise ConfigError(
        f"{_shown(policy)} is not a Policy: pass Policy(max_workers=4, ...), or its "
        "fields as a mapping ({'max_workers': 4})",
        field="policy",
    )


def _shown(value: object) -> str:
    """``value`` and its type, short: ``'gpt-4o' (a str)``."""
    return short(value) if value is None else f"{short(value)} (type {type(value).__name__})"


def _cassette_approvals(
    approver: Approver | None, models: Model | Mapping[str, Model]
) -> tuple[Approver | None, tuple[EventHandler, ...]]:
    """Who decides the calls of a run on ``models``, and what keeps the decisions
    (:func:`honeycomb.run.cassette_decisions.cassette_approvals`): a model of a
    cassette's was made by its module, so none is when that is not loaded."""
    if "runtime.models.layers.cassette" not in sys.modules:
        return approver, ()
    from honeycomb.run.cassette_decisions import cassette_approvals

    return cassette_approvals(approver, models)


def _one_file_each(store: RunStore | None, memory: Memory | None) -> None:
    """Refuse a memory whose file is the run store's: each keeps tables of its own in
    its file, and every recall of such a memory failed.

    Raises:
        ConfigError: naming the file.
    """
    path = getattr(memory, "path", None)  # an SQLite memory's file
    if store is None or store.path is None or path is None:
        return
    if os.path.realpath(store.path) == os.path.realpath(path):
        raise ConfigError(
            f"the memory's file {str(path)!r} is the run store's: give each a file of its own",
            field="memory",
        )


def _memory_priced(memory: Memory | None, roles: Iterable[Role]) -> bool:
    """Whether a role of ``roles`` uses ``memory`` and its embeddings have a price: a
    run's budget in dollars counts what they spend."""
    return embeddings_priced(memory) and any(role.memory is not None for role in roles)
