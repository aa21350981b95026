"""Driver processes for the Ray tests.

``python -m tests.support.ray_driver ADDRESS``: joins the Ray cluster at ADDRESS, runs
two subtasks on it, and prints what each answered and the actors' pids, as JSON.

``python -m tests.support.ray_driver --stored DB NOTES WAITS``: on a private Ray, a
stored run (id ``lost``) of one worker that writes a note (a side effect), then waits a
minute: the test kills this process meanwhile, and resumes the run.
"""

from __future__ import annotations

import asyncio
import json
import sys

from honeycomb import Executor, FunctionModel, RayBackend, Role
from tests.support.ray_tools import scripted


async def main(address: str) -> None:
    backend = RayBackend(address, actors=2, actor_cpus=0)
    role = Role(name="r", tools=("tests.support.ray_tools:echo",))
    executor = Executor([role], FunctionModel(scripted), aggregator="concat", backend=backend)
    task = json.dumps({"turns": [[["echo", {"text": "a", "delay": 0.0}]]]})
    result = await executor.run("t", subtasks=[("r", task), ("r", task)])
    answers = [s.worker.text if s.worker else str(s.error) for s in result.subtasks.values()]
    print(json.dumps({"answers": answers, "pids": await backend.pids()}))
    backend.stop()


LOST_CALLS = [
    [["note", {"path": "{notes}", "text": "once"}]],
    [["wait", {"path": "{waits}", "seconds": 60}]],
]


def lost_run(db: str, notes: str, waits: str, backend: RayBackend | None) -> Executor:
    """The executor of the run ``--stored`` starts and the test resumes."""
    tools = tuple(f"tests.support.ray_tools:{t}" for t in ("note", "wait"))
    return Executor(
        [Role(name="r", tools=tools)], FunctionModel(scripted), aggregator="concat",
        backend=backend, store=db,
    )  # fmt: skip


def lost_task(notes: str, waits: str) -> str:
    turns = json.dumps(LOST_CALLS).replace("{notes}", notes).replace("{waits}", waits)
    return json.dumps({"turns": json.loads(turns)})


async def stored(db: str, notes: str, waits: str) -> None:
    executor = lost_run(db, notes, waits, RayBackend(actors=1, actor_cpus=0))
    await executor.run("t", subtasks=[("r", lost_task(notes, waits))], run_id="lost")


if __name__ == "__main__":
    if sys.argv[1] == "--stored":
        asyncio.run(stored(*sys.argv[2:5]))
    else:
        asyncio.run(main(sys.argv[1]))
