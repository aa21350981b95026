"""A cell's first life in a child process, killed with SIGKILL where a tool holds it:
nothing of that life is shut down cleanly (no shielded cleanup, no last checkpoint),
as when a machine loses power. The child makes the cell's hive again from the cell's
id and what the session gave it, on the same files.

Run as a script (``python -m tests.interactions.crash FOLDER``) it is that child: it
reads ``FOLDER/cell.json``, runs the first life, and writes how it ended to
``FOLDER/life1.json`` (when it is not killed first: a run that ends before any tool
holds it, waiting for approval say).

The children are forked by one process of the test process (``python -m
tests.interactions.crash --forker``), which imported Honeycomb and the matrix once:
a child started as a new Python imported them again, a second of CPU a cell. A
forked child is a process of its own all the same, killed as one.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import traceback
from pathlib import Path
from typing import IO

import anyio

from tests.interactions.drive import Life, live
from tests.interactions.features.base import Env
from tests.interactions.hive import Hive
from tests.interactions.ledger import Ledger
from tests.interactions.toolkit import toolkit
from tests.support import ROOT

__all__ = ["killed_first_life"]

START_S = 30.0
"""Time for the child to reach the tool that holds it."""


class _Forker:
    """The process that forks the children: a folder a line in, the child's pid a line
    out; when a child ends, it writes the child's status to ``FOLDER/ended``."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.interactions.crash", "--forker"],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        self._lock = threading.Lock()
        atexit.register(self.stop)

    def fork(self, folder: Path) -> int:
        with self._lock:
            stdin, stdout = self._process.stdin, self._process.stdout
            assert stdin is not None
            assert stdout is not None
            stdin.write(f"{folder}\n")
            stdin.flush()
            return int(stdout.readline())

    def stop(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait(timeout=30)


_forker: _Forker | None = None


def _fork(folder: Path) -> int:
    global _forker
    if _forker is None:
        _forker = _Forker()
    return _forker.fork(folder)


async def killed_first_life(hive: Hive) -> Life:
    """Life 1 of the run, in a child process: killed where a tool holds it, or ended
    on its own before."""
    folder = hive.ledger.folder
    env: Env = hive.env
    spec = {"cell": hive.cell, "token": hive.token, "mcp": [env.mcp_url, env.mcp_token]}
    spec["notes"] = str(env.mcp_notes) if env.mcp_notes else None
    (folder / "cell.json").write_text(json.dumps(spec))
    pid = await anyio.to_thread.run_sync(_fork, folder)
    gone = folder / "ended"
    with anyio.fail_after(START_S):
        # The child writes the file: it cannot set an event of this process.
        while not hive.ledger.halted.exists() and not gone.exists():  # noqa: ASYNC110
            await anyio.sleep(0.01)
    if not gone.exists():
        with contextlib.suppress(ProcessLookupError):  # (it ended just now)
            os.kill(pid, signal.SIGKILL)
        while not gone.exists():  # noqa: ASYNC110 (the forker writes it as it reaps the child)
            await anyio.sleep(0.01)
        return Life(number=1, interrupted=True)
    ended = folder / "life1.json"
    if not ended.exists():
        errors = (folder / "child.err").read_text()
        raise RuntimeError(f"the child of {hive.cell} failed:\n{errors[-2000:]}")
    said = json.loads(ended.read_text())
    return Life(number=1, said=said["status"], said_partial=said["partial"])


async def _child(folder: Path) -> None:
    from tests.interactions.matrix import Cell

    spec = json.loads((folder / "cell.json").read_text())
    a, _, b = spec["cell"].partition("+")
    cell = Cell(a, b or a)
    url, token = spec["mcp"]
    notes = Path(spec["notes"]) if spec["notes"] else None
    hive = Hive(ledger=Ledger(folder), token=spec["token"], cell=cell.id)
    for feature in cell.features:
        feature.apply(hive, Env(mcp_url=url, mcp_token=token, mcp_notes=notes))
    hive.crash = False
    executor = hive.executor(1, toolkit)
    try:
        life = await live(executor, hive, 1)
    finally:
        if executor.store is not None:
            executor.store.close()
    partial = life.partial.status if life.partial is not None else None
    (folder / "life1.json").write_text(json.dumps({"status": life.status, "partial": partial}))


def _serve(requests: IO[str], answers: IO[str]) -> None:
    """The forker: a child for each folder read, until ``requests`` closes."""
    import tests.interactions.matrix  # noqa: F401 (what every child imports, imported once)

    wake, woken = os.pipe()
    os.set_blocking(woken, False)
    signal.set_wakeup_fd(woken)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # (a handler, so the wake-up fd is written)
    children: dict[int, Path] = {}
    while True:
        ready, _, _ = select.select([requests, wake], [], [])
        if wake in ready:
            os.read(wake, 4096)
            while children:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
                (children.pop(pid) / "ended").write_text(str(status))
        if requests in ready:
            line = requests.readline()
            if not line:
                return
            folder = Path(line.strip())
            pid = os.fork()
            if pid == 0:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os._exit(_run_child(folder))
            children[pid] = folder
            answers.write(f"{pid}\n")
            answers.flush()


def _run_child(folder: Path) -> int:
    """The forked child: its first life, its errors in ``child.err``."""
    with (folder / "child.err").open("w") as errors, open(os.devnull, "w") as nowhere:
        os.dup2(errors.fileno(), 2)
        os.dup2(nowhere.fileno(), 1)
        try:
            anyio.run(_child, folder)
        except BaseException:
            traceback.print_exc()
            sys.stderr.flush()
            return 1
        sys.stderr.flush()
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "--forker":
        _serve(sys.stdin, sys.stdout)
    else:
        anyio.run(_child, Path(sys.argv[1]))
