"""Roles that only judge: a role a guard names as its judge checks work and does none.
A planner role is not offered it, its plans cannot give it a subtask, unless the
planner is told to (``RolePlanner(roles=...)``); the caller's own subtasks may still
name it. The hive's ``planner: {roles: [...]}`` is in tests/honeycomb/hive."""

from __future__ import annotations

import json

import pytest

from honeycomb import Executor, Guards, ModelRequest, Role
from honeycomb.errors import PlanError
from honeycomb.planning import RolePlanner
from honeycomb.testing import FunctionModel


class Planning:
    """One function model: the planner gives one subtask to ``role``, judges pass,
    workers answer ``done``; the planner's requests are kept."""

    def __init__(self, role: str) -> None:
        self.role = role
        self.asked: list[ModelRequest] = []

    def answer(self, request: ModelRequest) -> str:
        if "You are a guard" in (request.messages[0].content or ""):
            return "PASS"
        if request.output is not None and request.output.name == "Plan":
            self.asked.append(request)
            subtask = {"id": "s1", "role": self.role, "instruction": "Do it."}
            return json.dumps({"subtasks": [subtask]})
        return "done"

    def offered(self) -> tuple[str, str]:
        """The catalog the planner was shown, and the roles its schema allowed."""
        request = self.asked[0]
        assert request.output is not None
        schema = json.dumps(request.output.json_schema)
        return request.messages[-1].content or "", schema


ROLES = [
    Role(name="planner"),
    Role(name="writer", description="Writes.", guards=Guards(output=("reviewer",))),
    Role(name="reviewer", description="Judges the writing."),
    Role(name="moderator", description="Judges the task."),
]


async def test_a_role_that_only_judges_is_not_offered_and_a_plan_giving_it_work_is_refused() -> (
    None
):
    planning = Planning("reviewer")
    executor = Executor(ROLES, FunctionModel(planning.answer), guards=Guards(input=("moderator",)))
    with pytest.raises(PlanError) as caught:
        await executor.run("Write a note.")
    catalog, schema = planning.offered()
    assert "- writer: Writes." in catalog
    assert "reviewer" not in catalog
    assert "moderator" not in catalog
    assert '"writer"' in schema
    assert '"reviewer"' not in schema
    assert "subtasks.0.role: Input should be 'writer'" in str(caught.value)


async def test_a_planner_told_which_roles_work_may_give_a_judge_work() -> None:
    planning = Planning("reviewer")
    planner = RolePlanner("planner", roles=("writer", "reviewer"))
    result = await Executor(ROLES, FunctionModel(planning.answer), planner=planner).run("Go.")
    assert result.status == "ok"
    assert [s.role for s in result.plan.subtasks] == ["reviewer"]
    catalog, _ = planning.offered()
    assert "- reviewer: Judges the writing." in catalog
    assert "moderator" not in catalog


async def test_a_planner_told_of_a_role_the_run_lacks_says_so() -> None:
    planner = RolePlanner("planner", roles=("writer", "editor"))
    executor = Executor(ROLES, FunctionModel(Planning("writer").answer), planner=planner)
    with pytest.raises(PlanError, match="'editor', which is not a role of the run"):
        await executor.run("Go.")


async def test_the_callers_own_subtasks_may_give_a_judge_work() -> None:
    executor = Executor(ROLES, FunctionModel(Planning("writer").answer))
    result = await executor.run("Go.", subtasks=[("reviewer", "Review the draft.")])
    assert result.status == "ok"


async def test_a_planner_left_no_role_that_works_says_so_before_asking_its_model() -> None:
    asked: list[ModelRequest] = []

    def answer(request: ModelRequest) -> str:
        asked.append(request)
        return "done"

    roles = [
        Role(name="planner"),
        Role(name="writer", guards=Guards(output=("editor",))),
        Role(name="editor", guards=Guards(output=("writer",))),
    ]
    with pytest.raises(PlanError) as caught:
        await Executor(roles, FunctionModel(answer)).run("Go.")
    assert caught.value.problems == (
        "the planner 'planner' has no role to give subtasks to ('writer', 'editor': named by "
        "a guard as its judge, given no work unless named): add a role that works, or name "
        "the roles it gives subtasks to (RolePlanner(roles=[...]); in a hive, planner: "
        "{role: ..., roles: [...]})",
    )
    assert asked == []  # no attempt spent on a plan no answer could make


@pytest.mark.parametrize(
    ("roles", "told"),
    [
        (["planner"], "the run has no other role"),
        (["planner", "aggregator"], "the run's only other role, 'aggregator', merges the results"),
    ],
)
async def test_a_planner_with_no_other_role_says_so_before_asking_its_model(
    roles: list[str], told: str
) -> None:
    asked: list[ModelRequest] = []

    def answer(request: ModelRequest) -> str:
        asked.append(request)
        return "done"

    executor = Executor([Role(name=name) for name in roles], FunctionModel(answer))
    with pytest.raises(PlanError) as caught:
        await executor.run("Go.")
    assert caught.value.problems == (
        f"the planner 'planner' has no role to give subtasks to ({told}): add one",
    )
    assert asked == []  # not three answers sent back for a plan none could make


def test_a_planner_given_no_roles_to_plan_for_is_refused_as_it_is_made() -> None:
    # It was asked for a plan three times, each answer sent back ('subtasks: Tuple
    # should have at least 1 item'): no plan could name a role.
    with pytest.raises(ValueError, match="roles must name a role to give subtasks to"):
        RolePlanner("planner", roles=[])
