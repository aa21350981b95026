"""The role that merges a run's results is given no subtask by its planner, whatever
its name: only the role named ``aggregator`` was left out of the planner's roles, so
``aggregator="editor"`` (a hive's ``aggregator: editor``) offered the editor work, and
a plan giving it a subtask ran it as a worker too."""

from __future__ import annotations

import pytest

from honeycomb import Executor, Guards, Role
from honeycomb.errors import PlanError
from honeycomb.testing import FunctionModel
from tests.honeycomb.run.test_judge_roles import Planning


async def test_the_aggregator_role_is_not_offered_whatever_its_name() -> None:
    planning = Planning("editor")
    roles = [
        Role(name="planner"),
        Role(name="writer", description="Writes."),
        Role(name="editor", description="Edits the writers' drafts into one."),
    ]
    executor = Executor(roles, FunctionModel(planning.answer), aggregator="editor")
    with pytest.raises(PlanError):
        await executor.run("Write a note.")
    catalog, schema = planning.offered()
    assert "- writer: Writes." in catalog
    assert "editor" not in catalog
    assert '"editor"' not in schema


async def test_a_planner_whose_other_roles_judge_names_the_aggregator_that_merges() -> None:
    roles = [
        Role(name="planner"),
        Role(name="reviewer", description="Judges the answer."),
        Role(name="editor", description="Merges."),
    ]
    executor = Executor(
        roles,
        FunctionModel(Planning("reviewer").answer),
        aggregator="editor",
        guards=Guards(output=("reviewer",)),
    )
    with pytest.raises(PlanError) as caught:
        await executor.run("Write a note.")
    said = str(caught.value)
    assert "the planner 'planner' has no role to give subtasks to ('reviewer'" in said
    assert "'editor' merges the results" in said
