"""The offline model given a task without words (empty, blank, only punctuation): it
answers, as a model does, and never raises."""

from __future__ import annotations

import pytest

from honeycomb import Executor, Role
from honeycomb.offline import OfflineModel
from honeycomb.run.plan import Plan, plan_problems
from honeycomb.run.prompts import PLANNER_INSTRUCTIONS, CatalogEntry, planner_task
from runtime import ModelRequest, OutputSchema, SystemMessage, UserMessage

PREFIX = "[offline simulation] "
ROLES = [
    Role(name="planner", description="Splits requests into subtasks."),
    Role(name="researcher", description="Finds facts about cities and their weather."),
    Role(name="aggregator", description="Merges the findings."),
]
WORDLESS = ["", "   ", "\n\t", "?!"]


@pytest.mark.parametrize("task", WORDLESS)
async def test_a_task_without_words_is_planned_as_one_subtask_that_says_so(task: str) -> None:
    entries = [CatalogEntry(role="researcher", description="Finds facts about cities.")]
    asked = planner_task(task, entries, max_subtasks=4)
    request = ModelRequest(
        messages=(SystemMessage(content=PLANNER_INSTRUCTIONS), UserMessage(content=asked)),
        output=OutputSchema.for_model(Plan),
    )
    response = await OfflineModel(latency=0).complete(request)
    plan = Plan.model_validate_json(response.message.content or "")
    assert plan_problems(plan, ["researcher"], max_subtasks=4) == []
    (subtask,) = plan.subtasks
    assert subtask.role == "researcher"
    assert subtask.instruction.startswith("The task has no words to act on")


@pytest.mark.parametrize("task", ["", "  \n"])
async def test_a_worker_given_no_task_says_so(task: str) -> None:
    request = ModelRequest(
        messages=(SystemMessage(content="You are a worker."), UserMessage(content=task))
    )
    response = await OfflineModel(latency=0).complete(request)
    assert (
        response.message.content
        == f"{PREFIX}I was given no task: say what you would like me to do."
    )


@pytest.mark.parametrize("task", [t for t in WORDLESS if t.strip()])  # a blank one is refused
async def test_a_run_of_a_task_without_words_ends_with_an_answer(task: str) -> None:
    result = await Executor(ROLES, OfflineModel(latency=0)).run(task)
    assert result.status == "ok"
    assert result.answer_text.startswith(PREFIX)


async def test_a_message_of_no_words_after_a_topic_is_answered_too() -> None:
    # A message that names no role's words follows the topic before it ("And Madrid?");
    # one with no words at all has nothing to follow it with.
    session = Executor(ROLES, OfflineModel(latency=0)).session("s")
    await session.run("Find the weather in Rome.")
    result = await session.run("?")  # an empty one is refused, as an empty task is
    assert result.status == "ok"
    (outcome,) = result.subtasks.values()
    assert outcome.subtask.instruction.startswith("The task has no words to act on")
