"""A driver process for the cluster test: it joins the Ray cluster at ``argv[1]``,
runs two subtasks on it, and prints what each answered and the actors' pids, as JSON.
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


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
