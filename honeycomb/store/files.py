"""What the files of an SQLite database tell without a connection that could change
them: whether a process has it open, and the application id its ``-wal`` holds.

A connection to a database in WAL mode writes its ``-shm``, and the last one to close
moves the ``-wal`` into the file; so another application's database is known for what
it is from its files, before any such connection. The ``.db`` file itself is only
ever opened by SQLite (an immutable connection reads its header): in POSIX, closing
any descriptor of a file drops every lock the process holds on it, those of its own
connections to it included, and SQLite alone keeps track of that. The ``-wal`` holds
no lock, and is read here.
"""

from __future__ import annotations

import os
import stat
import struct
from pathlib import Path

__all__ = ["idle", "not_a_file", "read_only", "sidecar", "unwritable", "wal_application_id"]

_WAL_MAGIC = (0x377F0682, 0x377F0683)  # checksums of little-, big-endian words
_WAL_HEADER = 32
_FRAME_HEADER = 24
_APPLICATION_ID_AT = 68  # in the database header, the start of page 1


_KINDS = ((stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"), (stat.S_ISFIFO, "a pipe"))


def not_a_file(path: Path) -> str | None:
    """Why ``path`` can hold no store's file (None: it is one, or can be made): it is a
    folder, a device, a pipe or a socket (SQLite writes nothing to ``/dev/null``, and
    waits for ever on a pipe), what would be its folder is a file, or this user may
    not look (a folder above it it cannot enter)."""
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):  # missing: made in its folder
        # Its folder, or the nearest above it: the file itself may be there by now (made
        # by another process meanwhile), which says nothing of its folder.
        above = _nearest(path.parent)
        if above is None or stat.S_ISDIR(above[1]):
            return None
        return f"{above[0]} is a file, not a folder: no run store can be in it"
    except OSError as exc:
        return f"cannot be looked at: {exc.strerror or exc}"
    if stat.S_ISDIR(mode):
        return "this is a folder, not a run store: name its file"
    if stat.S_ISREG(mode):
        return None
    kind = next((kind for test, kind in _KINDS if test(mode)), "a socket")
    return f"this is {kind}, not a file: a run store is kept in a file of its own"


def read_only(path: Path) -> bool:
    """Whether the file at ``path`` is there and this user may not write it (SQLite
    opens such a file to read, and refuses its first write)."""
    return path.exists() and not os.access(path, os.W_OK)


def unwritable(path: Path) -> str | None:
    """Why this user cannot write the store at ``path``, as far as the file system
    tells (None: nothing it tells): the file is read-only, or the folder it is (or is
    to be) in is not writable, where SQLite writes the ``-wal`` and ``-shm``."""
    above = _nearest(path)
    if above is None:
        return None
    if above[0] == path and read_only(path):
        return "the file is read-only for this user"
    folder = path.parent if above[0] == path else above[0]
    if not os.access(folder, os.W_OK | os.X_OK):
        return (
            f"this user cannot write in the folder {folder}, where SQLite keeps the "
            "store's -wal and -shm beside its file"
        )
    return None


def _nearest(path: Path) -> tuple[Path, int] | None:
    """``path``, or the nearest folder above it, that is there, with its mode (None:
    none can be looked at)."""
    for there in (path, *path.parents):
        try:
            return there, there.stat().st_mode
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            return None
    return None


def sidecar(path: Path, suffix: str) -> Path:
    """``path``'s ``-wal`` or ``-shm`` file."""
    return path.with_name(path.name + suffix)


def idle(path: Path) -> tuple[int, int, int] | None:
    """The ``.db`` file's identity, size and time of change, if no process has the
    database open (neither ``-wal`` nor ``-shm`` is beside it: the ``.db`` holds all of
    it); None if one may."""
    if sidecar(path, "-wal").exists() or sidecar(path, "-shm").exists():
        return None
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns


def wal_application_id(path: Path) -> int | None:
    """The application id that the first write in ``path``'s ``-wal`` gave the
    database (it is in page 1, which a database's first transaction writes), or None
    when the ``-wal`` holds no valid frame of page 1 (missing, empty, or left over)."""
    try:
        with sidecar(path, "-wal").open("rb") as wal:
            header = wal.read(_WAL_HEADER)
            if len(header) < _WAL_HEADER:
                return None
            magic, _version, page_size, _seq, salt1, salt2 = struct.unpack(">6I", header[:24])
            if magic not in _WAL_MAGIC or page_size < 512 or page_size & (page_size - 1):
                return None
            order = ">" if magic & 1 else "<"
            sums = _checksum(order, header[:24], (0, 0))
            if sums != struct.unpack(">2I", header[24:32]):
                return None
            while True:
                frame = wal.read(_FRAME_HEADER + page_size)
                if len(frame) < _FRAME_HEADER + page_size:
                    return None
                page, _size, frame_salt1, frame_salt2 = struct.unpack(">4I", frame[:16])
                if (frame_salt1, frame_salt2) != (salt1, salt2):
                    return None  # left over from before the last reset: not the log
                sums = _checksum(order, frame[:8] + frame[_FRAME_HEADER:], sums)
                if sums != struct.unpack(">2I", frame[16:24]):
                    return None  # torn: the log ends before it
                if page == 1:
                    at = _FRAME_HEADER + _APPLICATION_ID_AT
                    found: int = struct.unpack(">I", frame[at : at + 4])[0]
                    return found
    except OSError:
        return None


def _checksum(order: str, data: bytes, sums: tuple[int, int]) -> tuple[int, int]:
    """SQLite's WAL checksum of ``data``, going on from ``sums``."""
    s0, s1 = sums
    words = struct.unpack(f"{order}{len(data) // 4}I", data)
    for index in range(0, len(words), 2):
        s0 = (s0 + words[index] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[index + 1] + s0) & 0xFFFFFFFF
    return s0, s1
