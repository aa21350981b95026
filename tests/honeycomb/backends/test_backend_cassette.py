"""A cassette replayed on either backend gives each recorded call once, across every
worker of every run, wherever the workers run (on Ray, in two actors)."""

from __future__ import annotations

import uuid
from pathlib import Path

import anyio
import pytest

from honeycomb import Executor, Role
from honeycomb.backends import RayBackend
from honeycomb.models import Cassette, Model, cassette
from honeycomb.testing import FunctionModel
from runtime import ModelRequest

pytestmark = [pytest.mark.xdist_group("ray"), pytest.mark.timeout(120)]


async def unique(request: ModelRequest) -> str:
    """An answer no other call gets, a while coming (two runs' workers at once)."""
    await anyio.sleep(0.5)
    return f"answer {uuid.uuid4().hex}"


async def two_runs_at_once(models: Model, backend: RayBackend | None) -> set[str]:
    executor = Executor([Role(name="r")], models, aggregator="concat", backend=backend)
    answers: set[str] = set()

    async def one() -> None:
        result = await executor.run("t", subtasks=[("r", "the same question")])
        answers.add(result.answer_text)

    async with anyio.create_task_group() as runs:
        runs.start_soon(one)
        runs.start_soon(one)
    return answers


async def test_runs_asking_the_same_at_once_get_each_recorded_answer_once(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    tape = tmp_path / "calls.jsonl"
    recorded = await two_runs_at_once(cassette(FunctionModel(unique), record=tape), backend)
    assert len(recorded) == 2  # two answers, one a run
    assert len(Cassette(tape).calls) == 2
    # On Ray, each actor had its own copy of the cassette, and both answered the first.
    assert await two_runs_at_once(cassette(FunctionModel(unique), replay=tape), backend) == recorded
