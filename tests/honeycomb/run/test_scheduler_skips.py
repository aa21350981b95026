"""A subtask whose input did not succeed is skipped as soon as that input ends, not
once its other inputs have: those after it are skipped at once, and a quorum knows at
once what can no longer succeed."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from honeycomb import Executor, Policy, Role, RunFailed
from honeycomb.events import WorkerFinished
from honeycomb.testing import FunctionModel
from runtime import Event, ModelRequest

ROLES = [Role(name="w")]

PLAN = [
    {"id": "a", "role": "w", "instruction": "look"},
    {"id": "b", "role": "w", "instruction": "fail"},
    {"id": "c", "role": "w", "instruction": "hold"},
    {"id": "d", "role": "w", "instruction": "sum up", "depends_on": ["c", "b"]},
    {"id": "e", "role": "w", "instruction": "check", "depends_on": ["d"]},
]


def worker(gate: anyio.Event) -> FunctionModel:
    async def answer(request: ModelRequest) -> str:
        instruction = str(request.messages[1].content).split("\n", 1)[0]
        if instruction == "fail":
            raise ValueError("the worker broke")
        if instruction == "hold":
            await gate.wait()
        return "found"

    return FunctionModel(answer)


async def test_dependents_of_a_failure_are_skipped_while_their_other_inputs_run() -> None:
    gate = anyio.Event()  # c runs until d and e are skipped
    skipped: list[str] = []

    def seen(event: Event) -> None:
        if isinstance(event, WorkerFinished) and event.status == "skipped":
            skipped.append(event.worker)
            if len(skipped) == 2:
                gate.set()

    with anyio.fail_after(5):
        result = await Executor(ROLES, worker(gate)).run("t", subtasks=PLAN, on_event=[seen])
    assert skipped == ["d", "e"]
    statuses = {i: s.status for i, s in result.subtasks.items()}
    assert statuses == {"a": "ok", "b": "failed", "c": "ok", "d": "skipped", "e": "skipped"}
    assert "it depends on b, which did not succeed" in str(result.subtasks["d"].error)


async def test_a_quorum_out_of_reach_through_skipped_dependents_stops_at_the_failure() -> None:
    gate = anyio.Event()  # never set: c runs until the run stops it
    executor = Executor(ROLES, worker(gate), policy=Policy(failure="quorum", quorum=3))
    # once b fails, d and e cannot succeed: a and c are 2, fewer than 3
    with anyio.fail_after(5), pytest.raises(RunFailed) as caught:
        await executor.run("t", subtasks=PLAN)
    assert "a quorum of 3 successful subtasks out of 5 cannot be reached" in str(caught.value)
    assert caught.value.partial is not None
    statuses: dict[str, Any] = {i: s.status for i, s in caught.value.partial.subtasks.items()}
    assert statuses == {"a": "ok", "b": "failed", "c": "cancelled", "d": "skipped", "e": "skipped"}
