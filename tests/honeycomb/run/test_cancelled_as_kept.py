"""A worker that ends as its stored run is cancelled (a service's time limit, a client
that left) while its result is being committed: its end is told, and its result is
kept with the run's end, so a resumed run does not do its work again."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anyio
import pytest

from honeycomb import Executor, Role
from honeycomb.events import WorkerFinished
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from runtime import Event, ModelRequest

ROLES = [Role(name="w")]
PLAN = [("w", "quick"), ("w", "slow")]
RESULT = "INSERT INTO workers (run_id, worker, status, result,"  # a worker's result kept


class HeldResults(RunStore):
    """A store whose commit of s1's result waits until it is cancelled."""

    def __init__(self, where: Path) -> None:
        super().__init__(where)
        self.writing = asyncio.Event()

    async def commit(self, *statements: Any, **options: Any) -> None:
        s1 = any(sql.startswith(RESULT) and row[1] == "s1" for sql, row in statements)
        if s1 and not options.get("urgent", True) and not self.writing.is_set():
            self.writing.set()
            await asyncio.Event().wait()
        await super().commit(*statements, **options)


def worker(*, slow_forever: bool) -> FunctionModel:
    async def answer(request: ModelRequest) -> str:
        if request.messages[1].content == "slow" and slow_forever:
            await asyncio.Event().wait()
        return f"found: {request.messages[1].content}"

    return FunctionModel(answer)


async def test_a_worker_that_ends_as_its_run_is_cancelled_is_told_and_kept(
    tmp_path: Path,
) -> None:
    store = HeldResults(tmp_path / "runs.db")
    events: list[Event] = []
    executor = Executor(ROLES, worker(slow_forever=True), aggregator="concat", store=store)
    running = asyncio.create_task(
        executor.run("t", subtasks=PLAN, run_id="r1", on_event=[events.append])
    )
    with anyio.fail_after(10):
        await store.writing.wait()  # s1 has ended, its result is being committed
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
    ended = [(e.worker, e.status) for e in events if isinstance(e, WorkerFinished)]
    assert ("s1", "ok") in ended
    assert len(ended) == 2  # every worker.started has its worker.finished

    model = worker(slow_forever=False)
    again = Executor(ROLES, model, aggregator="concat", store=tmp_path / "runs.db")
    with anyio.fail_after(10):
        resumed = await again.resume("r1")
    assert resumed.status == "ok"
    assert resumed.subtasks["s1"].text == "found: quick"
    assert [r.conversation for r in model.requests] == ["r1/s2"]  # s1 is not done again
