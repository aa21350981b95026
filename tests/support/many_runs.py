"""Several stored runs carried on at once by one process: the child the tests of many
processes sharing one store start, kill, and race (``tests/support/durable.py``'s run,
each run with files of its own: ``effects-RUN.txt`` and ``calls-RUN.txt``).

``python -m tests.support.many_runs STORE FOLDER LIFE run|resume RUN_ID...`` starts (or
resumes) every run at once and prints a JSON object: each run's status, or ``busy``
when another process carries it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio

from honeycomb.errors import RunBusy
from honeycomb.store import RunStore
from tests.support.durable import TASK, Setup, plan
from tests.support.where import Where, named

WORKERS = 3
LATENCY_S = 0.1


def setup(folder: Path, run_id: str, life: str) -> Setup:
    """The tools and model of run ``run_id``, writing to its own files."""
    effects, calls = folder / f"effects-{run_id}.txt", folder / f"calls-{run_id}.txt"
    return Setup(effects, calls, life=life, latency=LATENCY_S)


async def carry(where: Where, folder: Path, life: str, mode: str, run_ids: list[str]) -> None:
    store = RunStore(where)
    outcomes: dict[str, str] = {}

    async def one(run_id: str) -> None:
        executor = setup(folder, run_id, life).executor(store)
        try:
            if mode == "run":
                result = await executor.run(TASK, subtasks=plan(WORKERS), run_id=run_id)
            else:
                result = await executor.resume(run_id)
        except RunBusy:
            outcomes[run_id] = "busy"
        else:
            outcomes[run_id] = result.status

    async with anyio.create_task_group() as tg:
        for run_id in run_ids:
            tg.start_soon(one, run_id)
    store.close()
    sys.stdout.write(json.dumps(outcomes) + "\n")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    where_, folder_, life_, mode_, *run_ids_ = sys.argv[1:]
    anyio.run(carry, named(where_), Path(folder_), life_, mode_, run_ids_)
