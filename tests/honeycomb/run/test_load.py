"""Load: a thousand concurrent runs of one small hive in one process, and one run of
ten thousand workers, on a zero-latency model. Every run completes without error,
each with its own answer, and nothing is left running afterwards: no asyncio task
and no thread that was not there before."""

from __future__ import annotations

import asyncio
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

from honeycomb import Executor, Policy, Role, RunResult, tool
from honeycomb.hive import load_hive
from honeycomb.testing import FunctionModel
from runtime import AssistantMessage, ModelRequest, ToolMessage
from runtime.testing import call

pytestmark = pytest.mark.timeout(120)

HIVE = """\
name: load
models:
  default: offline
tools:
  lookup: tests.honeycomb.run.test_load:lookup
roles:
  researcher:
    description: Finds facts.
    tools: [lookup]
  writer:
    description: Writes.
aggregator: concat
policy:
  max_workers: 4
"""


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    await anyio.lowlevel.checkpoint()
    return f"fact about {key}"


def answer(request: ModelRequest) -> AssistantMessage | str:
    """A researcher looks its conversation up, then reports; a writer just writes."""
    last = request.messages[-1]
    if isinstance(last, ToolMessage):
        return f"done: {last.content}"
    if "researcher worker" in (request.messages[0].content or ""):
        return AssistantMessage(tool_calls=(call("lookup", {"key": request.conversation}),))
    return f"written by {request.conversation}"


@contextmanager
def nothing_left_behind() -> Iterator[None]:
    """Fail if the block leaves an asyncio task or a thread that was not there before."""
    tasks, threads = asyncio.all_tasks(), set(threading.enumerate())
    yield
    assert asyncio.all_tasks() - tasks == set()
    assert set(threading.enumerate()) - threads == set()


async def test_a_thousand_concurrent_runs_of_one_hive(tmp_path: Path) -> None:
    path = tmp_path / "hive.yaml"
    path.write_text(textwrap.dedent(HIVE))
    executor = Executor.from_hive(load_hive(path), model=FunctionModel(answer))
    plan = [("researcher", "find"), ("researcher", "find more"), ("writer", "write")]
    results: dict[int, RunResult] = {}

    async def one(i: int) -> None:
        results[i] = await executor.run(f"task {i}", subtasks=plan, run_id=f"run{i}")

    with nothing_left_behind():
        async with anyio.create_task_group() as tg:
            for i in range(1000):
                tg.start_soon(one, i)

    assert len(results) == 1000
    for i, result in results.items():
        assert result.status == "ok"
        assert [s.text for s in result.subtasks.values()] == [
            f"done: fact about run{i}/s1",
            f"done: fact about run{i}/s2",
            f"written by run{i}/s3",
        ]
        assert result.usage.model_calls == 5
        assert result.usage.tool_calls == 2


async def test_one_run_of_ten_thousand_workers() -> None:
    workers = 10_000
    roles = [Role(name="researcher", tools=("lookup",)), Role(name="writer")]
    executor = Executor(
        roles,
        FunctionModel(answer),
        tools=[lookup],
        aggregator="concat",
        policy=Policy(max_workers=1000, max_subtasks=workers),
    )
    plan = [("researcher" if i % 2 else "writer", f"part {i}") for i in range(workers)]

    with nothing_left_behind():
        result = await executor.run("big", subtasks=plan, run_id="big")

    assert result.status == "ok"
    assert len(result.subtasks) == workers
    assert all(s.ok for s in result.subtasks.values())
    assert result.subtasks["s2"].text == "done: fact about big/s2"
    assert result.subtasks["s10000"].text == "done: fact about big/s10000"
    assert result.subtasks["s9999"].text == "written by big/s9999"
    assert result.usage.model_calls == workers // 2 * 3
    assert result.usage.tool_calls == workers // 2
