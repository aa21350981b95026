"""The round a subtask belongs to is the planner's to say, not its model's: a round a
planner model writes in its plan (out of its schema, or as a Plan's own JSON has it)
is ignored, and the rounds go on as planned."""

from __future__ import annotations

import json
import re

from honeycomb import Executor, Role
from honeycomb.planning import RolePlanner
from honeycomb.run.plan import plan_type
from honeycomb.testing import FunctionModel
from runtime import ModelRequest, UserMessage


async def test_a_round_the_planner_model_writes_is_ignored_and_the_rounds_go_on() -> None:
    asked: list[int] = []

    async def answer(request: ModelRequest) -> str:
        users = [m.content for m in request.messages if isinstance(m, UserMessage)]
        if request.output is None or request.output.name != "Plan":
            return "found"
        found = re.search(r"Planning round (\d+)", users[0])
        number = int(found.group(1)) if found else 1
        asked.append(number)
        if number == 3:
            return json.dumps({"subtasks": []})
        # the model says the round, out of its schema: the last one, then none at all
        said = {1: 3, 2: 0}[number]
        sid = f"s{number}"
        return json.dumps(
            {"subtasks": [{"id": sid, "role": "researcher", "instruction": "look", "round": said}]}
        )

    executor = Executor(
        [Role(name="lead"), Role(name="researcher")],
        FunctionModel(answer),
        planner=RolePlanner("lead", rounds=3),
        aggregator="concat",
    )
    result = await executor.run("Study bees.")

    assert asked == [1, 2, 3]  # the first plan was round 1: the lead was asked again
    assert [s.round for s in result.plan.subtasks] == [1, 2]
    assert result.rounds_ended == "done"


def test_the_schema_takes_a_plans_own_json_with_its_rounds_left_out() -> None:
    schema = plan_type(("researcher",), 3)
    sent = schema.model_json_schema()["$defs"]["Subtask"]["properties"]
    assert "round" not in sent
    plan = schema.model_validate(
        {"subtasks": [{"id": "s1", "role": "researcher", "instruction": "x", "round": 0}]}
    )
    assert plan.subtasks[0].round == 1
