"""``Shared``: what every run of one Executor shares and follows.

The Executor checks its configuration and makes one ``Shared``; each run reads it
(its roles, models, policy, planner, aggregator, store) and the workers of every run
share its lock table for exclusive tools, its limiters and the setups of its roles.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
import msgspec
from pydantic import BaseModel

from honeycomb.run.aggregator import Aggregator
from honeycomb.run.mcp import McpTools
from honeycomb.run.planner import Planner
from honeycomb.run.policy import Policy
from runtime import (
    ConfigError,
    DuplicateToolError,
    EventHandler,
    LimitedModel,
    LockTable,
    Memory,
    Model,
    ToolRegistry,
)
from runtime.limits import limited
from runtime.model import held
from runtime.tools.approvals import Approver
from workers import Role, WorkerSetup
from workers.guards import ResolvedGuards

if TYPE_CHECKING:
    from honeycomb.run.context import Backend
    from honeycomb.store import RunStore

__all__ = ["Shared"]


class Shared:
    """What the runs of one Executor share.

    Attributes:
        roles: Every role, by name.
        models: The models by name, behind the policy's ``model_concurrency`` limiter.
        default_model: The model of roles that name none.
        policy: Parallelism, failure policy, budgets, timeouts and limits.
        planner: Makes a run's plan when the caller gives none (None: there is none).
        aggregator: Merges a run's results.
        output_type: The type the aggregator's answer must validate against.
        store: Where runs are kept, if anywhere.
        trace: Whether each run's spans are recorded (in the store).
        handlers: Called with every event of every run.
        log_events: Events also go to structlog, when it is configured.
        source: Where the Executor was declared (a hive file), kept with each run.
        memory: The long-term memory of the roles with ``memory:``.
        locks: The lock table of ``exclusive`` tools, shared by every worker.
        model_limiter: Bounds the model calls in flight across every run (the
            models' own, here).
        tool_limiter: Bounds the leaf tool calls in flight across every run.
        mcp: The MCP servers, and the roles' tools from them.
        approver: Decides on calls that need approval (None: they wait in the store).
        guards: The runs' own guards: on the task, the final answer and every call.
        backend: Where subtask workers run (None: in each run's own event loop).
    """

    def __init__(
        self,
        *,
        roles: Mapping[str, Role],
        models: Mapping[str, Model],
        default_model: str,
        setups: Mapping[str, WorkerSetup],
        policy: Policy,
        planner: Planner | None,
        aggregator: Aggregator,
        output_type: type[BaseModel] | None,
        store: RunStore | None,
        trace: bool,
        handlers: Sequence[EventHandler],
        log_events: bool,
        source: str | None,
        memory: Memory | None = None,
        mcp: McpTools | None = None,
        approver: Approver | None = None,
        guards: ResolvedGuards | None = None,
        backend: Backend | None = None,
    ) -> None:
        self.backend = backend
        self.roles = dict(roles)
        limiter = self.model_limiter = _limiter(policy.model_concurrency)
        self.models: dict[str, Model] = {
            name: LimitedModel(m, limiter) if limiter is not None else m
            for name, m in models.items()
        }
        self.default_model = default_model
        self.policy = policy
        self.planner = planner
        self.aggregator = aggregator
        self.output_type = output_type
        self.store = store
        self.trace = trace
        self.handlers = tuple(handlers)
        self.log_events = log_events
        self.source = source
        self.memory = memory
        self.approver = approver
        self.guards = guards or ResolvedGuards()
        self.paused: dict[str, Callable[[], None]] = {}
        """Runs under way in this process, by id: what tells their paused workers that
        a decision was recorded."""
        self.locks = LockTable()
        self.tool_limiter = _limiter(policy.tool_concurrency)
        # models_under's, made once a model and limiter
        self._under: dict[tuple[str, anyio.CapacityLimiter | None], Model] = {}
        self._setups: dict[tuple[Role | str, type[BaseModel] | None], WorkerSetup] = {
            (name, None): setup for name, setup in setups.items()
        }
        self.mcp = mcp or McpTools(())
        # Roles whose setups lack their MCP tools yet: their servers list them.
        self._unlisted = {name for name, role in self.roles.items() if self.mcp.refs(role)}

    @asynccontextmanager
    async def scope(self) -> AsyncIterator[None]:
        """A run's block: its tool calls reach the MCP servers (:meth:`McpTools.scope`),
        and it holds the models served from this process (llama.cpp), whose servers
        stop as the block ends unless the Executor's block holds them too."""
        async with self.mcp.scope(), held(self.models.values()):
            yield

    async def prepare(self, roles: Sequence[Role]) -> None:
        """Give these roles their MCP tools, as their servers list them (each server
        starts when first needed): before a worker of the role, or a catalog of roles,
        is made.

        Raises:
            McpServerError: when a server cannot be started.
            ConfigError: when a server has no tool a role names, or two of a role's
                tools have one name.
        """
        for role in roles:
            if role.name not in self._unlisted or self.roles.get(role.name) is not role:
                continue
            tools = await self.mcp.tools_of(role)
            own = self._setups[(role.name, None)]
            try:
                registry = ToolRegistry([*own.tools, *tools])
            except DuplicateToolError as exc:
                raise ConfigError(
                    f"role {role.name!r}: two of its tools are named {exc.tool_name!r} (one "
                    "of them from an MCP server): give one another name"
                ) from exc
            # Setups made for the role before (another output type) lack these tools.
            for key in [k for k in self._setups if k[0] == role.name]:
                del self._setups[key]
            # The role's setup as it was made (its memory tools and all), with these too.
            self._setups[(role.name, None)] = msgspec.structs.replace(own, tools=registry)
            self._unlisted.discard(role.name)

    def model_for(self, role: Role) -> Model:
        """The model ``role`` thinks with."""
        return self.models[_model_name(role, self.default_model)]

    def summarizer_for(self, role: Role) -> Model | None:
        """The model that writes ``role``'s summaries, when its compaction names one."""
        named = _summarizer_name(role)
        return self.models[named] if named is not None else None

    def models_under(
        self, limiter: anyio.CapacityLimiter | None
    ) -> tuple[Callable[[Role], Model], Callable[[Role], Model | None]]:
        """:meth:`model_for` and :meth:`summarizer_for` for a sub-run (a hive called
        as a tool), whose model calls are bounded by its caller's ``limiter``, as its
        tool calls are by its caller's tool limiter."""

        def under(name: str) -> Model:
            # One model for every worker of such runs (a backend installs each once).
            found = self._under.get((name, limiter))
            if found is None:
                found = self._under[(name, limiter)] = limited(self.models[name], limiter)
            return found

        def summarizer_for(role: Role) -> Model | None:
            named = _summarizer_name(role)
            return under(named) if named is not None else None

        return lambda role: under(_model_name(role, self.default_model)), summarizer_for

    def setup_for(self, role: Role, output_type: type[BaseModel] | None) -> WorkerSetup:
        """A role's resolved setup, made once and shared by all its workers and runs."""
        # Key registered roles by name: hashing a role hashes all its fields.
        key = (role.name if self.roles.get(role.name) is role else role, output_type)
        found = self._setups.get(key)
        if found is None:
            # A registered role's tools were resolved with the Executor: never again by
            # import path at run time (a hive's paths resolve only as the hive loads).
            own = self._setups.get((role.name, None)) if key[0] == role.name else None
            found = self._setups[key] = (
                WorkerSetup.of(role, None, output_type, self.memory)
                if own is None
                else own.retyped(output_type)
            )
        return found


def _limiter(capacity: int | None) -> anyio.CapacityLimiter | None:
    return anyio.CapacityLimiter(capacity) if capacity is not None else None


def _model_name(role: Role, default: str) -> str:
    """The name of the model ``role`` thinks with."""
    return role.model or default


def _summarizer_name(role: Role) -> str | None:
    """The name of the model that writes ``role``'s summaries, if its compaction names one."""
    return role.compaction.model if role.compaction is not None else None
