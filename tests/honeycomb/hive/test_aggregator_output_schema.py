"""A hive's aggregator role with an ``output_schema`` answers in it, with instructions
of its own or Honeycomb's."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb import Executor
from honeycomb.testing import FunctionModel
from runtime import ModelRequest
from tests.support.hives import hive
from tests.support.role_tools import Summary

HIVE = """\
models: {default: offline}
roles:
  researcher: {description: Researches.}
  aggregator:
    description: Merges.
    output_schema: tests.support.role_tools:Summary
"""


@pytest.mark.parametrize("instructions", ["", "    instructions: Merge the findings.\n"])
async def test_a_hives_aggregator_answers_in_its_output_schema(
    tmp_path: Path, instructions: str
) -> None:
    # Without instructions of its own, the aggregator's schema was dropped: its model
    # was asked for text, and the answer was the text it wrote.
    asked: list[str | None] = []

    def answer(request: ModelRequest) -> str:
        asked.append(request.output.name if request.output is not None else None)
        if request.output is None:
            return "bees dance"
        return Summary(title="Bees", points=["they dance"]).model_dump_json()

    path = hive(tmp_path, HIVE + instructions)
    executor = Executor.from_yaml(path, model=FunctionModel(answer))
    result = await executor.run("Research bees.", subtasks=[("researcher", "bees")])
    assert asked == [None, "Summary"]  # the researcher's call, then the aggregator's
    assert result.answer == Summary(title="Bees", points=["they dance"])


async def test_an_ended_runs_answer_in_its_aggregators_schema_is_read_back_as_one(
    tmp_path: Path,
) -> None:
    """The run's answer, an object of its aggregator role's schema, read back from the
    store (the run of its id called again) was the dict it is kept as: the Executor has
    no output_type, and only that was made an object again."""

    def answer(request: ModelRequest) -> str:
        if request.output is None:
            return "bees dance"
        return Summary(title="Bees", points=["they dance"]).model_dump_json()

    path = hive(tmp_path, HIVE)
    executor = Executor.from_yaml(path, model=FunctionModel(answer), store=tmp_path / "runs.db")
    plan = [("researcher", "bees")]
    first = await executor.run("Research bees.", subtasks=plan, run_id="b1")
    again = await executor.run("Research bees.", subtasks=plan, run_id="b1")
    assert first.answer == again.answer == Summary(title="Bees", points=["they dance"])
