"""``Crew``: an Executor's roles with what each works with: its model, the model of
its summaries, its resolved setup (tools, output schema, guards, memory tools), and
the MCP tools its servers list when first needed."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager

import msgspec
from pydantic import BaseModel

from honeycomb.run.mcp import McpTools
from runtime import ConfigError, Memory, Model, ToolRegistry, did_you_mean
from runtime.limits import Slots, limited
from runtime.model import held
from workers import Role, WorkerSetup
from workers.role import unused_approval

__all__ = ["Crew"]


class Crew:
    """The roles of an Executor and what each works with, shared by all its runs.

    Args:
        roles: Every role, by name.
        models: The models by name (behind the Executor's model slots, if any).
        default_model: The model of roles that name none.
        setups: Each role's setup, resolved once.
        mcp: The MCP servers, and the roles' tools from them.
    """

    def __init__(
        self,
        roles: Mapping[str, Role],
        models: Mapping[str, Model],
        default_model: str,
        setups: Mapping[str, WorkerSetup],
        mcp: McpTools,
    ) -> None:
        self.roles = dict(roles)
        self.models = dict(models)
        self.default_model = default_model
        self.mcp = mcp
        self._setups: dict[tuple[Role | str, type[BaseModel] | None], WorkerSetup] = {
            (name, None): setup for name, setup in setups.items()
        }
        # Roles whose setups lack their MCP tools yet: their servers list them.
        self._unlisted = {name for name, role in self.roles.items() if mcp.refs(role)}
        self._under: dict[Slots | None, Crew] = {}  # under()'s, made once

    @asynccontextmanager
    async def scope(self) -> AsyncIterator[None]:
        """A run's block: its tool calls reach the MCP servers (:meth:`McpTools.scope`),
        and it holds the models served from this process (llama.cpp), whose servers
        stop as the block ends unless the Executor's block holds them too."""
        async with self.mcp.scope(), held(self.models.values()):
            yield

    def under(self, slots: Slots | None) -> Crew:
        """This crew for a sub-run (a hive called as a tool), its model calls bound by
        its caller's ``slots``, as its tool calls are by its caller's tool slots. One
        crew a caller's slots: a backend installs each of its models once."""
        found = self._under.get(slots)
        if found is None:
            models = {name: limited(m, slots) for name, m in self.models.items()}
            found = Crew(self.roles, models, self.default_model, {}, self.mcp)
            found._setups, found._unlisted = self._setups, self._unlisted  # one's are the other's
            self._under[slots] = found
        return found

    async def prepare(self, roles: Sequence[Role]) -> None:
        """Give these roles their MCP tools, as their servers list them (each server
        starts when first needed): before a worker of the role, or a catalog of roles,
        is made.

        Raises:
            McpServerError: when a server cannot be started.
            ConfigError: when a server has no tool a role names, two of a role's
                tools have one name, or its ``approvals`` names a misspelling of one
                of its tools (that call would run unasked).
        """
        for role in roles:
            if role.name not in self._unlisted or self.roles.get(role.name) is not role:
                continue
            own = self._setups[(role.name, None)]
            tools = await self.mcp.tools_of(role, besides=own.tools.names)
            registry = ToolRegistry([*own.tools, *tools])
            _check_approvals(role, registry.names)
            # Setups made for the role before (another output type, a copy told other
            # instructions) lack these tools.
            for key in [k for k in self._setups if _named(k[0]) == role.name]:
                del self._setups[key]
            # The role's setup as it was made (its memory tools and all), with these too.
            self._setups[(role.name, None)] = msgspec.structs.replace(own, tools=registry)
            self._unlisted.discard(role.name)

    def model_for(self, role: Role) -> Model:
        """The model ``role`` thinks with."""
        return self.models[role.model or self.default_model]

    def summarizer_for(self, role: Role) -> Model | None:
        """The model that writes ``role``'s summaries, when its compaction names one."""
        named = role.compaction.model if role.compaction is not None else None
        return self.models[named] if named is not None else None

    def setup_for(
        self, role: Role, output_type: type[BaseModel] | None, memory: Memory | None = None
    ) -> WorkerSetup:
        """A role's resolved setup, made once and shared by all its workers and runs
        (``memory``: the memory of a role with ``memory:`` that is not one of the
        crew's, whose setup is made now)."""
        # Key registered roles by name: hashing a role hashes all its fields.
        registered = self.roles.get(role.name)
        key = (role.name if registered is role else role, output_type)
        found = self._setups.get(key)
        if found is None:
            # A registered role's tools were resolved with the Executor: never again by
            # import path at run time (a hive's paths resolve only as the hive loads).
            # So are those of its copy told other instructions (a planner's or an
            # aggregator's without their own get Honeycomb's): its agent, hive, MCP
            # and Executor's tools are the registered role's.
            retold = (
                registered is not None
                and registered.model_copy(update={"instructions": role.instructions}) == role
            )
            own = self._setups.get((role.name, None)) if retold else None
            # No output type given: the role's own (its output_schema), as of() takes it.
            typed = own if own is None or output_type is None else own.retyped(output_type)
            if typed is None:
                found = WorkerSetup.of(role, None, output_type, memory)
            elif key[0] == role.name:
                found = typed
            else:
                found = msgspec.structs.replace(typed, role=role, system_prompt=role.system_prompt)
            self._setups[key] = found
        return found


def _named(role: Role | str) -> str:
    """The name of a role, or of the registered role a setup is keyed by."""
    return role if isinstance(role, str) else role.name


def _check_approvals(role: Role, names: Sequence[str]) -> None:
    """Raise if ``role``'s approvals name a misspelling of one of its tools, now that its
    MCP server listed them. A name close to none of them is a hive's ``approvals:``
    name for another role (a role with MCP tools is given all of them).

    Raises:
        ConfigError: naming it, and what it may have meant.
    """
    rule = role.approvals
    for name in rule.tools if rule is not None else ():
        if name not in names and did_you_mean(name, names):
            raise ConfigError(f"role {role.name!r}: {unused_approval(name, names)}")
