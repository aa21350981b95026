"""The offline model given a message longer than a subtask's instruction may be (a
newcomer pasting a long text into ``honeycomb chat``): it plans within the plan's
schema, as a model whose decoding follows it does, and the run answers."""

from __future__ import annotations

import pytest

from honeycomb import Executor, Role
from honeycomb.offline import OfflineModel
from honeycomb.offline.plan import follow_up_for
from honeycomb.run.plan import INSTRUCTION_CHARS, Plan, plan_type
from honeycomb.run.prompts import (
    PLANNER_INSTRUCTIONS,
    CatalogEntry,
    ResultEntry,
    follow_up_task,
    planner_task,
)
from runtime import ModelRequest, OutputSchema, SystemMessage, UserMessage

ROLES = [
    Role(name="planner", description="Splits requests into subtasks."),
    Role(name="researcher", description="Finds facts about cities and their weather."),
    Role(name="aggregator", description="Merges the findings."),
]
ONE_SENTENCE = "tell me about the weather in Lisbon and what to pack for a walk, " * 20
SENTENCES = "Find the weather in Lisbon and what to pack for a walk there. " * 30
NO_SPACES = "x" * (3 * INSTRUCTION_CHARS)


@pytest.mark.parametrize(
    "task", [ONE_SENTENCE, SENTENCES, NO_SPACES], ids=["one-sentence", "sentences", "no-spaces"]
)
@pytest.mark.parametrize("max_subtasks", [1, 3, 10])
async def test_a_message_over_an_instructions_cap_is_planned_within_the_schema(
    task: str, max_subtasks: int
) -> None:
    entries = [CatalogEntry(role="researcher", description="Finds facts about cities.")]
    schema = plan_type(("researcher",), max_subtasks)
    request = ModelRequest(
        messages=(
            SystemMessage(content=PLANNER_INSTRUCTIONS),
            UserMessage(content=planner_task(task, entries, max_subtasks=max_subtasks)),
        ),
        output=OutputSchema.for_model(schema),
    )
    response = await OfflineModel(latency=0).complete(request)
    plan = schema.model_validate_json(response.message.content or "")
    assert all(0 < len(s.instruction) <= INSTRUCTION_CHARS for s in plan.subtasks)
    first = plan.subtasks[0].instruction
    assert first[:20].lower() == task[:20].lower()  # it says what the message said


async def test_a_run_of_a_long_message_ends_with_an_answer() -> None:
    result = await Executor(ROLES, OfflineModel(latency=0)).run(ONE_SENTENCE.strip())
    assert result.status == "ok"
    assert isinstance(result.plan, Plan)
    assert len(result.plan.subtasks[0].instruction) <= INSTRUCTION_CHARS


def test_a_long_sentence_asking_for_more_is_followed_up_within_the_cap() -> None:
    # A lead planning a later round follows up a result's sentence that asks for more.
    asking = "the range of the colony needs more study " + "and its forage " * 100
    results = [ResultEntry(id="r1", role="researcher", ok=True, text=f"Bees dance. {asking}.")]
    text = follow_up_task("Task: t", results, round=2, rounds=3, room=2, ids=("s2", "s3"))
    [added] = follow_up_for(text, ("s2", "s3")).subtasks
    assert 0 < len(added.instruction) <= INSTRUCTION_CHARS
    assert added.instruction.startswith("Follow up on r1: the range of the colony")
    plan_type(("researcher",), 2, 0, ("r1",)).model_validate(  # as a lead's schema takes it
        {"subtasks": [{"id": "s2", "role": "researcher", "instruction": added.instruction}]}
    )
