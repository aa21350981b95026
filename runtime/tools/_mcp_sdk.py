"""The ``mcp`` SDK's side of an MCP server: connecting to it over stdio or streamable
HTTP, listing its tools, calling one, and a result as observation text.

A stdio server runs as a :class:`~runtime.tools._mcp_stdio.ServerProcess`: one that did
not start is killed at once. This module imports ``mcp``; :mod:`runtime.tools.mcp` loads
it with the first server that starts, so ``import honeycomb`` does not.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from contextvars import ContextVar
from typing import Any
from urllib.request import getproxies

import anyio
import httpx2
import jsonschema
import mcp.types as types
import pydantic
from mcp import Client, MCPError
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from runtime.concurrency import TimedOut, innermost, within
from runtime.errors import CallNotSent, McpServerError, ModelRetry, ServerGone
from runtime.secrets import masked
from runtime.tools._mcp_logs import ours
from runtime.tools._mcp_stdio import Lines, ServerProcess, Stderr
from runtime.value import Value

__all__ = ["Listed", "Session", "connect", "observation_text"]

_PAGES = 100
"""Pages of a tool listing read at most: a server whose cursor never ends cannot hang."""

_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
"""The streamable-HTTP connection's timeouts (the SDK's): but for a message's answer
(see :func:`_answer_untimed`)."""

_LIMITS = httpx2.Limits(max_connections=None, max_keepalive_connections=20)
"""A streamable-HTTP server's connections: one for each call under way (as many as its
``max_connections`` lets be, see :class:`Session`), its own stream, and the notes of
calls cancelled. The client's own limit, 100, had the calls past it wait for a
connection, and the first that waited out the pool's timeout ended the session, with
every call under way in it."""

_Process = ServerProcess[SessionMessage | Exception, SessionMessage]
"""A stdio server's process, as this module talks to it."""

_END_S = 2.0
"""Seconds a streamable-HTTP server has to answer the end of its session (an HTTP
``DELETE``): one that does not (hung) is left, its connection closed."""

_STDERR_TAIL = 600
"""Characters of what a server wrote to stderr that an error about it shows."""

_STRAY_SHOWN = 200
"""Characters of a line a stdio server wrote to stdout that is no MCP message that an
error about it shows."""


class Listed(Value, frozen=True, kw_only=True):
    """One tool as its server lists it, with its annotations' hints (None: no hint),
    and why a model cannot be offered it (``problem``: its input schema is no JSON
    schema), or None."""

    name: str
    description: str
    parameters: dict[str, Any]
    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    problem: str | None = None


class Session:
    """A live connection to one server, made by :func:`connect`.

    Attributes:
        server: The server's name.
        tools: Its tools, as it listed them when the connection started.
    """

    def __init__(
        self,
        server: str,
        client: Client,
        process: _Process | None,
        bound: _Bounded | None,
        connections: int,
    ) -> None:
        self.server = server
        self.tools: tuple[Listed, ...] = ()
        self._client = client
        self._process = process
        self._bound = bound
        # A streamable-HTTP server's calls under way, each a connection (a file of the
        # process's): the calls past them wait, with no time limit of their own.
        self._calls = anyio.CapacityLimiter(connections) if process is None else None
        self._lost = False
        self.errlog = process.said if process is not None else None

    @property
    def ended(self) -> bool:
        """Whether the connection has ended: a call found it lost, or a stdio server's
        output ended (its process exited, or was killed as broken)."""
        return self._lost or (self._process is not None and self._process.ended.is_set())

    @property
    def broken(self) -> str | None:
        """Why a stdio server was killed, or a streamable-HTTP server's connection
        dropped, as it ran (``wrote a message ...``), or None."""
        if self._process is not None:
            return self._process.broken
        return self._bound.broken if self._bound is not None else None

    def said(self) -> str:
        """`` (it said: ...)`` with the end of what it wrote to stderr, or ``""``."""
        return stderr_tail(self.errlog)

    async def list_tools(self) -> tuple[Listed, ...]:
        listed: list[Listed] = []
        cursor: str | None = None
        for _ in range(_PAGES):
            page = await self._client.list_tools(cursor=cursor)
            listed += [_listed(t) for t in page.tools]
            cursor = page.next_cursor
            if cursor is None:
                break
        self.tools = tuple(listed)
        return self.tools

    async def call(self, tool: str, arguments: dict[str, Any]) -> str:
        """Call ``tool``, in a :meth:`place`; its result as observation text.

        Raises:
            ModelRetry: the tool reported an error (``isError``): the server's message.
            CallNotSent: a streamable-HTTP server never took the call (it answered it
                404, as it no longer knew the session, or could not be connected to).
            ServerGone: the connection ended during the call.
            McpServerError: a protocol error (the server refused the call, or answered
                with something that is not an MCP result).
        """
        mark = self.errlog.written if self.errlog is not None else 0
        answer = _Answer()
        token = _ANSWER.set(answer)  # the SDK sends the call in this context
        try:
            with ours():
                result = await self._client.call_tool(tool, arguments)
        except MCPError as exc:
            if answer.unsent is not None:
                raise self._unsent(tool, answer.unsent) from exc
            if exc.code == types.CONNECTION_CLOSED or self.ended or self.broken is not None:
                raise self._gone(tool, mark) from exc
            said = masked(exc.message)
            raise McpServerError(
                self.server, f"refused the call to {tool!r}: {said} (error {exc.code})"
            ) from exc
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            if answer.unsent is not None:
                raise self._unsent(tool, answer.unsent) from exc
            raise self._gone(tool, mark) from exc
        except pydantic.ValidationError as exc:
            raise McpServerError(
                self.server,
                f"answered the call to {tool!r} with a result that is not as MCP has it: "
                + masked(_invalid(exc)),
            ) from exc
        except RuntimeError as exc:  # the SDK's checks of a result (its output schema)
            raise McpServerError(
                self.server,
                f"answered the call to {tool!r} with a result that cannot be taken: "
                + masked(_refused(exc)),
            ) from exc
        finally:
            _ANSWER.reset(token)
        text = masked(observation_text(result))  # as it arrives: no tool or model sees one
        if result.is_error:
            raise ModelRetry(
                f"tool {tool!r} of MCP server {self.server!r} reported an error: "
                f"{text or '(no message)'}"
            )
        return text

    @asynccontextmanager
    async def place(self) -> AsyncIterator[None]:
        """A place among a streamable-HTTP server's calls under way (its
        ``max_connections``), once one is free: a call is made in one. A call cut off
        as it waits was never sent."""
        if self._calls is None:
            yield
            return
        async with self._calls:
            yield

    def _unsent(self, tool: str, why: str) -> CallNotSent:
        # Not run: the next call (this one again) is sent in a new session.
        self._lost = True
        return CallNotSent(self.server, f"{why} as it was sent the call to {tool!r}")

    def _gone(self, tool: str, mark: int) -> ServerGone:
        # A streamable-HTTP connection has no process to watch: it is lost once a call
        # finds it so, and the next call makes it again.
        self._lost = True
        said = stderr_tail(self.errlog, since=mark)  # what it wrote as it died
        if self.broken is not None:
            return ServerGone(self.server, f"{self.broken} during the call to {tool!r}{said}")
        if self._process is None:  # the server may run on: its connection went (a proxy's)
            return ServerGone(self.server, f"lost its connection during the call to {tool!r}")
        return ServerGone(self.server, f"stopped during the call to {tool!r}{said}")


@asynccontextmanager
async def connect(
    server: str,
    *,
    command: str | None,
    args: tuple[str, ...],
    env: Mapping[str, str],
    cwd: str | None,
    url: str | None,
    headers: Mapping[str, str],
    max_connections: int,
    start_timeout: float,
    max_message_mb: float,
) -> AsyncIterator[Session]:
    """Start (or reach) a server, list its tools, and yield the live session; the server
    is stopped when the block ends (a stdio server's process with it, whatever ends
    the block). Enter and leave it in one task.

    A streamable-HTTP server has ``max_connections`` calls under way at once: the
    calls past them wait for a place.

    A server that sends a message of more than ``max_message_mb`` megabytes (one that
    never ends) is broken: a stdio server is killed, a streamable-HTTP server's
    connection dropped, and its calls fail saying so.

    Raises:
        McpServerError: when it cannot be started or reached, or does not list its
            tools within ``start_timeout`` seconds.
    """
    limit = int(max_message_mb * 1_000_000)
    over = f"a message longer than {max_message_mb:g} MB (its max_message_mb)"
    process: _Process | None = None
    http: httpx2.AsyncClient | None = None
    refused: _Refused | None = None
    bound: _Bounded | None = None
    if command is not None:
        process = ServerProcess(
            [command, *args],
            env=get_default_environment() | dict(env),
            cwd=cwd,
            parse=_message,
            dump=_line,
            max_line=limit,
            too_long=f"wrote {over}, and was stopped as broken",
        )
        transport: Any = process
    else:
        # The SDK's own timeouts: a response stream may stay open for a while. It turns
        # an HTTP error status into a message without it: the hook keeps it.
        refused = _Refused()
        bound = _Bounded(limit, f"sent {over}, and its connection was dropped as broken")
        http = httpx2.AsyncClient(
            headers=dict(headers),
            timeout=_HTTP_TIMEOUT,
            limits=_LIMITS,
            # Watched where no proxy of the environment's (HTTP_PROXY ...) takes it: a
            # transport given would have the client take none, and a mount for every
            # URL would stand in ALL_PROXY's place.
            mounts={} if getproxies().get("all") else {"all://": _Watched()},
            event_hooks={
                "request": [_answer_untimed, bound.saw],
                "response": [refused.note, bound.forgot, bound.hold],
            },
        )
        # An event as long as a message may be (the SDK's own limit is 1 MB).
        # Its session is ended here (see _end_session), not by the SDK.
        transport = streamable_http_client(
            url or "", http_client=http, max_sse_event_size=limit, terminate_on_close=False
        )
    client = Client(transport)
    session = Session(server, client, process, bound, max_connections)
    started = False
    try:
        async with AsyncExitStack() as stack:
            stack.enter_context(ours())  # the SDK's tasks, started here, log as ours
            if http is not None:
                await stack.enter_async_context(http)
            with within(start_timeout):
                await stack.enter_async_context(client)
                await session.list_tools()
            started = True
            if process is not None:
                process.started = True  # from now on it is stopped the MCP way, with a grace
            yield session
            if http is not None and bound is not None:
                await _end_session(http, bound, session)
    except Exception as exc:
        if started:
            raise
        # Out of the SDK's task groups, which wrap what fails as the server starts (its
        # list refused, a connection dropped) in an ExceptionGroup.
        said = _stray(process) + stderr_tail(session.errlog)
        why = _not_started(server, exc, start_timeout, said, session, process, refused, url)
        raise why from exc


async def _end_session(http: httpx2.AsyncClient, bound: _Bounded, session: Session) -> None:
    """End a streamable-HTTP server's session as MCP says, with an HTTP ``DELETE``, when
    it has one not known to be lost (a server that died, or forgot it, is not asked), at
    the endpoint its messages reached (the SDK follows a redirect of its ``url`` within
    its origin, such as a trailing ``/`` taken away): within :data:`_END_S` (a hung
    server never answers), and quietly (the SDK's own end of it logs its failures as
    warnings, which a program that configures no logging prints)."""
    if bound.session is None or session.ended:
        return
    endpoint, headers = bound.session
    with suppress(httpx2.HTTPError, TimedOut), within(_END_S):
        await http.delete(endpoint, headers=headers)


def _refused(exc: RuntimeError) -> str:
    """What was wrong with a result the SDK refused, in one line: where its structured
    content breaks its tool's output schema, or the SDK's word."""
    cause = exc.__cause__
    if isinstance(cause, jsonschema.ValidationError):
        where = "/".join(str(part) for part in cause.absolute_path)
        at = f" at {where!r}" if where else ""
        return f"its structured content breaks its tool's output schema ({cause.message}{at})"
    return " ".join(str(exc).split()) or type(exc).__name__


def _not_started(
    server: str,
    exc: BaseException,
    start_timeout: float,
    said: str,
    session: Session,
    process: _Process | None,
    refused: _Refused | None,
    url: str | None,
) -> McpServerError:
    """Why a server did not start, out of what its start raised (``said``: what a stdio
    server wrote as it failed; ``url``: a streamable-HTTP server's, named when nothing
    answers there)."""
    leaves = list(_leaves(exc))
    for leaf in leaves:
        if isinstance(leaf, McpServerError):
            return leaf
        if isinstance(leaf, TimedOut):
            reason = (
                f"did not start and list its tools within {start_timeout:g}s, its start_timeout"
            )
            return McpServerError(server, reason + said)
        if isinstance(leaf, OSError) and refused is None:  # the command cannot be run
            return McpServerError(server, f"cannot be started: {leaf}")
        if isinstance(leaf, httpx2.ConnectError) and url is not None:  # none there, or no host
            where = f"cannot connect to {masked(url)} ({_reason(leaf)})"
            return McpServerError(server, f"could not be started: {where}")
    if session.broken is not None:
        reason = session.broken
    elif process is not None and process.hung_up and process.status is not None:
        reason = _exit(process.status)
    else:  # it refused the handshake or its list; HTTP errors
        reason = _first_line(masked(_reason(leaves[0])))  # masked, then cut
        said = said if refused is None else refused.status()
    return McpServerError(server, f"could not be started: {reason}{said}")


def _first_line(text: str) -> str:
    """``text``'s first line, with `` ...`` where more follow: why a server did not start
    in one line (a JSON answer that is no MCP message, which the SDK says with the
    pydantic errors of each kind of message, a few lines each)."""
    first, _, rest = text.strip().partition("\n")
    return f"{first} ..." if rest.strip() else first


def _exit(status: int) -> str:
    """How a stdio server that ended as it started ended: ``it exited with status 1
    ...``, or the signal that ended it (SIGKILL too for one that closed its stdout,
    killed here)."""
    if status >= 0:
        return f"it exited with status {status} before it listed its tools"
    number = -status
    name = signal.Signals(number).name if number in signal.valid_signals() else number
    return f"it ended by signal {name} before it listed its tools"


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, or the exceptions an exception group holds, however deep."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def observation_text(result: types.CallToolResult) -> str:
    """A tool's result as text: its text content, a note for each image or audio clip
    (the model reads text), embedded resources' text, links by their URI; the
    structured content when there is nothing else."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            kind = "image" if isinstance(block, types.ImageContent) else "audio"
            parts.append(f"[{kind} of type {block.mime_type}, {_size(block.data)}: not shown]")
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, types.TextResourceContents):
                parts.append(f"[resource {resource.uri}]\n{resource.text}")
            else:
                kind = resource.mime_type or "binary data"
                parts.append(f"[resource {resource.uri}: {kind}, {_size(resource.blob)}]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource link {block.uri}{f': {block.name}' if block.name else ''}]")
    if not parts and result.structured_content is not None:
        return pydantic.TypeAdapter(Any).dump_json(result.structured_content).decode()
    return "\n".join(parts)


def stderr_tail(errlog: Stderr | None, *, since: int = 0) -> str:
    """`` (it said: ...)`` with the end of what the server wrote to stderr (after its
    first ``since`` bytes), or ``""``; secrets masked before it is cut (a server may say
    its token)."""
    if errlog is None:
        return ""
    text = masked(" ".join(errlog.since(since).split()))
    if not text:
        return ""
    return f" (it said: {'...' + text[-_STDERR_TAIL:] if len(text) > _STDERR_TAIL else text})"


def _stray(process: _Process | None) -> str:
    """`` (on stdout, where MCP messages go, it wrote: ...)`` with the last line of a
    stdio server's output that is not a message, or ``""``: a command that is no MCP
    server over stdio shows what it is (its usage, ``Listening on http://...``)."""
    if process is None or process.stray is None:
        return ""
    shown = masked(process.stray)[:_STRAY_SHOWN]  # masked, then cut: no secret in part
    return f" (on stdout, where MCP messages go, it wrote: {shown!r})"


def _listed(tool: types.Tool) -> Listed:
    """A tool as listed, its secrets masked: the model reads its description and schema
    (whose defaults and examples a server may fill with its own configuration)."""
    hints = tool.annotations
    schema = _arguments(masked(dict(tool.input_schema)))
    return Listed(
        name=tool.name,
        description=masked(
            tool.description or tool.title or (hints.title if hints else None) or ""
        ),
        parameters=schema,
        read_only=hints.read_only_hint if hints else None,
        destructive=hints.destructive_hint if hints else None,
        idempotent=hints.idempotent_hint if hints else None,
        problem=_schema_problem(schema),
    )


def _schema_problem(schema: dict[str, Any]) -> str | None:
    """Why a tool's input schema is no JSON schema (a model's API refuses it, and no
    call could be checked against it), or None. The SDK's client checks no more than
    that it is an object, as MCP has it since 2026."""
    try:
        kind = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        kind.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path)
        said = exc.message if len(exc.message) <= 160 else exc.message[:157] + "..."
        return f"its input schema is no JSON schema ({f'at {where!r}: ' if where else ''}{said})"
    except TypeError:  # a $schema that is not text
        return "its input schema is no JSON schema (its $schema is not a URI)"
    return None


def _arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's input schema as models' APIs take it: an object lists its properties.
    MCP allows ``{"type": "object"}`` alone (the Go SDK lists a tool without arguments
    so), which OpenAI's API refuses ('object schema missing properties')."""
    if schema.get("type") == "object" and "properties" not in schema:
        return {**schema, "properties": {}}
    return schema


def _message(line: str) -> SessionMessage | Exception:
    """A line a stdio server wrote, as the SDK's client reads it: a message, or why it
    is not one (the client passes over it)."""
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


def _line(message: SessionMessage) -> str:
    """A message to a stdio server, as its line (without the newline)."""
    return message.message.model_dump_json(by_alias=True, exclude_unset=True)


def _reason(exc: BaseException) -> str:
    """What went wrong, out of the exception groups of the SDK's task groups."""
    exc = innermost(exc)
    if isinstance(exc, MCPError):
        return exc.message
    if isinstance(exc, pydantic.ValidationError):  # an answer MCP does not allow
        return f"its answer is not as MCP has it: {_invalid(exc)}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _invalid(exc: pydantic.ValidationError) -> str:
    """Where an answer breaks MCP, in one line: ``its tool 2's inputSchema.type: Input
    should be 'object'`` (a tool by its place in the list: its name may be what is
    wrong)."""
    said = []
    for error in exc.errors(include_url=False)[:3]:
        loc = [str(part) for part in error["loc"]]
        if loc[:1] == ["tools"] and len(loc) > 1 and loc[1].isdigit():
            where = f"its tool {int(loc[1]) + 1}" + (f"'s {'.'.join(loc[2:])}" if loc[2:] else "")
        else:
            where = ".".join(loc) or "it"
        said.append(f"{where}: {error['msg']}")
    more = exc.error_count() - len(said)
    return "; ".join(said) + (f" (and {more} more)" if more > 0 else "")


def _size(base64: str) -> str:
    padding = len(base64) - len(base64.rstrip("="))
    return f"{len(base64) * 3 // 4 - padding} bytes"


async def _answer_untimed(request: httpx2.Request) -> None:
    """The request hook: the answer to a message (a ``POST``) is waited for as long as
    its call may take, which its tool's time limit says (a tool may work for more than
    the five minutes of the connection's read timeout), and its start's and end's
    limits; a ``GET`` of the server's own stream keeps the read timeout."""
    if request.method == "POST":
        request.extensions["timeout"] = {**request.extensions.get("timeout", {}), "read": None}


class _TooLong(httpx2.StreamError):
    """A response's body held a line longer than the limit (the SDK reads a body
    that fails so as a failed answer to the request it answered)."""


class _Bounded:
    """A streamable-HTTP server's connection, watched: its responses for what breaks it
    (their bodies held to ``limit`` bytes a line, a message a body or an event's line,
    past which reading one fails; a session it no longer knows), and its requests for
    the session they go in."""

    def __init__(self, limit: int, too_long: str) -> None:
        self.limit = limit
        self.too_long = too_long
        self.broken: str | None = None
        # Where its session's messages went (redirected), and the headers naming it.
        self.session: tuple[httpx2.URL, dict[str, str]] | None = None

    async def saw(self, request: httpx2.Request) -> None:
        """The request hook: the session a message goes in, its protocol version, and
        where it was sent (each request a redirect is followed by comes here too)."""
        if request.method == "POST" and _SESSION in request.headers:
            named = (_SESSION, "mcp-protocol-version")
            headers = {name: request.headers[name] for name in named if name in request.headers}
            self.session = (request.url, headers)

    async def hold(self, response: httpx2.Response) -> None:
        """The response hook: its body is read within the limit."""
        response.stream = _Held(self, response.stream)

    async def forgot(self, response: httpx2.Response) -> None:
        """The response hook: a message in a session answered 404 is one the server no
        longer knows (it restarted, or ended it), which MCP says to start anew: every
        later call in it would be refused so."""
        request = response.request
        if response.status_code == 404 and _SESSION in request.headers:
            self.broken = _FORGOTTEN
            answer = _ANSWER.get()  # the call it answered, whose context the SDK sends in
            if answer is not None:
                answer.unsent = _FORGOTTEN


_SESSION = "mcp-session-id"
"""The header that names a streamable-HTTP server's session."""

_FORGOTTEN = "no longer knew its session (it answered HTTP 404: it restarted, or ended it)"


class _Answer:
    """What came of one call's message, as the connection saw it: why the server never
    took it (so did not run it), or None."""

    unsent: str | None = None


class _Watched(httpx2.AsyncBaseTransport):
    """A streamable-HTTP connection's transport (as the client makes its own by
    default), watched: a call's message that could not be connected to its server (no
    one there, a refused TLS handshake) never reached it. (Through a proxy, the proxy's
    transport goes unwatched: such a call is told as one whose connection went.)"""

    def __init__(self) -> None:
        self._transport = httpx2.AsyncHTTPTransport(limits=_LIMITS)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            return await self._transport.handle_async_request(request)
        except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
            answer = _ANSWER.get()  # the call whose message it is, if any
            if answer is not None:
                answer.unsent = f"could not be connected to ({_reason(exc)})"
            raise

    async def aclose(self) -> None:
        await self._transport.aclose()


_ANSWER: ContextVar[_Answer | None] = ContextVar("honeycomb_mcp_answer", default=None)
"""The call whose message is being sent: the SDK sends each message in the context of
the task that sent it, so the response hooks see the call they answer."""


class _Held(httpx2.AsyncByteStream):
    """A response's body, read within its :class:`_Bounded`'s limit."""

    def __init__(self, bound: _Bounded, body: Any) -> None:
        self._bound = bound
        self._body = body  # the client's stream of it

    async def __aiter__(self) -> AsyncIterator[bytes]:
        within_limit = Lines(self._bound.limit)
        async for chunk in self._body:
            if not within_limit.take(chunk):
                self._bound.broken = self._bound.too_long
                raise _TooLong(self._bound.too_long)
            yield chunk

    async def aclose(self) -> None:
        await self._body.aclose()


class _Refused:
    """The first HTTP error status a streamable-HTTP server answered a message with (a
    ``POST``): not its answer to the client's ``GET`` of a stream of its own, which MCP
    lets it refuse (405) and the client then goes without."""

    def __init__(self) -> None:
        self.code: int | None = None
        self.phrase = ""

    async def note(self, response: httpx2.Response) -> None:
        posted = response.request.method == "POST"
        if posted and response.status_code >= 400 and self.code is None:
            self.code, self.phrase = response.status_code, response.reason_phrase

    def status(self) -> str:
        """`` (HTTP 401 Unauthorized)``, or ``""`` when none was an error."""
        if self.code is None:
            return ""
        return f" (HTTP {self.code}{f' {self.phrase}' if self.phrase else ''})"
