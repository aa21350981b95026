"""The partial result of a run stopped mid-plan lists its subtasks in plan order, as a
run that ends does, whatever stopped it."""

from __future__ import annotations

import anyio
import pytest

from honeycomb import BudgetExceeded, Budgets, Executor, Policy, Role
from honeycomb.testing import FunctionModel
from runtime import ModelRequest

ROLES = [Role(name="w")]


async def test_a_run_its_wall_time_stops_keeps_its_subtasks_in_plan_order() -> None:
    never = anyio.Event()

    async def answer(request: ModelRequest) -> str:
        if str(request.messages[1].content).startswith("hold"):
            await never.wait()  # until the wall-time budget cuts it off
        return "found"

    plan = [
        {"id": "a", "role": "w", "instruction": "look"},
        {"id": "b", "role": "w", "instruction": "hold", "depends_on": ["a"]},
        {"id": "c", "role": "w", "instruction": "sum up", "depends_on": ["b"]},
        {"id": "d", "role": "w", "instruction": "look again"},
    ]
    executor = Executor(
        ROLES, FunctionModel(answer), policy=Policy(budgets=Budgets(wall_time_s=0.2))
    )
    with anyio.fail_after(5), pytest.raises(BudgetExceeded) as caught:
        await executor.run("t", subtasks=plan)
    partial = caught.value.partial
    assert partial is not None
    # a and d ended first; the order is the plan's all the same
    assert [(i, s.status) for i, s in partial.subtasks.items()] == [
        ("a", "ok"),
        ("b", "over_budget"),
        ("c", "over_budget"),
        ("d", "ok"),
    ]
