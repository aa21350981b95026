"""What every running worker holds: a run of N workers holds each of these N times, so
the coroutines under a worker and the objects made for it stay few and small."""

from __future__ import annotations

import asyncio
import types

from honeycomb import Executor, Role, Subtask, tool
from honeycomb.testing import ScriptedModel
from runtime.testing import call


def _awaiting(task: asyncio.Task[object]) -> list[str]:
    """The coroutines a suspended task is awaiting, outermost first."""
    chain: list[str] = []
    awaited: object = task.get_coro()
    while isinstance(awaited, types.CoroutineType):
        chain.append(awaited.cr_code.co_qualname)
        awaited = awaited.cr_await
    return chain


async def test_a_running_worker_is_awaited_by_its_subtask_coroutine_alone() -> None:
    seen: dict[str, asyncio.Task[object]] = {}
    holding, release = asyncio.Event(), asyncio.Event()

    @tool
    async def hold() -> str:
        """Wait until released."""
        task = asyncio.current_task()
        assert task is not None
        seen["task"] = task  # the call runs in its worker's own task
        holding.set()
        await release.wait()
        return "released"

    executor = Executor(
        [Role(name="worker", tools=("hold",))],
        ScriptedModel([call("hold", {}), "done"]),
        tools=[hold],
        aggregator="concat",
    )
    running = asyncio.ensure_future(
        executor.run("hold", subtasks=[Subtask(id="w", role="worker", instruction="hold")])
    )
    await holding.wait()
    chain = _awaiting(seen["task"])
    release.set()
    result = await running
    assert result.status == "ok"
    scheduler = [name for name in chain if name.startswith("Scheduler.")]
    assert scheduler == ["Scheduler._run_subtask"], chain
    assert chain[chain.index("Scheduler._run_subtask") + 1] == "Worker.run", chain
