"""A hive's ``mcp_servers:``: each server is a :class:`~runtime.tools.mcp.McpServer` named by
its key; here is how one is read, where it runs, and the check ``honeycomb validate``
makes of them (start each, list its tools, find every tool the roles name, stop them).

A stdio server runs in the hive's folder unless ``cwd:`` says otherwise (relative to
the hive file). ``env:`` and ``headers:`` values are secrets: ``${NAME}`` reads them
from the environment as the hive loads, and no error or repr shows them.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from msgspec.structs import replace

from honeycomb.hive.paths import beside
from runtime import (
    ConfigError,
    HoneycombError,
    McpServerError,
    Tool,
    ToolRegistry,
    YamlDocument,
)
from runtime.config.yaml_config import YamlPlace
from runtime.secrets import is_plain
from runtime.tools.mcp import (
    McpServer,
    McpServers,
    mcp_ref,
    mcp_tools,
    pick_tools,
    taken_twice,
    unlisted_settings,
    unusable,
)
from workers import Role
from workers.nesting import is_nested_ref, nested_tool_name
from workers.role import approval_problems

__all__ = ["approvals_problems", "as_written", "check_servers", "in_folder", "names_not_keys"]


def as_written(servers: Any) -> Any:
    """``mcp_servers:`` as :class:`~runtime.tools.mcp.McpServer` takes it: each server named
    by its key, and an argument or variable written as a number (``[--port, 8080]``)
    as its text."""
    if not isinstance(servers, Mapping):
        return servers
    return {name: _server(name, server) for name, server in servers.items()}


def _server(name: Any, server: Any) -> Any:
    if not isinstance(server, Mapping):
        return server
    server = {**server, "name": name}
    if isinstance(server.get("args"), list):
        server["args"] = [_text(arg) for arg in server["args"]]
    if isinstance(server.get("env"), Mapping):
        server["env"] = {key: _text(value) for key, value in server["env"].items()}
    return server


def names_not_keys(doc: YamlDocument) -> list[ConfigError]:
    """An error at the ``name:`` of each server of ``mcp_servers:`` that is not its key:
    the key names a server (roles name its tools ``KEY:tool``), as a role's does, and a
    name other than it would be dropped unsaid."""
    servers = doc.data.get("mcp_servers")
    if not isinstance(servers, Mapping):
        return []
    return [
        doc.error(
            ("mcp_servers", key, "name"),
            f"name {server['name']!r} differs from key {key!r}: the key names the server "
            f"(roles name its tools {key}:TOOL); leave name: out, or rename the key",
        )
        for key, server in servers.items()
        if isinstance(server, Mapping) and "name" in server and server["name"] != key
    ]


def _text(value: Any) -> Any:
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


def with_secrets(server: McpServer, doc: YamlDocument) -> McpServer:
    """``server`` with the values its ``args`` or its ``url`` took from the environment
    (``--token ${TOKEN}``; ``https://host/${KEY}/mcp``, for a server that takes its key
    in its path) among its secrets, but for variables that hold settings
    (:data:`~runtime.secrets.PLAIN_VARIABLES`: ``${HOME}`` is no secret)."""
    written = (*server.args, server.url or "")
    found = [
        value
        for value, source in doc.hidden.items()
        if source.startswith("$")
        and not is_plain(source[1:])
        and any(value in part for part in written)
    ]
    if not found:
        return server
    return replace(server, secrets=tuple(dict.fromkeys((*server.secrets, *found))))


def in_folder(server: McpServer, folder: Path) -> McpServer:
    """``server`` as a hive in ``folder`` runs it: a stdio server in that folder, or in
    its ``cwd`` relative to it, its ``command`` from the home folder when it starts
    with ``~`` (``~/venvs/mcp/bin/python``, as a shell reads it)."""
    if server.command is None:
        return server
    cwd = folder if server.cwd is None else beside(folder, server.cwd)
    return replace(server, command=os.path.expanduser(server.command), cwd=str(cwd))


async def check_servers(
    servers: Sequence[McpServer],
    roles: Mapping[str, Role],
    doc: YamlDocument,
    places: Mapping[str, YamlPlace],
) -> tuple[dict[str, dict[str, Tool[..., Any]]], list[ConfigError]]:
    """Start every server at once, list its tools, check that each tool the roles name
    (and each tool ``tools:`` sets) is there, and stop them all.

    Args:
        servers: The hive's servers.
        roles: Its roles.
        doc: The hive file, to locate the errors about the servers in.
        places: Where each role is written, to locate the errors about its tools in.

    Returns:
        The tools of each server that started, by their MCP names, and every problem.
    """
    listed: dict[str, Any] = {}
    errors: list[ConfigError] = []
    doc = _settings_shown(doc, servers)
    async with McpServers(servers) as live:
        with live.run() as run:

            async def start(server: McpServer) -> None:
                try:
                    listed[server.name] = await run.listed(server.name)
                except McpServerError as exc:
                    errors.append(doc.error(("mcp_servers", server.name), str(exc)))

            async with asyncio.TaskGroup() as group:
                for server in servers:
                    group.create_task(start(server))
    tools_of: dict[str, dict[str, Tool[..., Any]]] = {}
    for server in servers:
        if server.name not in listed:
            continue
        tools = tools_of[server.name] = mcp_tools(server, listed[server.name])
        unfit = unusable(listed[server.name])
        for name, problem in unlisted_settings(server, tools, unfit).items():
            errors.append(doc.error(("mcp_servers", server.name, "tools", name), problem))
        for role in roles.values():
            for index, ref in enumerate(role.tools):
                found = mcp_ref(ref, (server.name,))
                if found is None:
                    continue
                try:
                    pick_tools(server.name, tools, found[1], unfit)
                except ConfigError as exc:
                    errors.append(places[role.name].error(("tools", index), exc.message))
    for role in roles.values():
        errors += _one_name_twice(role, tools_of, places[role.name])
    return tools_of, errors


def _settings_shown(doc: YamlDocument, servers: Sequence[McpServer]) -> YamlDocument:
    """``doc`` showing the values of the servers' ``env:`` variables that hold settings
    (``PYTHONPATH``, ``HOME`` ...: :data:`~runtime.secrets.PLAIN_VARIABLES`), which it
    hides as it hides every value of ``env:``: a run shows them (its paths in what a
    server says as it fails), and so does ``validate``."""
    plain = {value for s in servers for name, value in s.env.items() if is_plain(name)}
    hidden = {v: what for v, what in doc.hidden.items() if not (v in plain and what == "secret")}
    return doc if len(hidden) == len(doc.hidden) else replace(doc, hidden=hidden)


def _one_name_twice(
    role: Role, tools_of: Mapping[str, Mapping[str, Tool[..., Any]]], place: YamlPlace
) -> list[ConfigError]:
    """A tool of a listed server that the role would take beside another of its name:
    a server's, or its own (a tool it names without ``server:``), as a run refuses it."""
    whose: dict[str, str | None] = dict.fromkeys(_own_names(role, tools_of))
    refs = [(index, ref, mcp_ref(ref, tools_of)) for index, ref in enumerate(role.tools)]
    errors: list[ConfigError] = []
    for index, _, found in refs:
        if found is None:
            continue
        server, wanted = found
        try:
            picked = pick_tools(server, tools_of[server], wanted)
        except ConfigError:
            continue  # told above
        problem = taken_twice(whose, server, picked, wanted)
        if problem is not None:
            errors.append(place.error(("tools", index), problem))
    return errors


def _own_names(role: Role, servers: Collection[str]) -> list[str]:
    """The names of the role's own tools known without an import, as a run has them
    beside its MCP tools: a registered tool's, an agent or hive tool's (its role's, its
    file's stem), and memory's ``recall`` and ``remember``."""
    names = [ref for ref in role.tools if ":" not in ref]
    names += [
        nested_tool_name(ref)
        for ref in role.tools
        if is_nested_ref(ref) and mcp_ref(ref, servers) is None
    ]
    if role.memory is not None and role.memory.remember:
        names += ["recall", "remember"]
    return names


def approvals_problems(
    servers: Sequence[str],
    listed: Mapping[str, Mapping[str, Tool[..., Any]]],
    roles: Mapping[str, Role],
    registry: ToolRegistry,
    doc: YamlDocument,
    places: Mapping[str, YamlPlace],
) -> list[ConfigError]:
    """Names in ``approvals:`` that no tool has, found now that the servers ``listed``
    their tools: a role's own that it does not use, and the hive's that no role uses.
    The hive's loading checked the roles without MCP tools; a misspelt name would never
    ask (a run fails the role's workers as it starts).

    Args:
        servers: The names of the hive's servers.
        listed: The tools of each server that started, by their MCP names.
        roles: The hive's roles, each with its approvals (the hive's, when it has none).
        registry: Where the roles' other tool names are looked up.
        doc: The hive file, to locate the errors about its own ``approvals:`` in.
        places: Where each role is written, to locate the errors about its own in.
    """
    errors: list[ConfigError] = []
    used: dict[str, None] = {}  # every role's tool names, in order, once each
    complete, with_mcp = True, False
    for role in roles.values():
        try:
            names = role.tool_names(registry, servers=servers, listed=listed)
        except HoneycombError:  # a tool its server lacks: told with the servers' tools
            names = None
        if names is None:  # a server of its did not start
            complete = False
            continue
        used.update(dict.fromkeys(names))
        if not any(mcp_ref(ref, servers) is not None for ref in role.tools):
            continue
        with_mcp = True
        place = places[role.name]  # its own approvals, where its file has them
        own = place.written.get("approvals") if isinstance(place.written, Mapping) else None
        errors += approval_problems(own, names, place.doc, place.path)
    if complete and with_mcp:
        unused = "which no role of the hive uses"
        errors += approval_problems(doc.data.get("approvals"), sorted(used), doc, (), unused)
    return errors
