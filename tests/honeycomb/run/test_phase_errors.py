"""Your own code in a run's planning and aggregation phases: an exception of its own,
or an answer of the wrong kind, is Honeycomb's error for the phase (``PlanError``,
``RunFailed`` with the partial result), the original chained, whatever the planner
or aggregator is."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from honeycomb import Executor, Plan, Role, RunFailed, SubtaskResult
from honeycomb.errors import PlanError
from honeycomb.run import RunContext
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel

ROLES = [Role(name="w")]


def worker_model() -> FunctionModel:
    return FunctionModel(lambda request: "found")


class Broken:
    """An Aggregator of your own whose bug is a KeyError."""

    async def aggregate(
        self, task: str, results: Sequence[SubtaskResult], context: RunContext
    ) -> Any:
        return {}["missing"]


def divide(task: str, results: Sequence[SubtaskResult]) -> Any:
    return 1 / 0


@pytest.mark.parametrize(
    ("aggregator", "raised"), [(divide, ZeroDivisionError), (Broken(), KeyError)]
)
async def test_an_aggregator_that_raises_fails_the_run_with_its_partial_result(
    tmp_path: Path, aggregator: Any, raised: type[Exception]
) -> None:
    store = tmp_path / "runs.db"
    executor = Executor(ROLES, worker_model(), aggregator=aggregator, store=store)
    with pytest.raises(RunFailed, match=f"the aggregator failed: {raised.__name__}") as caught:
        await executor.run("t", subtasks=[("w", "look")], run_id="r1")
    assert isinstance(caught.value.__cause__, raised)
    partial = caught.value.partial
    assert partial.status == "failed"
    assert partial.subtasks["s1"].ok  # what the workers found is kept
    assert [(s.run_id, s.status) for s in RunStore(store).runs()] == [("r1", "failed")]


@pytest.mark.parametrize(
    ("planner", "told"),
    [
        (lambda task: 1 / 0, "the planner raised ZeroDivisionError: division by zero"),
        (lambda task: None, "what the planner function returned is None, not a Plan"),
        (lambda task: "w: look", "what the planner function returned is 'w: look', not a Plan"),
        (lambda task: [1, 2], "invalid subtask at index 0: 1 (int) is not a Subtask"),
        (lambda task: [{"role": "w"}], "invalid subtask at index 0: Subtask.instruction: Field"),
    ],
)
async def test_a_planner_function_that_raises_or_returns_no_plan_is_a_plan_error(
    planner: Callable[[str], Any], told: str
) -> None:
    executor = Executor(ROLES, worker_model(), planner=planner)
    with pytest.raises(PlanError) as caught:
        await executor.run("t")
    assert told in str(caught.value)
    assert caught.value.partial is None  # no subtask ran: no result (an eval's case: error)


async def test_a_planner_of_your_own_is_held_to_the_same_rules() -> None:
    class Raising:
        async def plan(self, task: str, context: RunContext) -> Plan:
            raise LookupError("no such index")

    class Listing:
        async def plan(self, task: str, context: RunContext) -> Any:
            return [("w", "look")]

    class Unknown:
        async def plan(self, task: str, context: RunContext) -> Plan:
            return Plan.of([("ghost", "look")])

    told = []
    for planner in (Raising(), Listing(), Unknown()):
        with pytest.raises(PlanError) as caught:
            await Executor(ROLES, worker_model(), planner=planner).run("t")
        told.append(str(caught.value))
    assert told == [
        "invalid plan: the planner raised LookupError: no such index",
        "invalid plan: the planner returned [('w', 'look')], not a Plan",
        "invalid plan: subtask 's1': unknown role 'ghost'; roles: w",
    ]


async def test_given_subtasks_that_are_no_plan_are_a_plan_error() -> None:
    executor = Executor(ROLES, worker_model())
    told = r"the plan given holds an invalid subtask at index 0 \(id 'a'\): Subtask\.role"
    with pytest.raises(PlanError, match=told):
        await executor.run("t", subtasks=[{"id": "a", "instruction": "look"}])


async def test_a_lead_of_your_own_that_raises_ends_its_rounds_as_a_failed_round() -> None:
    class Lead:
        rounds = 3

        async def plan(self, task: str, context: RunContext) -> Plan:
            return Plan.of([("w", "look")])

        async def follow_up(self, task: str, plan: Plan, results: Any, **kw: Any) -> Plan:
            raise RuntimeError("lead broke")

    result = await Executor(ROLES, worker_model(), planner=Lead()).run("t")
    assert result.rounds_ended == "lead_failed"
    told = result.rounds[-1].error
    assert told == "PlanError: invalid plan: the lead raised RuntimeError: lead broke"
