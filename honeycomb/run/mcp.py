"""``McpTools``: the MCP servers of an Executor, and the tools its roles take from them.

Inside ``async with executor:`` the servers are the Executor's: each starts when a
worker first needs its tools, is shared by every worker of every run, and stops when
the block ends. A run outside such a block starts the servers it needs itself and
stops them when it ends. Either way, each run may start a server that went away again
once (:class:`runtime.tools.mcp.McpRun`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from runtime import ConfigError, HoneycombError, Tool
from runtime.concurrency import together
from runtime.tools.mcp import (
    McpRun,
    McpServer,
    McpServers,
    by_name,
    current_mcp_run,
    mcp_ref,
    mcp_tools,
    pick_tools,
    taken_twice,
    unlisted_settings,
    unusable,
)
from workers import Role

__all__ = ["McpTools"]


class McpTools:
    """The MCP servers of an Executor, started lazily; their tools by server.

    Args:
        servers: The servers the roles may name (``server:tool``, ``server:*``).

    Raises:
        ConfigError: when one is not an ``McpServer``, or two have one name.
    """

    def __init__(self, servers: Sequence[McpServer]) -> None:
        self.servers = by_name(servers)
        self._host: McpServers | None = None
        self._tools: dict[str, dict[str, Tool[..., Any]]] = {}
        self._unfit: dict[str, dict[str, str]] = {}  # tools no model can be offered, why

    def __repr__(self) -> str:
        return f"McpTools({list(self.servers)})"

    def refs(self, role: Role) -> list[tuple[str, str]]:
        """The role's MCP tools, as ``(server, tool or "*")``."""
        found = (mcp_ref(ref, self.servers) for ref in role.tools)
        return [ref for ref in found if ref is not None]

    def asks(self, role: Role) -> bool:
        """Whether an MCP tool the role takes is marked ``approval: true`` under its
        server's ``tools:`` (known before the server lists its tools)."""
        return any(
            settings.approval and wanted in ("*", name)
            for server, wanted in self.refs(role)
            for name, settings in self.servers[server].tools.items()
        )

    async def open(self) -> None:
        """Hold the servers for every run until :meth:`close` (none starts yet): the
        Executor does, for its blocks (a service's handlers may each open one)."""
        if self.servers and self._host is None:
            host = McpServers(self.servers.values())
            await host.__aenter__()
            self._host = host

    async def close(self) -> None:
        """Stop every server that started (each process ends)."""
        host, self._host = self._host, None
        if host is not None:
            await host.__aexit__(None, None, None)

    @asynccontextmanager
    async def scope(self) -> AsyncIterator[None]:
        """A run's block: its tool calls reach the Executor's servers (inside
        ``async with executor``), or servers of its own, stopped as the block ends."""
        if not self.servers:
            yield
            return
        if self._host is not None:
            with self._host.run():
                yield
            return
        async with McpServers(self.servers.values()) as own:
            with own.run():
                yield

    async def tools_of(self, role: Role, besides: Iterable[str] = ()) -> list[Tool[..., Any]]:
        """The role's MCP tools, from its servers' lists (each starts if it has not;
        its list is read once, for every run), beside its own tools named ``besides``.

        Raises:
            McpServerError: when a server cannot be started.
            ConfigError: when a server has no tool the role names (or its ``tools:``
                names), or one the role would take has the name of another (its own,
                or another server's): an MCP tool cannot be renamed, and the error says
                what can be done.
        """
        refs = self.refs(role)
        unlisted = [name for name in dict.fromkeys(s for s, _ in refs) if name not in self._tools]
        failed = dict(zip(unlisted, await self._list(unlisted), strict=True))
        picked: list[Tool[..., Any]] = []
        servers: dict[str, str | None] = dict.fromkeys(besides)  # whose each name is
        for server, wanted in refs:
            tools = self._tools.get(server)
            if tools is None:  # the first of its servers' errors, in the role's order
                raise failed[server] or RuntimeError(f"MCP server {server!r} was not listed")
            try:
                found = pick_tools(server, tools, wanted, self._unfit.get(server))
            except ConfigError as exc:
                raise ConfigError(f"role {role.name!r}: {exc.message}") from exc
            problem = taken_twice(servers, server, found, wanted)
            if problem is not None:
                raise ConfigError(f"role {role.name!r}: {problem}")
            picked += found
        return picked

    async def _list(self, names: Sequence[str]) -> list[HoneycombError | None]:
        """List servers ``names``, together (each starts if it has not): what each
        failed with, or None."""
        if not names:
            return []
        run = current_mcp_run()
        if run is None:  # the Executor opens a run's block before its workers
            raise RuntimeError("MCP tools are listed in a run's block (McpTools.scope)")

        async def listed(name: str) -> HoneycombError | None:
            try:
                await self._listed(run, name)
            except HoneycombError as exc:
                return exc
            return None

        first, rest = await together(listed(names[0]), [listed(name) for name in names[1:]])
        return [first, *rest]

    async def _listed(self, run: McpRun, name: str) -> dict[str, Tool[..., Any]]:
        """The tools server ``name`` lists, kept for every run once they are as its
        ``tools:`` says (the first time it starts).

        Raises:
            ConfigError: when ``tools:`` names one it does not list (a misspelt name
                would leave its tool as its hints say).
        """
        server = self.servers[name]
        listed = await run.listed(name)
        tools, unfit = mcp_tools(server, listed), unusable(listed)
        problems = unlisted_settings(server, tools, unfit)
        if problems:
            raise ConfigError(f"mcp_servers.{name}.tools: {'; '.join(problems.values())}")
        self._unfit.setdefault(name, unfit)
        return self._tools.setdefault(name, tools)
