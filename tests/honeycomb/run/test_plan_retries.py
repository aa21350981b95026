"""A planner role's answer that fails the plan's schema is sent back with what is
wrong with it, and only that."""

from __future__ import annotations

import json

import pytest

from honeycomb import Executor, Policy, Role
from honeycomb.errors import PlanError
from honeycomb.testing import FunctionModel
from runtime import ModelRequest, UserMessage

ROLES = [Role(name="planner"), Role(name="researcher")]


async def test_a_plan_whose_one_subtask_fails_the_schema_is_not_told_it_has_none() -> None:
    told: list[str] = []

    def answer(request: ModelRequest) -> str:
        if request.output is None or request.output.name != "Plan":
            return "found"
        told.extend(m.content for m in request.messages[2:] if isinstance(m, UserMessage))
        role = "researcher" if told else "reseacher"  # a typo first, then fixed
        return json.dumps({"subtasks": [{"id": "s1", "role": role, "instruction": "look"}]})

    result = await Executor(ROLES, FunctionModel(answer)).run("Study bees.")
    assert result.status == "ok"
    (sent_back,) = told
    assert "subtasks.0.role: Input should be 'researcher'" in sent_back
    # pydantic counts only the items that validated ('at least 1 item ..., not 0'):
    # the plan has its one subtask, and the model is not told to add one
    assert "at least 1 item" not in sent_back


async def test_a_plan_with_too_many_subtasks_is_told_to_have_fewer() -> None:
    told: list[str] = []

    def answer(request: ModelRequest) -> str:
        if request.output is None or request.output.name != "Plan":
            return "found"
        told.extend(m.content for m in request.messages[2:] if isinstance(m, UserMessage))
        count = 2 if told else 3  # one too many, then within the bound
        subtasks = [
            {"id": f"s{n}", "role": "researcher", "instruction": "look"}
            for n in range(1, count + 1)
        ]
        return json.dumps({"subtasks": subtasks})

    executor = Executor(ROLES, FunctionModel(answer), policy=Policy(max_subtasks=2))
    result = await executor.run("Study bees.")
    assert list(result.subtasks) == ["s1", "s2"]
    (sent_back,) = told
    # not only that 's3' is no id it may use: that the plan is one subtask too long
    assert "the plan has 3 subtasks; at most 2 allowed" in sent_back
    assert "Value error" not in sent_back


async def test_a_plan_too_long_every_time_names_the_policy_to_raise() -> None:
    def answer(request: ModelRequest) -> str:
        subtasks = [{"id": f"s{n}", "role": "researcher", "instruction": "look"} for n in (1, 2, 3)]
        return json.dumps({"subtasks": subtasks})

    executor = Executor(ROLES, FunctionModel(answer), policy=Policy(max_subtasks=2))
    with pytest.raises(PlanError) as caught:
        await executor.run("Study bees.")
    assert "at most 2 allowed (the policy's max_subtasks)" in str(caught.value)
