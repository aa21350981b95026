"""Driver processes for the Ray tests.

``python -m tests.support.ray_driver ADDRESS``: joins the Ray cluster at ADDRESS, runs
two subtasks on it, and prints what each answered and the actors' pids, as JSON.

``python -m tests.support.ray_driver --stored DB NOTES WAITS``: on a private Ray, a
stored run (id ``lost``) of one worker that writes a note (a side effect), then waits a
minute: the test kills this process meanwhile, and resumes the run.

``python -m tests.support.ray_driver --private``: on a private Ray, two subtasks, one
calling a tool of this program (run as ``__main__``), the other a tool of a module;
prints what each answered and the actors' pids, as JSON, then waits to be killed.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from honeycomb import Executor, Policy, Role, tool
from honeycomb.backends import RayBackend
from honeycomb.testing import FunctionModel
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


TOOLS = "tests.support.ray_tools"

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


@tool
def where(text: str) -> str:
    """Say which process runs the call.

    Args:
        text: Anything.
    """
    return f"{text} {os.getpid()}"


async def private() -> None:
    backend = RayBackend(actors=1, actor_cpus=0, num_cpus=1)
    roles = [Role(name="q", tools=("where",)), Role(name="r", tools=(f"{TOOLS}:echo",))]
    executor = Executor(
        roles, FunctionModel(scripted), tools=[where], aggregator="concat", backend=backend,
        policy=Policy(failure="best_effort"),
    )  # fmt: skip
    calls = {"q": [["where", {"text": "in"}]], "r": [["echo", {"text": "a", "delay": 0.0}]]}
    subtasks = [(role, json.dumps({"turns": [turn]})) for role, turn in calls.items()]
    result = await executor.run("t", subtasks=subtasks)
    answers = [s.text if s.ok else str(s.error) for s in result.subtasks.values()]
    print(json.dumps({"answers": answers, "pids": await backend.pids()}), flush=True)
    await asyncio.sleep(600)


if __name__ == "__main__":
    if sys.argv[1] == "--stored":
        asyncio.run(stored(*sys.argv[2:5]))
    elif sys.argv[1] == "--private":
        asyncio.run(private())
    else:
        asyncio.run(main(sys.argv[1]))
