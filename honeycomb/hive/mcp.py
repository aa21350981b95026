"""A hive's ``mcp_servers:``: each server as written, what it builds, and the check
``honeycomb validate`` makes of them (start each, list its tools, find every tool the
roles name, stop them).

A stdio server runs in the hive's folder unless ``cwd:`` says otherwise (relative to
the hive file). ``env:`` and ``headers:`` values are secrets: ``${NAME}`` reads them
from the environment as the hive loads, and no error or repr shows them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SecretStr, model_validator

from runtime import ConfigError, McpServerError, YamlDocument, did_you_mean
from runtime.tools.mcp import McpServer, McpServers, McpToolSettings, mcp_ref, mcp_tools, pick_tools
from workers import Role

__all__ = ["McpServerSpec", "check_servers"]


def _text(value: Any) -> Any:
    """An argument written as a number (``[--port, 8080]``) is its text."""
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


class McpToolSpec(BaseModel):
    """How one tool of a server runs, instead of as its annotations say."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    side_effects: bool | None = None
    exclusive: str | None = None
    idempotent: bool | None = None
    timeout: float | None = Field(default=None, gt=0)


class McpServerSpec(BaseModel):
    """One MCP server of the hive: ``command:`` (stdio) or ``url:`` (streamable HTTP)."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    command: str | None = None
    args: list[Annotated[str, BeforeValidator(_text)]] = Field(default_factory=list)
    env: dict[str, Annotated[SecretStr, BeforeValidator(_text)]] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    start_timeout: float = Field(default=30.0, gt=0)
    tools: dict[str, McpToolSpec] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_kind(self) -> Self:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                "give command: (a stdio server, with args:, env:, cwd:) or url: (a "
                "streamable-HTTP server, with headers:), not both"
            )
        stdio = self.args or self.env or self.cwd is not None
        if self.url is not None and stdio:
            raise ValueError("args:, env: and cwd: are for a stdio server (command:)")
        if self.command is not None and self.headers:
            raise ValueError("headers: are for a streamable-HTTP server (url:)")
        return self

    def build(self, name: str, folder: Path) -> McpServer:
        """The server, its ``cwd`` relative to ``folder`` (the hive's)."""
        tools = {tool: McpToolSettings(**spec.model_dump()) for tool, spec in self.tools.items()}
        timeout = self.start_timeout
        if self.url is not None:
            headers = {k: v.get_secret_value() for k, v in self.headers.items()}
            return McpServer(
                name=name, url=self.url, headers=headers, start_timeout=timeout, tools=tools
            )
        return McpServer(
            name=name,
            command=self.command,
            args=tuple(self.args),
            env={k: v.get_secret_value() for k, v in self.env.items()},
            cwd=str(folder / self.cwd if self.cwd is not None else folder),
            start_timeout=timeout,
            tools=tools,
        )


async def check_servers(
    servers: Sequence[McpServer],
    roles: Mapping[str, Role],
    doc: YamlDocument,
    inline: Sequence[str],
) -> tuple[dict[str, int], list[ConfigError]]:
    """Start every server at once, list its tools, check that each tool the roles name
    (and each tool ``tools:`` sets) is there, and stop them all.

    Args:
        servers: The hive's servers.
        roles: Its roles.
        doc: The hive file, to locate the errors in.
        inline: The roles written in the hive file (the others are in ``roles_dir``).

    Returns:
        The number of tools of each server that started, and every problem.
    """
    listed: dict[str, Any] = {}
    errors: list[ConfigError] = []
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
    counts: dict[str, int] = {}
    for server in servers:
        if server.name not in listed:
            continue
        tools = mcp_tools(server, listed[server.name])
        counts[server.name] = len(tools)
        for name in server.tools:
            if name not in tools:
                errors.append(
                    doc.error(
                        ("mcp_servers", server.name, "tools", name),
                        f"MCP server {server.name!r} has no tool {name!r}"
                        f"{did_you_mean(name, tools)}; its tools: {', '.join(sorted(tools))}",
                    )
                )
        for role in roles.values():
            for index, ref in enumerate(role.tools):
                found = mcp_ref(ref, (server.name,))
                if found is None:
                    continue
                try:
                    pick_tools(server.name, tools, found[1])
                except ConfigError as exc:
                    where = ("roles", role.name, "tools", index)
                    if role.name in inline:
                        errors.append(doc.error(where, exc.message))
                    else:
                        field = f"roles_dir role {role.name!r}, tools[{index}]"
                        errors.append(ConfigError(exc.message, file=doc.file, field=field))
    return counts, errors
