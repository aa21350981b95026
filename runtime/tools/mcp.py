"""Tools from MCP servers.

An :class:`McpServer` declares a server: a command run as a subprocess that speaks MCP
over stdio, or the URL of a streamable-HTTP server. :class:`McpServers` holds the live
connections: each server starts on first use, in a task of its own, is shared by
every call, and stops when the block ends (a stdio server's process with it).

The tools are the server's own: their input schemas come from its list, and their
annotations say how dispatch runs them: ``readOnlyHint`` makes a tool parallel-safe;
any other tool has side effects (run one at a time, in order, journaled);
``idempotentHint`` makes it idempotent. :class:`McpToolSettings` overrides that per
tool. A call runs through the dispatcher like any tool (timeouts, cancellation,
ordering, the journal); what goes wrong on the server's side is the call's error
observation: a tool's ``isError`` with its message, a protocol error, a server that
died. A call reaches the servers of the run making it (:meth:`McpServers.run`), which
starts a server that went away again once; after that, its calls say it is down. A
side-effecting call cut off (its time limit, a cancellation) may go on in its server,
so that server takes no more calls and is started anew for the next
(:meth:`McpServers.call`): no later call overlaps it.

A role names MCP tools as ``server:tool`` or ``server:*``, where ``server`` is a
declared server: any other name with a colon is an import path
(``package.module:function``).

The ``mcp`` SDK is imported with the first server that starts.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from types import TracebackType
from typing import TYPE_CHECKING, Annotated, Any, Self

import anyio.to_thread
import msgspec
from msgspec import Meta

from runtime import logs
from runtime.concurrency import TimedOut, shielded, within
from runtime.config.endpoints import (
    endpoint_secrets,
    header_name_problem,
    header_value_problem,
    http_url_problem,
)
from runtime.errors import (
    CallNotSent,
    ConfigError,
    McpServerError,
    ModelRetry,
    ServerGone,
    did_you_mean,
)
from runtime.secrets import (
    add_env,
    add_header,
    add_secret,
    mask_error,
    masked_with,
)
from runtime.tools.define import Tool
from runtime.value import Settings

if TYPE_CHECKING:
    from runtime.tools._mcp_sdk import Listed, Session

__all__ = [
    "McpRun",
    "McpServer",
    "McpServers",
    "McpToolSettings",
    "by_name",
    "current_mcp_run",
    "mcp_ref",
    "mcp_tools",
    "pick_tools",
    "taken_twice",
    "unlisted_settings",
    "unusable",
]


class McpToolSettings(Settings, frozen=True, kw_only=True):
    """How one MCP tool runs, where its annotations are not to be trusted (None: as
    its annotations say): ``tools:`` of a hive's MCP server.

    Attributes:
        side_effects: Runs one at a time, in order, journaled.
        exclusive: A lock key; calls sharing it never overlap, across workers too.
        idempotent: Running it twice has the effect of running it once.
        timeout: Seconds a call may take.
        approval: A person must approve each call before it runs, whichever role
            makes it (as ``@tool(approval=True)``).
    """

    side_effects: bool | None = None
    exclusive: str | None = None
    idempotent: bool | None = None
    timeout: Annotated[float, Meta(gt=0)] | None = None
    approval: bool = False


class McpServer(Settings, frozen=True, kw_only=True):
    """One MCP server: a stdio command (``command``, ``args``, ``env``, ``cwd``) or a
    streamable-HTTP endpoint (``url``, ``headers``); a hive's ``mcp_servers:`` names
    each by its key.

    Attributes:
        name: How roles name it (``name:tool``, ``name:*``).
        command: The program to run (stdio).
        args: Its arguments.
        secrets: Values its ``args`` (or its ``url``) hold that are secrets (a token
            given as ``--token ${TOKEN}``, a key in a URL's path; a hive names those
            its ``${NAME}`` put there): masked wherever a run shows one, as ``env``'s
            values are.
        env: Variables set for it, over a safe few inherited (``PATH``, ``HOME`` ...).
        cwd: The folder it runs in (None: the current one; in a hive, relative to the
            hive file).
        url: The endpoint (streamable HTTP).
        headers: Sent with every request (``Authorization``); never shown.
        max_connections: Calls a streamable-HTTP server has under way at once (each
            a connection): those past it wait for one to end, however long (None:
            100).
        start_timeout: Seconds it may take to start and list its tools; a stdio server
            not started by then is killed.
        max_message_mb: Megabytes one message of the server may take (a line of a
            stdio server's output, of a streamable-HTTP server's answer): one that sends
            a longer one (or a line that never ends) is broken (a stdio server is
            killed, a connection dropped), and the calls under way are told so.
        tools: Per tool (by its MCP name), how it runs instead of as its annotations say.

    Raises:
        ConfigError: when it has neither or both of ``command`` and ``url``, options
            of the other kind, a name that is not ``[A-Za-z0-9_-]``, or a field not of
            its type (``args="-m x"``).
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()
    env: dict[str, str] = msgspec.field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    max_connections: Annotated[int, Meta(ge=1)] | None = None
    start_timeout: Annotated[float, Meta(gt=0)] = 30.0
    max_message_mb: Annotated[float, Meta(gt=0)] = 64.0
    tools: dict[str, McpToolSettings] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()  # each field of its type, within its bounds
        where = f"MCP server {self.name!r}"
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", self.name):
            raise ConfigError(f"{where}: a name uses only letters, digits, '_' and '-'")
        if (self.command is None) == (self.url is None):
            raise ConfigError(
                f"{where}: give a command (a stdio server) or a url (a streamable-HTTP "
                "server), not both"
            )
        if self.command is not None and not self.command.strip():
            raise ConfigError(f"{where}: its command is empty")
        if self.url is not None and (self.args or self.env or self.cwd is not None):
            raise ConfigError(f"{where}: args, env and cwd are for a stdio server (command)")
        if self.command is not None and (self.headers or self.max_connections is not None):
            raise ConfigError(
                f"{where}: headers and max_connections are for a streamable-HTTP server (url)"
            )
        problem = http_url_problem(self.url, "url") if self.url is not None else None
        if self.url is not None and problem is None:  # sent as it was checked: stripped
            msgspec.structs.force_setattr(self, "url", self.url.strip())
        for name, value in self.headers.items():
            problem = problem or header_name_problem(name) or header_value_problem(value)
        if problem is not None:  # else it fails as it starts, in httpx's words
            raise ConfigError(f"{where}: {problem}")

    def __repr__(self) -> str:  # never the values of env and headers: they hold secrets
        # Nor a password or a token in a URL, or a secret its args hold.
        hidden = dict.fromkeys(self.passwords, "password") | dict.fromkeys(self.secrets, "secret")
        if self.url is not None:
            shown = f"url={masked_with(self.url, hidden)!r}"
        else:
            shown = f"command={self.command!r}, args={masked_with(repr(self.args), hidden)}"
        for field in ("env", "headers"):
            keys = sorted(getattr(self, field))
            if keys:
                shown += f", {field}={{{', '.join(f'{k!r}: ***' for k in keys)}}}"
        return f"McpServer({self.name!r}, {shown})"

    @property
    def passwords(self) -> list[str]:
        """The passwords and tokens of the URLs in its ``url`` and its ``args`` (a
        database's ``postgresql://user:PASSWORD@host/db``, ``?token=``, a token written
        as an HTTP URL's user, ``https://TOKEN@host/mcp``:
        :func:`~runtime.config.endpoints.endpoint_secrets`); those in its ``env`` are its
        env's secrets (:func:`~runtime.secrets.add_env`)."""
        return endpoint_secrets(" ".join((self.url or "", *self.args)))


_CONNECTIONS = 100
"""Calls a streamable-HTTP server has under way at once, unless its ``max_connections``
says otherwise: each holds a connection, a file of the process's (a few thousand at
once ran out of them, and every call under way lost its connection)."""


def by_name(servers: Iterable[McpServer]) -> dict[str, McpServer]:
    """``servers`` by their names, as roles name them (``name:tool``).

    Raises:
        ConfigError: at ``mcp_servers``, when they are one server rather than a list of
            them, when one is not an :class:`McpServer` (a dict of its fields), or when
            two have one name (a role's ``name:tool`` would reach only one of them).
    """
    if isinstance(servers, McpServer):
        raise ConfigError(
            f"must be a list of servers (got one, {servers.name!r}: put it in a list)",
            field="mcp_servers",
        )
    found: dict[str, McpServer] = {}
    for index, server in enumerate(servers):
        if not isinstance(server, McpServer):
            raise ConfigError(
                f"must be an McpServer(...) (got {type(server).__name__})",
                field=f"mcp_servers[{index}]",
            )
        if server.name in found:
            raise ConfigError(
                f"two servers are named {server.name!r}: give each its own name (roles "
                f"name a server's tools {server.name}:tool)",
                field=f"mcp_servers[{index}]",
            )
        found[server.name] = server
    return found


def mcp_ref(ref: str, servers: Collection[str]) -> tuple[str, str] | None:
    """``(server, tool)`` for a role's tool name ``server:tool`` (``tool`` is ``*`` for
    all) when ``server`` is declared; None for any other name (a registry name, an
    import path ``package.module:function``)."""
    server, colon, tool = ref.partition(":")
    return (server, tool) if colon and server in servers else None


def mcp_tools(server: McpServer, listed: Iterable[Listed]) -> dict[str, Tool[..., Any]]:
    """The tools of ``server`` as it listed them, by their MCP names: but those a model
    cannot be offered (:func:`unusable`).

    Names the model cannot call by (MCP allows ``.`` and ``/``, and more than 64
    characters) have those characters as ``_``, and are cut to 64; the call goes by the
    MCP name. See :func:`_called` for two that come to one name so.
    """
    items = tuple(listed)
    called = _called([item.name for item in items])
    return {
        item.name: _tool(server, item, called[item.name]) for item in items if item.problem is None
    }


def unusable(listed: Iterable[Listed]) -> dict[str, str]:
    """The tools a server listed that a model cannot be offered, by their MCP names,
    each with why (its input schema is no JSON schema): a role that takes one fails
    naming it (:func:`pick_tools`), and a role that takes the server's others does
    not."""
    return {item.name: item.problem for item in listed if item.problem is not None}


def _called(names: Iterable[str]) -> dict[str, str]:
    """The name a model calls each tool by, by its MCP name: the MCP name, with the
    characters a model cannot call by as ``_``, cut to 64. Two that come to one name so
    (``a.b`` and ``a_b``; two long names alike in their first 64 characters) are told
    apart: each whose MCP name it is not ends in ``_`` and six hex digits of a hash of
    its MCP name, the same whatever the order of the list."""
    called = {name: re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "tool" for name in names}
    taken = Counter(called.values())
    for name, model in called.items():
        if taken[model] > 1 and name != model:
            called[name] = f"{model[:57]}_{hashlib.sha256(name.encode()).hexdigest()[:6]}"
    return called


def pick_tools(
    server: str,
    tools: Mapping[str, Tool[..., Any]],
    wanted: str,
    unfit: Mapping[str, str] | None = None,
) -> list[Tool[..., Any]]:
    """The tools a role's ``server:wanted`` names: all of them for ``*``.

    Args:
        server: The server's name.
        tools: Its tools, by their MCP names.
        wanted: A tool's MCP name, or ``*``.
        unfit: The tools it listed that a model cannot be offered, each with why
            (:func:`unusable`).

    Raises:
        ConfigError: naming the tool the server does not have, with its tools; or one
            it has that a model cannot be offered, with why.
    """
    unfit = unfit or {}
    if wanted == "*" and unfit:
        name, why = next(iter(unfit.items()))
        raise ConfigError(
            f"MCP server {server!r} lists its tool {name!r} so that no model can be offered "
            f"it: {why}; name the tools the role is to have one by one, without it (not "
            f"{server}:*)"
        )
    if wanted in unfit:
        raise ConfigError(
            f"MCP server {server!r} lists its tool {wanted!r} so that no model can be "
            f"offered it: {unfit[wanted]}"
        )
    if wanted == "*":
        return list(tools.values())
    found = tools.get(wanted)
    if found is None:
        names = sorted(tools)
        raise ConfigError(
            f"MCP server {server!r} has no tool {wanted!r}{did_you_mean(wanted, names)}; "
            f"its tools: {', '.join(names) or 'none'}"
        )
    return [found]


def unlisted_settings(
    server: McpServer, tools: Mapping[str, Tool[..., Any]], unfit: Collection[str] = ()
) -> dict[str, str]:
    """The names under ``server``'s ``tools:`` that it does not list (in ``tools``, or
    ``unfit``: those it lists that a model cannot be offered), each with what is wrong
    (a misspelt name would leave its tool as its hints say: one marked ``approval``
    would never ask)."""
    names = sorted(tools)
    return {
        name: f"MCP server {server.name!r} has no tool {name!r}{did_you_mean(name, names)}; "
        f"its tools: {', '.join(names) or 'none'}"
        for name in server.tools
        if name not in tools and name not in unfit
    }


def taken_twice(
    whose: dict[str, str | None], server: str, tools: Iterable[Tool[..., Any]], wanted: str = "*"
) -> str | None:
    """Note in ``whose`` (by name, the server of each tool a role takes; None for a tool
    of its own) the ``tools`` it takes of ``server`` (as ``server:wanted`` names them);
    what is wrong, and what can be done, with the first that has the name of another
    (None: none has). An MCP tool cannot be renamed."""
    for tool in tools:
        other = whose.setdefault(tool.name, server)
        if other != server:
            return _twice(tool.name, server, other, every=wanted == "*")
    return None


def _twice(name: str, server: str, other: str | None, *, every: bool) -> str:
    """What is wrong with a second tool of one name, and what can be done (``every``:
    the role takes every tool of ``server``, by ``server:*``)."""
    if other is None:
        leave = (
            f"name the server's tools it is to have one by one, without that one (not {server}:*)"
            if every
            else f"leave out {server}:{name}"
        )
        return (
            f"its own tool {name!r} and MCP server {server!r}'s have one name: give its own "
            f"another (a function's with @tool(name=...); an agent or hive tool has its "
            f"role's or file's), or {leave}"
        )
    both = f"MCP servers {other!r} and {server!r} both have a tool {name!r}"
    if not every:
        return f"{both}: the role can take one of them only ({other}:{name} or {server}:{name})"
    return (
        f"{both}: name the one the role is to have ({other}:{name} or {server}:{name}), "
        "not every tool of both (server:*)"
    )


def _tool(server: McpServer, listed: Listed, name: str) -> Tool[..., Any]:
    settings = server.tools.get(listed.name) or McpToolSettings()
    # Hints, as the MCP spec defines their defaults: a tool not declared read-only may
    # change its world, and is not idempotent unless it says so.
    side_effects = settings.side_effects
    if side_effects is None:
        side_effects = listed.read_only is not True
    idempotent = settings.idempotent
    if idempotent is None:
        idempotent = listed.idempotent is True
    return Tool(
        _caller(server.name, listed.name, serial=side_effects or settings.exclusive is not None),
        name=name,
        description=listed.description,
        parameters=listed.parameters,
        side_effects=side_effects,
        exclusive=settings.exclusive,
        idempotent=idempotent,
        timeout=settings.timeout,
        approval=settings.approval,
        pinned=True,  # the server's session is the run's process's
        ready=_starter(server.name, listed.name),  # its server's start: not its time
        remote=True,  # a call cancelled is one the server is asked to stop
    )


def _starter(server: str, tool: str) -> Callable[[], Awaitable[None]]:
    async def ready() -> None:
        run = _CURRENT.get()
        if run is not None:  # else the call says where MCP tools are called
            await run.ready(server, tool)

    return ready


def _caller(server: str, tool: str, *, serial: bool) -> Callable[..., Awaitable[str]]:
    async def call(**arguments: Any) -> str:
        run = _CURRENT.get()
        if run is None:
            raise McpServerError(
                server,
                "is not running here: MCP tools are called in a run of their Executor "
                "(or in a block of McpServers(...).run())",
            )
        return await run.call(server, tool, arguments, serial=serial)

    call.__name__ = call.__qualname__ = f"{server}_{tool}"
    return call


class McpRun:
    """The servers as one run reaches them: it may start each again once."""

    def __init__(self, servers: McpServers) -> None:
        self.servers = servers
        self.restarted: set[str] = set()
        self._task = asyncio.current_task()  # the run's own: its workers' calls run under it
        self._cancelling = self._task.cancelling() if self._task is not None else 0

    @property
    def stopping(self) -> bool:
        """Whether the run is stopping (cancelled, out of its wall time), as a call of it
        in a task of its own sees it: the run's task is being cancelled. (A call cut off
        by its own time limit leaves the run's task as it was.)"""
        task = self._task
        return (
            task is not None
            and task is not asyncio.current_task()
            and task.cancelling() > self._cancelling
        )

    async def listed(self, server: str) -> tuple[Listed, ...]:
        """The server's tools as it listed them (it starts if it has not).

        Raises:
            McpServerError: when it cannot be started, or is down.
        """
        return (await self.servers.session(server, self.restarted)).tools

    async def ready(self, server: str, tool: str) -> Session:
        """The server's session, started (again, once, if it went away): before a
        call of ``tool``'s time limit starts, and as the call starts.

        Raises:
            ModelRetry: when it cannot be started, or is down.
        """
        try:
            return await self.servers.session(server, self.restarted)
        except McpServerError as exc:
            raise ModelRetry(f"cannot call {tool!r}: {exc}") from exc

    async def call(
        self, server: str, tool: str, arguments: dict[str, Any], *, serial: bool = False
    ) -> str:
        """Call a tool; what goes wrong becomes the call's error observation. A call of
        a ``serial`` tool cut off retires the server (see :meth:`McpServers.call`). A
        call a streamable-HTTP server never took (it answered 404, as it no longer knows
        the session it went in; it could not be connected to) was not run: it goes
        again, once, in a new session (as MCP says; the run's one start again of the
        server).

        Raises:
            ModelRetry: the tool reported an error, the server is down or went away
                during the call, or a protocol error.
        """
        try:
            return await self._call(server, tool, arguments, serial=serial)
        except CallNotSent:
            pass  # not run: it goes again, in a new session
        try:
            return await self._call(server, tool, arguments, serial=serial)
        except CallNotSent as exc:
            raise ModelRetry(f"{exc}; the call was not run; {self._again(server)}") from exc

    async def _call(
        self, server: str, tool: str, arguments: dict[str, Any], *, serial: bool
    ) -> str:
        session = await self.ready(server, tool)
        try:
            return await self.servers.call(
                server, session, tool, arguments, serial=serial, stopping=lambda: self.stopping
            )
        except CallNotSent:
            raise
        except ServerGone as exc:
            again = self._again(server)
            raise ModelRetry(f"{exc}; whether the call did anything is unknown; {again}") from exc
        except McpServerError as exc:
            raise ModelRetry(str(exc)) from exc

    def _again(self, server: str) -> str:
        """Whether a server that went away is started again for the run's next call."""
        if server in self.restarted:
            return "it stays down for the rest of this run"
        return "it is started again for the next call"


_CURRENT: ContextVar[McpRun | None] = ContextVar("honeycomb_mcp_run", default=None)
"""The run whose tool calls run here. Tools are shared by every run of an Executor; a
call reaches the servers of its own run (and that run's one restart)."""


def current_mcp_run() -> McpRun | None:
    """The :class:`McpRun` of the block this code runs in, if any."""
    return _CURRENT.get()


class _Live:
    """One life of a server: starting, running, or ended (and why)."""

    def __init__(self, server: McpServer, after: _Live | None) -> None:
        self.server = server
        self.after = after  # a life retired before it: it starts once that one is gone
        self.ready = asyncio.Event()  # started, or failed to
        self.stop = asyncio.Event()
        self.gone = asyncio.Event()  # ended, its process with it
        self.session: Session | None = None
        self.error: McpServerError | None = None
        self.host: asyncio.Task[None] | None = None  # the task it lives in
        self.calls = 0  # under way in it
        self.retired = False  # takes no more calls, and ends once those under way do

    @property
    def usable(self) -> bool:
        session = self.session
        return (
            self.ready.is_set()
            and session is not None
            and not session.ended
            and (self.error is None and not self.stop.is_set() and not self.retired)
        )

    def end(self) -> None:
        """Stop it: one that runs as MCP says (its stdin closed, a grace to exit); one
        still starting at once (its start is cancelled, its process killed), as nothing
        of it needs winding down and its start may take up to ``start_timeout``."""
        self.stop.set()
        if not self.ready.is_set() and self.host is not None:
            self.host.cancel()

    def why(self) -> str:
        if self.session is not None and self.session.ended:
            if self.session.broken is not None:
                return f"it {self.session.broken}{self.session.said()}"
            if self.server.url is not None:  # no process: its connection went
                return "its connection was lost"
            return f"it exited{self.session.said()}"
        return self.error.reason if self.error is not None else "it was stopped"


class McpServers:
    """The live servers of one block: ``async with McpServers(servers) as live:``.

    Each starts on first use, in a task of this block, and stops when it ends, whatever
    ends it (nothing keeps running; one still starting is killed at once). ``with
    live.run():`` is a block whose tool calls reach them (see :class:`McpRun`).
    """

    def __init__(self, servers: Iterable[McpServer]) -> None:
        self.servers = by_name(servers)
        for server in self.servers.values():  # secrets: masked wherever a run shows one
            add_env(server.env, owner=self)
            for value in server.secrets:
                add_secret(value, owner=self)
            for value in server.headers.values():
                add_header(value, owner=self)
            for secret in server.passwords:
                add_secret(secret, "password", owner=self)
        self._group: asyncio.TaskGroup | None = None
        self._live: dict[str, _Live] = {}  # each server's latest life
        self._retired: set[_Live] = set()  # lives with calls still under way in them

    def __repr__(self) -> str:
        return f"McpServers({list(self.servers)})"

    async def __aenter__(self) -> Self:
        group = asyncio.TaskGroup()
        await group.__aenter__()
        self._group = group
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        group, self._group = self._group, None
        for live in [*self._live.values(), *self._retired]:
            live.end()
        if group is not None:
            # Not the block's exception: the group would wrap it in an ExceptionGroup.
            # The servers stop as asked, and their tasks never fail (one cancelled as
            # its server started is not a failure).
            await group.__aexit__(None, None, None)

    @contextmanager
    def run(self) -> Iterator[McpRun]:
        """A block whose MCP tool calls reach these servers, as one run."""
        current = McpRun(self)
        token = _CURRENT.set(current)
        try:
            yield current
        finally:
            _CURRENT.reset(token)

    async def call(
        self,
        name: str,
        session: Session,
        tool: str,
        arguments: dict[str, Any],
        *,
        serial: bool,
        stopping: Callable[[], bool],
    ) -> str:
        """Call ``tool`` in ``session`` of server ``name``.

        A call of a ``serial`` tool (side effects, or an exclusive key) cut off (its
        time limit, a cancellation) may go on in the server, which was only asked to
        stop it: so the server is retired. It takes no more calls, stops once those
        under way in it end (within :data:`_DRAIN_S`; at once when ``stopping()`` says
        the call's run is stopping, which waits for no other run's calls), and the
        next call starts it anew; the call cut off ends once it has stopped, as a
        side-effecting sync tool's ends with its thread, so that it overlaps no later
        call of any tool.

        A streamable-HTTP server's call waits for a place among its calls under way
        (:meth:`Session.place`): one cut off as it waits retires nothing.

        Raises:
            CallNotSent: the server was retired, went away or was started anew as the
                call waited.
            The session's errors (see :meth:`Session.call`).
        """
        async with session.place():  # cut off as it waits, it was never sent: no retiring
            live = self._live.get(name)
            if live is None or live.session is not session or live.retired or session.ended:
                # Retired, gone or replaced as the call waited: not sent, so not
                # overlapping a call cut off in it; it goes again, in the next session.
                raise CallNotSent(
                    name, f"stopped taking calls as the call to {tool!r} waited for a connection"
                )
            return await self._call(live, session, tool, arguments, serial, stopping)

    async def _call(
        self,
        live: _Live,
        session: Session,
        tool: str,
        arguments: dict[str, Any],
        serial: bool,
        stopping: Callable[[], bool],
    ) -> str:
        """:meth:`call`, in a place among the calls under way in ``live``, its server."""
        cut_off = False
        live.calls += 1
        try:
            return await session.call(tool, arguments)
        except asyncio.CancelledError:
            # Retired by this call, or by another cut off before it: either way this
            # one ends once the server has stopped.
            if serial and not live.gone.is_set():
                self._retired.add(live)
                live.retired = cut_off = True
            raise
        finally:
            live.calls -= 1
            if live.retired and (live.calls == 0 or (cut_off and stopping())):
                live.end()
            if cut_off:
                await _ended(live)

    async def session(self, name: str, restarted: set[str]) -> Session:
        """The live session of server ``name``, started if need be: a first time, or
        again once (``restarted`` holds those a run started again already). A start
        under way is shared: whoever needs the server meanwhile waits for it and is
        told its outcome; a call after it failed may start it again.

        Raises:
            McpServerError: when it cannot be started, or is down.
        """
        live = self._live.get(name)
        if live is None or (live.ready.is_set() and not live.usable):
            live = self._next_life(name, live, restarted)
        await live.ready.wait()
        if live.session is None:
            raise live.error or McpServerError(name, "stopped as it started")
        return live.session

    def _next_life(self, name: str, last: _Live | None, restarted: set[str]) -> _Live:
        """Start server ``name`` (again, once a run, when ``last`` ended), in a task of
        the block: without an await, so that no one else starts it meanwhile."""
        server = self.servers.get(name)
        if server is None:
            raise McpServerError(name, f"is not declared; servers: {', '.join(self.servers)}")
        if self._group is None:
            raise McpServerError(
                name, "cannot start: its McpServers block is not open (async with)"
            )
        if last is not None and not last.retired:  # it ended: a restart of the run's one
            if name in restarted:
                raise McpServerError(
                    name,
                    f"is down for the rest of this run: {last.why()}, and was started "
                    "again once already",
                )
            restarted.add(name)
            last.end()
        after = last if last is not None and last.retired else None
        live = self._live[name] = _Live(server, after)
        live.host = self._group.create_task(self._host(live), name=f"mcp-server-{name}")
        return live

    async def _host(self, live: _Live) -> None:
        """One life of a server, in a task of its own: the SDK's connection is entered
        and left in one task. It never fails (a failure is the server's error); the
        block's end cancels it while the server starts (or waits for the life before
        it, retired, to stop: the process it follows)."""
        server = live.server
        try:
            if live.after is not None:
                await _stopped(live.after)
            # The SDK's first import takes a second or two: in a thread, not the event
            # loop (the run's other workers go on meanwhile).
            try:
                await anyio.to_thread.run_sync(_load_sdk, abandon_on_cancel=True)
            except ImportError as exc:  # the extra is not installed
                raise McpServerError(
                    server.name,
                    f"cannot start: the mcp SDK cannot be imported ({exc}): pip install {_EXTRA}",
                ) from exc
            from runtime.tools._mcp_sdk import connect

            async with connect(
                server.name,
                command=server.command,
                args=server.args,
                env=server.env,
                cwd=server.cwd,
                url=server.url,
                headers=server.headers,
                max_connections=server.max_connections or _CONNECTIONS,
                start_timeout=server.start_timeout,
                max_message_mb=server.max_message_mb,
            ) as session:
                live.session = session
                live.ready.set()
                await live.stop.wait()
        except McpServerError as exc:  # masked with the errors behind it (the SDK's)
            live.error = mask_error(exc)
        except Exception as exc:  # the SDK failing as the server stops: it is gone anyway
            failed = McpServerError(server.name, f"failed: {type(exc).__name__}: {exc}")
            failed.__cause__ = exc
            live.error = mask_error(failed)
        finally:
            if live.session is None and live.error is not None:
                # Once, whoever waits on it: a planner goes on without its tools unsaid.
                fields = {"server": server.name, "error": live.error.reason}
                logs.log("mcp.server_not_started", fields, level="warning")
            live.ready.set()
            live.gone.set()
            self._retired.discard(live)


_DRAIN_S = 10.0
"""Seconds the calls under way in a retired server (see :meth:`McpServers.call`) have
to end: then it is stopped all the same."""


async def _stopped(retired: _Live) -> None:
    """Wait for a retired server to stop: once the calls under way in it end, or
    :data:`_DRAIN_S` seconds from now, whichever comes first."""
    with suppress(TimedOut), within(_DRAIN_S):
        await retired.stop.wait()
    retired.end()
    await retired.gone.wait()


async def _ended(retired: _Live) -> None:
    """Wait, as a call cut off does, for its retired server to stop (see
    :func:`_stopped`), whatever cancels this meanwhile: a cancellation then (its run
    stopping) stops the server at once rather than once the other calls end."""
    stopped = asyncio.ensure_future(_stopped(retired))
    try:
        await asyncio.shield(stopped)
    except asyncio.CancelledError:
        retired.end()
        await shielded(stopped)
        raise


_EXTRA = "'honeycomb-agents[mcp]'"
"""The extra that installs the ``mcp`` SDK."""


def _load_sdk() -> None:
    """Import the ``mcp`` SDK (and this package's use of it), once, in whichever thread
    calls first; what it logs of our servers is not printed (:mod:`._mcp_logs`)."""
    import runtime.tools._mcp_sdk  # noqa: F401 (imported for its loading)
    from runtime.tools._mcp_logs import unprinted

    unprinted()
