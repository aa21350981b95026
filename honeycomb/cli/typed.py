"""The lines a person types at ``honeycomb chat``'s prompt, read as the event loop
sees them come (see :class:`Typed`)."""

from __future__ import annotations

import asyncio
import codecs
import os
import stat
import sys
from typing import TextIO

__all__ = ["Typed"]


class Typed:
    """The lines typed at the prompt. From a terminal or a pipe they are read as the
    event loop sees them come, with no thread: Ctrl-C at the prompt ends the wait at
    once (a thread blocked in ``readline`` held the loop's shutdown until Enter, and
    uvloop then failed in it). A file, or text in memory, is read as it is: reading
    it never waits."""

    def __init__(self, inp: TextIO) -> None:
        self.inp = inp
        self.fd = _waited_on(inp)
        self._decoder = codecs.getincrementaldecoder(inp.encoding or "utf-8")("replace")
        self._read = ""  # read, not yet a whole line
        self._ended = False

    async def readline(self) -> str:
        """The next line, with its newline; "" at the end of the input."""
        if self.fd is None:
            return self.inp.readline()
        while "\n" not in self._read and not self._ended:
            await _readable(self.fd)
            chunk = os.read(self.fd, 65536)
            self._ended = not chunk
            self._read += self._decoder.decode(chunk, final=self._ended)
        line, newline, self._read = self._read.partition("\n")
        return line + newline


def _waited_on(inp: TextIO) -> int | None:
    """``inp``'s file descriptor, if reading it may wait (a terminal, a pipe, a
    socket); None if it never does (a file, ``/dev/null``, text in memory)."""
    try:
        fd = inp.fileno()
        mode = os.fstat(fd).st_mode
    except (OSError, ValueError):  # io.UnsupportedOperation is both
        return None
    waits = os.isatty(fd) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
    return fd if waits and sys.platform != "win32" else None


async def _readable(fd: int) -> None:
    """Return once ``fd`` has something to read, or has ended."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def readable() -> None:  # called on each turn of the loop until it is removed
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, readable)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
