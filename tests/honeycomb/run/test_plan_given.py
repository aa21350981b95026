"""Subtasks given to ``run()`` (or made by a splitter) in a shape that is no subtask:
the ``PlanError`` names every one, by its index in the list (and its id, if it has
one), and what is wrong with it, before any worker runs."""

from __future__ import annotations

import pytest

from honeycomb import Executor, Role
from honeycomb.errors import PlanError
from honeycomb.planning import RolePlanner
from honeycomb.testing import FunctionModel

ROLES = [Role(name="w")]


async def test_each_invalid_subtask_given_is_named_by_its_index_and_field() -> None:
    asked: list[str] = []

    def model(request: object) -> str:
        asked.append("a worker ran")
        return "found"

    given = [
        ("w", "look"),
        ("w", "look", "again"),  # not a pair
        {"id": "c", "role": "w"},  # no instruction
        None,
        {"id": "e", "role": "w", "instruction": "go", "depends_on": "c"},  # not a list
    ]
    with pytest.raises(PlanError) as caught:
        await Executor(ROLES, FunctionModel(model)).run("t", subtasks=given)
    assert caught.value.problems == (
        "the plan given holds an invalid subtask at index 1: ('w', 'look', 'again') is not a "
        "(role, instruction) pair: it has 3 items",
        "the plan given holds an invalid subtask at index 2 (id 'c'): Subtask.instruction: "
        "Field required",
        "the plan given holds an invalid subtask at index 3: None (NoneType) is not a "
        "Subtask, a mapping of its fields or a (role, instruction) pair",
        "the plan given holds an invalid subtask at index 4 (id 'e'): Subtask.depends_on: "
        "Input should be a valid tuple (got 'c')",
    )
    assert asked == []


async def test_a_planner_given_itself_to_plan_for_is_told_so_without_a_guess() -> None:
    roles = [Role(name="planner"), Role(name="w")]
    planner = RolePlanner("planner", roles=["planner", "wx"])
    with pytest.raises(PlanError) as caught:
        await Executor(roles, FunctionModel(lambda request: "{}"), planner=planner).run("t")
    assert caught.value.problems == (
        "the planner 'planner' is to give subtasks to 'planner', itself; roles: planner, w",
        "the planner 'planner' is to give subtasks to 'wx', which is not a role of the run "
        "(did you mean 'w'?); roles: planner, w",
    )
