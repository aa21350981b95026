"""SQLite files that many threads and processes write at once.

SQLite waits for a lock another connection holds (the busy timeout) in most places,
but not in all. Two matter here:

- switching a file to WAL (``PRAGMA journal_mode=WAL``) needs the file to itself, and
  fails at once with "database is locked" while another process has it open: two
  processes that create the same new file, or open one not yet in WAL mode, collide
  there;
- a transaction that read before it writes fails at once when another connection
  wrote meanwhile (its snapshot is stale), and so may the first read of a WAL file
  another process is recovering.

:func:`busy_retry` runs such a step again, after a growing pause with jitter, until a
deadline; :func:`use_wal` is the WAL switch done so, skipped when the file is in WAL
mode already (the mode is kept in the file, so every later open skips it). The caller
checks a file is its own before either: the switch writes to the file.

SQLite's own wait for a lock cannot be cut short, so a connection waits in it for
:data:`BUSY_SLICE_S` at a time, and :func:`busy_retry` waits on, slice by slice,
asking between slices whether its call was cancelled: a call waiting for a file that
another program keeps locked stops as soon as its caller gives up on it (a tool's
timeout, a worker's), instead of holding it for the whole deadline.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "BUSY_SLICE_S",
    "FileId",
    "busy_retry",
    "file_id",
    "is_busy",
    "is_read_only",
    "is_read_only_folder",
    "use_wal",
]

T = TypeVar("T")

_BUSY = (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED (the primary codes of the extended ones)
_READONLY = 8  # SQLITE_READONLY
_READONLY_DIRECTORY = _READONLY | 6 << 8  # SQLITE_READONLY_DIRECTORY
BUSY_SLICE_S = 0.1
"""Seconds a connection waits for a lock in SQLite at a time (its busy timeout)."""


def is_busy(exc: BaseException) -> bool:
    """Whether an SQLite error is another connection holding a lock."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in _BUSY
    text = str(exc)
    return "database is locked" in text or "database table is locked" in text


def is_read_only(exc: BaseException) -> bool:
    """Whether an SQLite error is a write refused because the file may only be read
    (its permissions, a read-only disk)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF == _READONLY
    return "readonly database" in str(exc)


def is_read_only_folder(exc: BaseException) -> bool:
    """Whether an SQLite error is a WAL file's folder that may only be read: SQLite
    cannot make the shared-memory file (``-shm``) it keeps beside it, and then cannot
    even read the file."""
    return getattr(exc, "sqlite_errorcode", None) == _READONLY_DIRECTORY


def _going_on() -> None:
    """A call nobody can cancel."""


def busy_retry(
    step: Callable[[], T],
    *,
    errors: type[BaseException] | tuple[type[BaseException], ...],
    until: float,
    check: Callable[[], None] = _going_on,
) -> T:
    """``step()``, run again while it fails with a busy error of ``errors``, until the
    ``time.monotonic()`` deadline ``until``; then its last error is raised. ``check()``
    is called before each pause: what it raises (its caller's cancellation) stops the
    wait."""
    pause = 0.002
    while True:
        try:
            return step()
        except errors as exc:
            if not is_busy(exc) or time.monotonic() + pause > until:
                raise
        check()
        # Jittered, so processes that collided once do not collide again in step.
        time.sleep(pause * (0.5 + random.random()))
        pause = min(pause * 2, 0.1)


def use_wal(
    db: Any,
    *,
    errors: type[BaseException] | tuple[type[BaseException], ...],
    until: float,
    check: Callable[[], None] = _going_on,
) -> str:
    """Put the file of connection ``db`` in WAL mode, unless it is already; return the
    mode it is in then (``wal``, unless the file cannot be: ``memory`` ...).

    Raises:
        errors: when the file stays locked past ``until`` (as :func:`busy_retry`).
    """

    def switch() -> str:
        mode = str(db.execute("PRAGMA journal_mode").fetchone()[0]).lower()
        if mode != "wal":
            mode = str(db.execute("PRAGMA journal_mode=WAL").fetchone()[0]).lower()
        return mode

    return busy_retry(switch, errors=errors, until=until, check=check)


FileId = tuple[int, int]
"""A file, as its device and inode tell it from another at the same path."""


def file_id(path: Path) -> FileId | None:
    """The file at ``path`` (None: there is none, or it cannot be looked at): a memory
    whose file was deleted or replaced since it opened it knows by this."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino
