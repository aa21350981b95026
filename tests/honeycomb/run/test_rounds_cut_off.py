"""A round its lead was planning when a budget stopped the run: ``.rounds`` says so."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from honeycomb import BudgetExceeded, Budgets, Executor, ModelRequest, Policy, Role
from honeycomb.planning import RolePlanner
from honeycomb.run.result import PlanRound
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel


@pytest.mark.parametrize("budgets", [Budgets(wall_time_s=0.5), Budgets(model_calls=2)])
async def test_a_round_a_budget_cut_off_as_its_lead_planned_it_is_in_the_rounds(
    tmp_path: Path, budgets: Budgets
) -> None:
    """The wall time (or the model calls) ran out as the lead planned round 2: the
    result's rounds ended at round 1, as if round 2 had never begun."""

    async def model(request: ModelRequest) -> str:
        if "lead" not in str(request.messages[0].content):
            return "found"
        if "Planning round 2" in str(request.messages[1].content):
            await asyncio.Event().wait()  # until the wall time cuts it off
        return json.dumps({"subtasks": [{"id": "s1", "role": "worker", "instruction": "w"}]})

    executor = Executor(
        [Role(name="lead"), Role(name="worker")], FunctionModel(model),
        planner=RolePlanner("lead", rounds=3, roles=["worker"]), aggregator="concat",
        policy=Policy(budgets=budgets), store=tmp_path / "runs.db",
    )  # fmt: skip
    with pytest.raises(BudgetExceeded) as stopped:
        await executor.run("bees", run_id="r1")
    partial = stopped.value.partial
    assert partial is not None
    assert partial.rounds_ended == "budget"
    assert partial.rounds[0] == PlanRound(round=1, added=("s1",))
    (cut,) = partial.rounds[1:]
    assert cut.round == 2
    assert cut.added == ()
    assert cut.error is not None
    assert cut.error.startswith(f"BudgetExceeded: budget exceeded: {stopped.value.limit}")
    stored = await RunStore(tmp_path / "runs.db").load("r1")
    assert stored is not None
    assert stored.result is not None
    assert '"round":2' in stored.result.replace(" ", "")
