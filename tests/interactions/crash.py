"""A cell's first life in a child process, killed with SIGKILL where a tool holds it:
nothing of that life is shut down cleanly (no shielded cleanup, no last checkpoint),
as when a machine loses power. The child makes the cell's hive again from the cell's
id and what the session gave it, on the same files.

Run as a script (``python -m tests.interactions.crash FOLDER``) it is that child: it
reads ``FOLDER/cell.json``, runs the first life, and writes how it ended to
``FOLDER/life1.json`` (when it is not killed first: a run that ends before any tool
holds it, waiting for approval say).

The child is forked from the fork server of ``tests.support.processes.forked``, which
imported Honeycomb once (a new Python imported it again, a second of CPU a cell): a
process of its own all the same, killed as one.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio

from tests.interactions.drive import Life, live
from tests.interactions.features.base import Env
from tests.interactions.hive import Hive
from tests.interactions.ledger import Ledger
from tests.interactions.toolkit import toolkit
from tests.support.processes import forked, run_module

__all__ = ["killed_first_life"]

START_S = 30.0
"""Time for the child to reach the tool that holds it."""


async def killed_first_life(hive: Hive) -> Life:
    """Life 1 of the run, in a child process: killed where a tool holds it, or ended
    on its own before."""
    folder = hive.ledger.folder
    env: Env = hive.env
    spec = {"cell": hive.cell, "token": hive.token, "mcp": [env.mcp_url, env.mcp_token]}
    spec["notes"] = str(env.mcp_notes) if env.mcp_notes else None
    (folder / "cell.json").write_text(json.dumps(spec))
    # Its output and errors go to child.out and child.err of the folder.
    args = ("tests.interactions.crash", [str(folder)], str(folder / "child"))
    child = forked().Process(target=run_module, args=args)
    await anyio.to_thread.run_sync(child.start)  # (the first starts the fork server)
    with anyio.fail_after(START_S):
        # The child writes the file: it cannot set an event of this process.
        while not hive.ledger.halted.exists() and child.exitcode is None:  # noqa: ASYNC110
            await anyio.sleep(0.01)
    if child.exitcode is None:
        child.kill()
        await anyio.to_thread.run_sync(child.join)
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


if __name__ == "__main__":
    anyio.run(_child, Path(sys.argv[1]))
