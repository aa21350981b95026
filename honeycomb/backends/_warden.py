"""The warden of a private Ray: a small process that outlives its driver only to stop
what the driver's Ray left running.

Ray stops most of a local Ray with the process that started it (its GCS and raylet
get a parent-death signal, and its workers follow their raylet), but not its agents:
they see their raylet die at once, then spend a minute trying to tell a GCS that is
gone. So, on Linux, a backend that starts a private Ray starts a warden beside it and
tells it the processes of that Ray (each by its id and start time, so that an id used
again by another process is never taken for it). The warden waits for the end of a
pipe the driver holds, which closes when the driver ends, however it ends (SIGKILL
included), and then kills those of them still running.

The warden runs as a script (``python -I -S _warden.py``): it imports nothing but the
standard library, so it starts in milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterable

Process = tuple[int, str]
"""A process: its id and its start time (in clock ticks since boot, as /proc says)."""


def started(pid: int) -> str | None:
    """When process ``pid`` started, or None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            # After the name (in parentheses, which may hold spaces): state, ppid, ...
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return None
    return fields[19] if len(fields) > 19 else None


def children() -> dict[int, list[int]]:
    """Every process's children, by parent id."""
    found: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as stat:
                parent = int(stat.read().rpartition(")")[2].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        found.setdefault(parent, []).append(int(name))
    return found


def family(roots: Iterable[int]) -> list[Process]:
    """``roots`` and all their descendants, as they are now."""
    kids = children()
    seen: list[Process] = []
    todo = list(roots)
    while todo:
        pid = todo.pop()
        start = started(pid)
        if start is not None and (pid, start) not in seen:
            seen.append((pid, start))
            todo.extend(kids.get(pid, ()))
    return seen


class Warden:
    """The driver's side of a warden: it starts it, and tells it processes to stop
    when the driver ends."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-I", "-S", __file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C at the terminal is the driver's to handle
        )
        self._told: set[Process] = set()

    def watch(self, processes: Iterable[Process]) -> None:
        """Stop these processes when the driver ends (each is told once)."""
        new = [p for p in processes if p not in self._told]
        if not new or self._process.stdin is None:
            return
        self._told.update(new)
        with contextlib.suppress(OSError):  # a warden someone killed: nothing to tell
            self._process.stdin.write(b"".join(f"{p} {start}\n".encode() for p, start in new))
            self._process.stdin.flush()


_warden: Warden | None = None
_roots: set[int] = set()


def ward(roots: Iterable[int] = ()) -> None:
    """Have the processes of the private Ray this process started (``roots``, and all
    they started so far) stopped when this process ends, on Linux; with no ``roots``,
    look again at those of before (they start more: agents, actors)."""
    global _warden
    _roots.update(roots)
    if not _roots or sys.platform != "linux":
        return
    if _warden is None:
        _warden = Warden()
    _warden.watch(family(_roots))


def my_children() -> list[int]:
    """This process's children (on Linux; elsewhere, none are known)."""
    return children().get(os.getpid(), []) if sys.platform == "linux" else []


def serve(lines: Iterable[bytes]) -> None:
    """The warden itself: read the processes to stop until the driver's end of the
    pipe closes, then kill those still running (the same process: its start time)."""
    told: list[Process] = []
    for line in lines:
        number, _, start = line.decode().strip().partition(" ")
        told.append((int(number), start))
    for pid, start in told:
        if started(pid) == start:
            with contextlib.suppress(OSError):  # it ended meanwhile
                os.kill(pid, signal.SIGKILL)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    serve(sys.stdin.buffer)
