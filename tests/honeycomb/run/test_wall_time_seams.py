"""The wall-time budget at its seams: a resumed run's lives share it, and a hive
called as a tool is bounded by its caller's budget, not by its own hive's."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from honeycomb import (
    AssistantMessage,
    BudgetExceeded,
    Budgets,
    Executor,
    ModelRequest,
    Policy,
    Role,
    ToolMessage,
)
from honeycomb.testing import FunctionModel, call

ONE = [{"id": "s1", "role": "reader", "instruction": "read"}]


async def never_answers(request: ModelRequest) -> str:
    await asyncio.Event().wait()  # until the run is cut off
    raise AssertionError("unreachable")


def reader(db: Path, model: FunctionModel, wall_time_s: float) -> Executor:
    return Executor(
        [Role(name="reader")], model, aggregator="concat", store=db,
        policy=Policy(budgets=Budgets(wall_time_s=wall_time_s)),
    )  # fmt: skip


async def test_a_resumed_run_has_the_wall_time_its_earlier_lives_left(tmp_path: Path) -> None:
    """The first life runs 1.2 s of a 2 s budget, then is cancelled; the resumed life
    is cut off after the 0.8 s left (not a whole budget more: a margin of 0.8 s for a
    busy machine), and the error counts both lives."""
    db, wall = tmp_path / "runs.db", 2.0
    ran_a_while = asyncio.Event()

    async def slow(request: ModelRequest) -> str:
        await asyncio.sleep(0.6 * wall)
        ran_a_while.set()
        return await never_answers(request)

    began = time.monotonic()
    first = asyncio.create_task(
        reader(db, FunctionModel(slow), wall).run("t", subtasks=ONE, run_id="r1")
    )
    await ran_a_while.wait()
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    first_life = time.monotonic() - began

    began = time.monotonic()
    with pytest.raises(BudgetExceeded) as stopped:
        await reader(db, FunctionModel(never_answers), wall).resume("r1")
    second_life = time.monotonic() - began
    assert stopped.value.limit == "wall_time_s"
    assert second_life < 0.8 * wall  # about the 0.8 s left
    # Both lives counted: the budget's whole, and no more than the test saw them take
    # (which adds making each Executor and the first's cancelling, long when busy).
    assert wall <= stopped.value.used <= first_life + second_life


def hive_as_tool(inner_budgets: Budgets, outer_budgets: Budgets) -> tuple[Executor, list[str]]:
    """A lead whose tool ``facts`` runs a hive of two readers (each model call 0.2 s);
    and the calls the inner hive's model answered."""
    answered: list[str] = []

    async def inner_model(request: ModelRequest) -> str:
        await asyncio.sleep(0.2)
        answered.append("inner")
        return "inner answer"

    def lead(request: ModelRequest) -> AssistantMessage | str:
        results = [m for m in request.messages if isinstance(m, ToolMessage)]
        if not results:
            return AssistantMessage(tool_calls=(call("facts", {"instruction": "find"}),))
        return "lead got: " + results[0].content

    inner = Executor(
        [Role(name="reader")], FunctionModel(inner_model), aggregator="concat",
        planner=[{"id": f"i{i}", "role": "reader", "instruction": "x"} for i in range(2)],
        policy=Policy(budgets=inner_budgets),
    )  # fmt: skip
    outer = Executor(
        [Role(name="lead", tools=("facts",))], FunctionModel(lead),
        tools=[inner.as_tool("facts")], aggregator="concat",
        policy=Policy(budgets=outer_budgets),
    )  # fmt: skip
    return outer, answered


async def test_a_hive_called_as_a_tool_is_not_bound_by_its_own_budgets() -> None:
    """The inner hive's own limits, its wall time as its model calls, do not apply
    under a caller: the caller, with no budget, gets the sub-run's answer."""
    outer, answered = hive_as_tool(Budgets(model_calls=1, wall_time_s=0.05), Budgets())
    result = await outer.run("go", subtasks=[{"id": "s1", "role": "lead", "instruction": "go"}])
    assert result.status == "ok"
    assert answered == ["inner", "inner"]
    assert result.usage.model_calls == 4  # the lead's two and the sub-run's two


async def test_a_hive_called_as_a_tool_is_bounded_by_its_callers_wall_time() -> None:
    """The caller's wall time bounds the sub-run: the calling run stops under its own
    limit, while the sub-run's model calls are under way."""
    outer, answered = hive_as_tool(Budgets(), Budgets(wall_time_s=0.1))
    with pytest.raises(BudgetExceeded) as stopped:
        await outer.run("go", subtasks=[{"id": "s1", "role": "lead", "instruction": "go"}])
    assert (stopped.value.limit, stopped.value.allowed) == ("wall_time_s", 0.1)
    assert answered == []
