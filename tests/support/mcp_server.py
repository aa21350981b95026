"""A small MCP server for the tests, written with the ``mcp`` SDK and run as a real
subprocess: ``python -m tests.support.mcp_server`` serves it over stdio, ``--http-fd
FD`` over streamable HTTP on a listening socket its starter bound on 127.0.0.1 and
handed down (every request must then carry the header ``Authorization: Bearer
$MCP_TEST_TOKEN``).

Its tools cover what Honeycomb maps from MCP: a read-only tool (``lookup``, which
``chatter`` makes log megabytes to stderr), a destructive one (``append_note``;
``heedless``, it carries on though cancelled), an idempotent one (``set_flag``), one
that fails with ``isError`` (``refuse``), a slow one (``slow``), one that answers once
``count`` of its calls are in at once (``gather``: a rendezvous, once per server), one
that returns an image and an embedded resource (``picture``), a long line (``long``;
``forever``, a line that never ends), its process id (``pid``), a process of its own
started (``spawn``), its folder and environment (``where``), and a way to die (``die``,
saying ``say`` on stderr).
``--without TOOL`` leaves a tool out of its list (a server whose tools changed).
``append_note``, ``set_flag`` and ``slow`` write to the file ``$MCP_TEST_NOTES`` (one
line a call, ``slow`` as it starts), so a test can see what ran, in which order, and
what is under way; over HTTP, so does each ``DELETE`` (a session's end), with its path.
"""

# The imports wait for the start's options: a server told to fail at start, or to be
# slow to start, does so before it loads the SDK (a second of a processor's time,
# which a test that then stops it does not need).
# ruff: noqa: E402

from __future__ import annotations

import argparse
import sys
import time


def _options() -> argparse.Namespace:
    """The options it was started with (``python -m tests.support.mcp_server ...``)."""
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--http-fd",
        type=int,
        default=None,
        help="serve streamable HTTP on this listening socket (a file descriptor)",
    )
    parser.add_argument(
        "--events", action="store_true", help="over HTTP, answer with server-sent events"
    )
    parser.add_argument(
        "--legacy", action="store_true", help="over HTTP, know no server/discover (sessions)"
    )
    parser.add_argument(
        "--crash-at-list", action="store_true", help="over HTTP, exit as tools/list comes"
    )
    parser.add_argument("--fail-at-start", action="store_true", help="exit before serving")
    parser.add_argument(
        "--start-delay", type=float, default=0.0, help="seconds to wait before serving"
    )
    parser.add_argument("--without", action="append", default=[], help="a tool not served")
    return parser.parse_args()


if __name__ == "__main__":
    OPTIONS = _options()
    if OPTIONS.fail_at_start:
        raise SystemExit("the test server was told to fail at start")
    time.sleep(OPTIONS.start_delay)  # a server slow to start (one that loads a model)

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import EmbeddedResource, TextResourceContents, ToolAnnotations

server = MCPServer("honeycomb-test")

_WIRE = os.dup(1)
"""Its stdout, where its messages go: the SDK sends what else writes to it to stderr."""

READ_ONLY = ToolAnnotations(read_only_hint=True)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True)
IDEMPOTENT = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)


def _note(line: str) -> None:
    notes = os.environ.get("MCP_TEST_NOTES")
    if notes:
        with Path(notes).open("a", encoding="utf-8") as out:
            out.write(line + "\n")


@server.tool(description="Look a word up in a tiny dictionary.", annotations=READ_ONLY)
def lookup(word: str, chatter: int = 0) -> str:
    for _ in range(chatter):  # a server that logs much: a megabyte a time, on stderr
        os.write(2, b"looking it up\n" * 74_899)
    return {"bee": "an insect that makes honey", "hive": "where bees live"}.get(
        word, f"no entry for {word!r}"
    )


@server.tool(description="Append a line to the notes file.", annotations=DESTRUCTIVE)
async def append_note(text: str, delay: float = 0.0, heedless: bool = False) -> str:
    _note(f"start {text} {time.monotonic():.6f}")
    with anyio.CancelScope(shield=heedless):  # heedless: on to its end though cancelled
        await anyio.sleep(delay)
    _note(f"end {text} {time.monotonic():.6f}")
    return f"noted {text}"


@server.tool(
    description="Set a named flag (setting it twice is setting it once).", annotations=IDEMPOTENT
)
def set_flag(name: str) -> str:
    _note(f"flag {name}")
    return f"flag {name} is set"


@server.tool(description="Always fails, as a tool reporting an error does.")
def refuse(reason: str = "no reason given") -> str:
    raise ToolError(f"refused: {reason}")


@server.tool(description="Sleep, then answer.", annotations=READ_ONLY)
async def slow(seconds: float) -> str:
    _note(f"slow {seconds:g}")  # the call is in: a test may go on from here
    await anyio.sleep(seconds)
    return f"slept {seconds}s"


class _Gathering:
    """The calls of ``gather`` in the server now, and what tells them ``count`` are."""

    inside = 0
    met: anyio.Event | None = None


@server.tool(description="Wait until `count` calls of it are in at once.", annotations=READ_ONLY)
async def gather(count: int, limit: float = 15.0) -> str:
    if _Gathering.met is None:
        _Gathering.met = anyio.Event()
    met = _Gathering.met
    _Gathering.inside += 1
    try:
        if _Gathering.inside >= count:
            met.set()
        with anyio.move_on_after(limit):
            await met.wait()
        return f"met {count}" if met.is_set() else f"alone after {limit:g}s"
    finally:
        _Gathering.inside -= 1


@server.tool(
    description="An image and an embedded text resource.",
    annotations=READ_ONLY,
    structured_output=False,
)
def picture() -> list[object]:
    return [
        "a picture of a bee:",
        Image(data=b"\x89PNG\r\n\x1a\n", format="png"),
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(uri="file:///bee.txt", text="bees are insects"),
        ),
    ]


@server.tool(description="The server's process id.", annotations=READ_ONLY)
def pid() -> str:
    return str(os.getpid())


@server.tool(description="Where the server runs, and what it sees.", annotations=READ_ONLY)
def where() -> dict[str, str | None]:
    seen = ("MCP_TEST_GREETING", "MCP_TEST_PARENT_ONLY")
    return {"cwd": os.getcwd(), **{name: os.environ.get(name) for name in seen}}


@server.tool(
    description="A text of `chars` characters, on one line; `forever`: a line never ended.",
    annotations=READ_ONLY,
)
async def long(chars: int, forever: bool = False) -> str:
    while forever:  # a broken server: `chars` bytes at a time of a line it never ends
        os.write(_WIRE, b"x" * chars)
        await anyio.sleep(0.01)
    return "b" * chars


@server.tool(description="Start a process that outlives the call; its id.", annotations=READ_ONLY)
def spawn() -> str:
    sleeper = subprocess.Popen(  # in the server's process group, as a helper would be
        [sys.executable, "-c", "import time; time.sleep(600)"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return str(sleeper.pid)


@server.tool(description="Exit the server process at once.", annotations=READ_ONLY)
def die(say: str = "") -> str:
    os.write(2, say.encode())  # its last words, on stderr
    os._exit(3)


def _http(fd: int, *, events: bool, legacy: bool, crash_at_list: bool) -> None:
    import uvicorn

    app = server.streamable_http_app()
    token = f"Bearer {os.environ['MCP_TEST_TOKEN']}".encode()
    sessions: set[bytes] = set()  # the sessions it knows, and those it forgot
    forgotten: set[bytes] = set()
    forgetful: set[str] = set()  # "calls": it knows no session a call comes in

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != token:
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
            if legacy and scope["method"] == "GET":  # no stream of its own, as MCP allows
                await send({"type": "http.response.start", "status": 405, "headers": []})
                await send({"type": "http.response.body", "body": b""})
                return
            if scope["method"] == "DELETE":  # a session ended: where it was asked to
                _note(f"delete {scope['path']}")
            if scope["path"] == "/forget-sessions":  # as if it restarted: they are gone
                forgotten.update(sessions)
                await _answer(send, 200, b"")
                return
            if scope["path"] == "/forget-at-calls":  # a replica that never saw a session
                forgetful.add("calls")
                await _answer(send, 200, b"")
                return
            if scope["path"] == "/not-mcp":  # an endpoint that answers JSON of its own
                await _answer(send, 200, b'{"hello": "world"}')
                return
            session = headers.get(b"mcp-session-id")
            body, again = await _read(receive)
            at_call = "calls" in forgetful and _method(body) == "tools/call"
            if session in forgotten or (session is not None and at_call):  # as the TS SDK answers
                await _answer(send, 404, _error(body, -32001, "Session not found"))
                return
            if session is not None:
                sessions.add(session)
            if crash_at_list and _method(body) == "tools/list":  # its connections drop
                os._exit(4)
            if legacy and _method(body) == "server/discover":  # as a server before 2026
                await _no_such_method(body, send)
                return
            if _forever(body):  # over HTTP, the line that never ends is its answer
                await _endless(receive, send)
                return
            receive = again
            if events:  # its answers as server-sent events, as many servers send them
                send = _as_event(send)
        await app(scope, receive, send)

    uvicorn.run(guarded, fd=fd, log_level="warning")  # the socket its starter bound


async def _read(receive: Any) -> tuple[bytes, Any]:
    """A request's body, and what the app then receives it by."""
    body, more = b"", True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    given = False

    async def again() -> dict[str, Any]:
        nonlocal given
        if given:
            return dict(await receive())
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return body, again


def _method(body: bytes) -> str | None:
    """The method a request's JSON-RPC message names."""
    try:
        method = json.loads(body).get("method")
    except (ValueError, AttributeError):
        return None
    return method if isinstance(method, str) else None


async def _no_such_method(body: bytes, send: Any) -> None:
    """The answer of a server that knows no such method (one that speaks MCP as it was
    before 2026: the client then shakes hands as it did, in a session of its own)."""
    await _answer(send, 200, _error(body, -32601, "Method not found"))


def _error(body: bytes, code: int, message: str) -> bytes:
    """A JSON-RPC error answering the request ``body``."""
    error = {"code": code, "message": message}
    return json.dumps({"jsonrpc": "2.0", "id": json.loads(body).get("id"), "error": error}).encode()


async def _answer(send: Any, status: int, body: bytes) -> None:
    start = {"type": "http.response.start", "status": status}
    await send({**start, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


def _forever(body: bytes) -> bool:
    """Whether the request is a call of ``long`` with ``forever``."""
    try:
        params = json.loads(body).get("params") or {}
    except (ValueError, AttributeError):
        return False
    return params.get("name") == "long" and bool(params.get("arguments", {}).get("forever"))


def _as_event(send: Any) -> Any:
    """``send`` for an answer in JSON that sends it as one server-sent event."""
    body, json_answer = b"", False

    async def sending(message: dict[str, Any]) -> None:
        nonlocal body, json_answer
        if message["type"] == "http.response.start":
            headers = dict(message["headers"])
            json_answer = headers.get(b"content-type", b"").startswith(b"application/json")
            if json_answer:
                headers.pop(b"content-length", None)
                headers[b"content-type"] = b"text/event-stream"
                message = {**message, "headers": list(headers.items())}
            await send(message)
        elif json_answer and message["type"] == "http.response.body":
            body += message.get("body", b"")
            if not message.get("more_body", False):
                event = b"event: message\ndata: " + body + b"\n\n"
                await send({"type": "http.response.body", "body": event})
        else:
            await send(message)

    return sending


async def _endless(receive: Any, send: Any) -> None:
    """An answer whose one line never ends, 256 KB every 10 ms, until the client goes."""
    start = {"type": "http.response.start", "status": 200}
    await send({**start, "headers": [(b"content-type", b"application/json")]})
    async with anyio.create_task_group() as group:

        async def until_gone() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            group.cancel_scope.cancel()

        group.start_soon(until_gone)
        while True:
            await send({"type": "http.response.body", "body": b"x" * 262_144, "more_body": True})
            await anyio.sleep(0.01)


if __name__ == "__main__":
    for name in OPTIONS.without:
        server.remove_tool(name)
    if OPTIONS.http_fd is not None:
        _http(
            OPTIONS.http_fd,
            events=OPTIONS.events,
            legacy=OPTIONS.legacy,
            crash_at_list=OPTIONS.crash_at_list,
        )
    else:
        server.run()
