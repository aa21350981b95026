"""A stdio MCP server's process: started, talked to a line at a time, and stopped.

The ``mcp`` SDK's own stdio transport keeps its process to itself and stops it one way,
the MCP shutdown: its stdin closed, two seconds' grace to exit, then SIGTERM. A server
still starting reads no stdin, so a start that timed out or was cancelled waited out
that grace before it ended. :class:`ServerProcess` is the transport with a hand on the
process: a server that started still gets the MCP shutdown; one that did not is killed
at once.

It deals in lines of text; :mod:`runtime.tools._mcp_sdk` says how a line is a message,
so this module does not import ``mcp``.
"""

from __future__ import annotations

import asyncio
import codecs
import math
import os
import signal
import sys
from asyncio.subprocess import PIPE, Process
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from types import TracebackType
from typing import Generic, TypeAlias, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from runtime.concurrency import TimedOut, shielded, within

__all__ = ["Lines", "ServerProcess", "Stderr"]

In = TypeVar("In")
Out = TypeVar("Out")
_Streams: TypeAlias = tuple[MemoryObjectReceiveStream[In], MemoryObjectSendStream[Out]]
"""What a client reads the server's messages from, and writes its own to (the SDK's
memory object streams)."""

_FLUSH_S = 0.5
"""Seconds the messages the client sent have, as the server stops, to reach it (a
cancelled request's notice)."""

_GRACE_S = 2.0
"""Seconds a stopping server has to exit once its stdin is closed, and again after
SIGTERM (the SDK's grace)."""

_POLL_S = 0.01
"""How often a stopping server is looked at: whether it has exited yet."""

_CHUNK = 64 * 1024
"""Bytes of the server's output read at a time (a message may span several)."""

_KEPT = 8 * 1024
"""Bytes of the end of what a server wrote to stderr that are kept: the rest is read
and dropped, so a server that floods it fills neither memory nor a disk."""

_STRAY_CHARS = 4096
"""Characters kept of a line of a server's output that is not a message: more than an
error shows of it, which masks its secrets first (one cut in two is no longer found)."""

_Gone = (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError)
"""What a pipe or stream raises once its other end, or our own shutdown, closed it."""


class ServerProcess(Generic[In, Out]):
    """A server's process and the streams a client talks to it by: ``async with
    ServerProcess(...) as (read, write):``, entered and left in one task.

    It runs in a session of its own, so that stopping it stops what it started too
    (``uvx`` and ``npx`` start the server as their child). Leaving the block stops it:
    once :attr:`started` is set, the MCP way (the client's last messages out, its stdin
    closed, a grace to exit, SIGTERM, another grace); before that, or when that
    shutdown is itself cut short, with SIGKILL at once. Once it has exited, however it
    did (stopped, or dying as it ran), what it started and left running is killed.

    A line longer than ``max_line`` bytes is not read on: the server is broken (it
    writes a message no client can hold, or one that never ends), so it is killed and
    its output ends, as if it had died, with :attr:`broken` saying why.

    Attributes:
        started: Set by the client once the server answered its handshake and listed
            its tools: from then on it is stopped gracefully.
        ended: Set when the server's output ends (it exited) or cannot be written to.
        broken: Why it was killed as it ran (a line over ``max_line``), or None.
        said: The end of what it wrote to stderr.
        stray: The last line it wrote to stdout that is not a message (cut to
            :data:`_STRAY_CHARS`), or None: a program that does not speak MCP there
            (one that serves HTTP, or prints its usage) says what it does.
        hung_up: Its output ended while the client still used it: it exited (or
            closed its stdout) of itself, not as the block ended.
        status: How it exited, once the block has ended (its exit status, or minus the
            signal that ended it), or None.

    Raises:
        OSError: on entering, when the command cannot be run.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | None,
        parse: Callable[[str], In],
        dump: Callable[[Out], str],
        max_line: int,
        too_long: str,
    ) -> None:
        self._argv = list(argv)
        self._env = dict(env)
        self._cwd = cwd
        self.said = Stderr()
        self.stray: str | None = None
        self.status: int | None = None
        self.hung_up = False
        self._leaving = False  # the block is ending: its output ends as it stops
        self._said_all = asyncio.Event()  # its stderr ended
        self._parse = parse
        self._dump = dump
        self._max_line = max_line
        self._too_long = too_long
        self.started = False
        self.ended = asyncio.Event()
        self.broken: str | None = None
        self._written = asyncio.Event()  # the writer is done: every message it took is out
        self._block: AbstractAsyncContextManager[_Streams[In, Out]] | None = None

    async def __aenter__(self) -> _Streams[In, Out]:
        self._block = self._run()
        return await self._block.__aenter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._block is not None, "entered first"
        return await self._block.__aexit__(exc_type, exc, tb)

    @asynccontextmanager
    async def _run(self) -> AsyncIterator[_Streams[In, Out]]:
        try:
            process = await _spawned(self._argv, self._env, self._cwd)
        except OSError as exc:
            raise _not_run(exc, self._argv[0], self._cwd) from exc
        # No await from here into the block: a cancellation in between would leave the
        # process running with no one to stop it.
        to_client, read = anyio.create_memory_object_stream[In](0)
        # What the client sends is taken at once, whatever the server reads: a server
        # that reads no more (hung) must not hold up a call's cancellation, whose notice
        # to it the SDK gives up on only after seconds.
        write, from_client = anyio.create_memory_object_stream[Out](math.inf)
        pipes = (
            asyncio.create_task(self._read(process, to_client)),
            asyncio.create_task(self._write(process, from_client, to_client)),
            asyncio.create_task(self._read_stderr(process)),
        )
        exited = asyncio.create_task(_reaped(process))
        try:
            yield read, write
        finally:
            self._leaving = True
            read.close()  # no more traffic; the reader drains what is left
            write.close()
            try:
                if self.started:
                    await self._wind_down(process)
            finally:  # a server that did not start, or did not stop: at once
                if process.returncode is None:
                    _signal(process, signal.SIGKILL)
                self.ended.set()
                for pipe in pipes:
                    pipe.cancel()
                await asyncio.gather(*pipes, return_exceptions=True)
                await exited  # reaped (no zombie is left behind), and what it left with it
                self.status = process.returncode

    async def _wind_down(self, process: Process) -> None:
        """The MCP shutdown of a server that started: what the client sent goes out,
        its stdin closes, it has a grace to exit, then SIGTERM and another grace."""
        with suppress(TimedOut), within(_FLUSH_S):
            await self._written.wait()
        assert process.stdin is not None
        # Not waited for: a server that reads no more (hung, or stopped) closes its end
        # only as it exits, and our last bytes, unread, would hold the close forever.
        process.stdin.close()
        if await _exited(process, _GRACE_S):
            return
        _signal(process, signal.SIGTERM)
        await _exited(process, _GRACE_S)

    async def _read(self, process: Process, to_client: MemoryObjectSendStream[In]) -> None:
        """The server's output, a message a line, to the client. Once the client takes
        no more, the rest is read and dropped: a server blocked writing cannot exit.
        When it ends, what the server wrote to stderr as it exited is read before the
        client hears of it (the error it makes says it). A line that would pass
        ``max_line`` bytes ends it: the server is killed."""
        assert process.stdout is not None
        text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        # The pieces of the line under way: joined once it ends, so a long line (a
        # result of many megabytes) is read in time linear in its length.
        pieces: list[str] = []
        within_limit = Lines(self._max_line)
        try:
            while chunk := await process.stdout.read(_CHUNK):
                if not within_limit.take(chunk):
                    self.broken = self._too_long
                    _signal(process, signal.SIGKILL)
                    return
                *lines, rest = text.decode(chunk).split("\n")
                if lines:
                    lines[0] = "".join([*pieces, lines[0]])
                    pieces.clear()
                pieces.append(rest)
                for line in lines:
                    parsed = self._parse(line)
                    if isinstance(parsed, Exception) and line.strip():  # not a message
                        self.stray = line.strip()[:_STRAY_CHARS]
                    with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                        await to_client.send(parsed)
            await self._all_said()
        except _Gone:
            pass  # our shutdown closed its stdout under the read
        finally:
            self._output_ended(to_client)

    async def _read_stderr(self, process: Process) -> None:
        """What the server writes to stderr, into :attr:`said`, until it ends."""
        assert process.stderr is not None
        try:
            while chunk := await process.stderr.read(_CHUNK):
                self.said.add(chunk)
        except _Gone:
            pass
        finally:
            self._said_all.set()

    async def _all_said(self) -> None:
        """Wait for the end of the server's stderr (a moment at most: a child of its may
        hold it open), so that an error about its end says what it wrote as it went."""
        with suppress(TimedOut), within(_FLUSH_S):
            await self._said_all.wait()

    async def _write(
        self,
        process: Process,
        from_client: MemoryObjectReceiveStream[Out],
        to_client: MemoryObjectSendStream[In],
    ) -> None:
        """The client's messages to the server's stdin, a line each."""
        assert process.stdin is not None
        try:
            async for message in from_client:
                process.stdin.write((self._dump(message) + "\n").encode())
                await process.stdin.drain()
        except _Gone:
            # It takes no more (it exited, or closed its stdin): the client is told the
            # connection ended rather than wait for an answer that cannot come.
            await self._all_said()
            self._output_ended(to_client)
        finally:
            self._written.set()

    def _output_ended(self, to_client: MemoryObjectSendStream[In]) -> None:
        # Noted before the client sees the end: a call it then refuses was never sent.
        self.hung_up = self.hung_up or not self._leaving
        self.ended.set()
        to_client.close()


class Lines:
    """The bytes of the line under way in a stream read a chunk at a time, held to a
    limit: a message a line (a stdio server's output, a streamable-HTTP body)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._size = 0

    def take(self, chunk: bytes) -> bool:
        """Count ``chunk`` in: whether the line under way is still within the limit."""
        newline = chunk.find(b"\n")
        if newline < 0:
            self._size += len(chunk)
            return self._size <= self.limit
        if self._size + newline > self.limit:
            return False
        self._size = len(chunk) - chunk.rfind(b"\n") - 1
        return True


class Stderr:
    """The end of what a server wrote to stderr (its last :data:`_KEPT` bytes), and how
    much it wrote in all."""

    def __init__(self) -> None:
        self.written = 0
        self._kept = bytearray()

    def add(self, data: bytes) -> None:
        self.written += len(data)
        self._kept += data
        if len(self._kept) > 2 * _KEPT:  # cut now and then, not at every write
            del self._kept[:-_KEPT]

    def since(self, mark: int) -> str:
        """What it wrote after its first ``mark`` bytes, of what is kept, as text (a
        character cut at its start is replaced)."""
        kept = self._kept[-_KEPT:]
        new = min(len(kept), max(0, self.written - mark))
        return bytes(kept[len(kept) - new :]).decode("utf-8", errors="replace")


async def _spawned(argv: Sequence[str], env: Mapping[str, str], cwd: str | None) -> Process:
    """The server's process, started in a session of its own, its pipes ours. A
    cancellation as it starts lets it start, then kills it and waits for its end, on
    any event loop (uvloop's kills the process alone and goes on: it outlived its
    block a moment, what it started longer).

    Raises:
        OSError: when the command cannot be run.
    """
    spawning = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *argv, stdin=PIPE, stdout=PIPE, stderr=PIPE, env=env, cwd=cwd, start_new_session=True
        )
    )
    try:
        return await shielded(spawning)
    except asyncio.CancelledError:
        if not spawning.cancelled():  # started: shielded waited for its start
            process = spawning.result()
            _signal(process, signal.SIGKILL)
            await shielded(_reaped(process))
        raise


def _not_run(exc: OSError, command: str, cwd: str | None) -> OSError:
    """Why ``command`` cannot be run in ``cwd``, naming what is wrong: its folder (in
    the words of a command not found, which they are not), or its command (which
    uvloop's error does not name); a command written with its arguments in one
    (``python -m server``, as on a command line) is told how to write it."""
    if cwd is not None and not os.path.isdir(cwd):
        return type(exc)(exc.errno, "no such folder to run in (its cwd)", cwd)
    program, *words = command.split() or [command]
    if isinstance(exc, FileNotFoundError) and words:
        said = f"no such command (a program and its arguments go apart: {program!r}, args {words})"
        return type(exc)(exc.errno, said, command)
    return type(exc)(exc.errno, exc.strerror or str(exc), exc.filename or command)


async def _exited(process: Process, within_s: float) -> bool:
    """Whether the process exited within ``within_s`` seconds. Its exit, not the end
    of its pipes: a child it left holding them would look like it hangs."""
    with suppress(TimedOut), within(within_s):
        while process.returncode is None:  # noqa: ASYNC110 (an exit has no event to wait on)
            await asyncio.sleep(_POLL_S)
    return process.returncode is not None


async def _reaped(process: Process) -> None:
    """Wait for the server to exit, however it does (stopped, or dying as it runs), then
    kill what it started and left running in its process group: nothing of it outlives
    it. At once, while its group's number is still that group's (a group with no
    process left in it has none to signal)."""
    await process.wait()
    if sys.platform != "win32":  # no process groups there
        with suppress(ProcessLookupError, PermissionError):  # none left; not ours
            os.killpg(process.pid, signal.SIGKILL)


def _signal(process: Process, number: signal.Signals) -> None:
    """Send ``number`` to the server and to what it started: its process group (its
    pid, as it leads its own session; still its own, as it has not been reaped)."""
    if sys.platform == "win32":  # no process groups: the server alone, killed
        process.kill()
        return
    with suppress(ProcessLookupError, PermissionError):  # gone already; not ours to signal
        os.killpg(process.pid, number)
