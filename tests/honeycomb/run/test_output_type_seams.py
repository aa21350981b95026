"""The Executor's ``output_type`` is one rule for every aggregator: the answer is an
object of that type (a role answers in it; a function's or an Aggregator's answer is
validated against it), ``"concat"``, which makes text, refuses it, and a run read
back from a store answers with the type it first answered with."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

from honeycomb import ConfigError, Executor, Role, RunFailed, SubtaskResult
from honeycomb.run import RunContext
from honeycomb.testing import FunctionModel

ROLES = [Role(name="w")]


class Report(BaseModel):
    title: str
    count: int = Field(ge=0)


def worker_model() -> FunctionModel:
    return FunctionModel(lambda request: "found")


def as_dict(task: str, results: Sequence[SubtaskResult]) -> dict[str, Any]:
    return {"title": task, "count": len(results)}


class Counting:
    """An Aggregator of your own, answering with a dict."""

    async def aggregate(
        self, task: str, results: Sequence[SubtaskResult], context: RunContext
    ) -> Any:
        return {"title": task, "count": len(results)}


@pytest.mark.parametrize("aggregator", [None, "concat"])
def test_concat_refuses_an_output_type_when_the_executor_is_made(aggregator: str | None) -> None:
    with pytest.raises(ConfigError) as caught:
        Executor(ROLES, worker_model(), aggregator=aggregator, output_type=Report)
    assert caught.value.field == "output_type"
    assert "'concat'" in str(caught.value)
    assert "makes text, not a Report" in str(caught.value)


@pytest.mark.parametrize("aggregator", [as_dict, Counting()])
async def test_a_function_or_aggregators_answer_is_validated_as_the_output_type(
    aggregator: Any,
) -> None:
    executor = Executor(ROLES, worker_model(), aggregator=aggregator, output_type=Report)
    result = await executor.run("bees", subtasks=[("w", "look")])
    assert result.answer == Report(title="bees", count=1)


async def test_an_answer_that_is_not_a_valid_output_type_fails_the_run() -> None:
    def negative(task: str, results: Sequence[SubtaskResult]) -> dict[str, Any]:
        return {"title": task, "count": -1}

    executor = Executor(ROLES, worker_model(), aggregator=negative, output_type=Report)
    with pytest.raises(RunFailed) as caught:
        await executor.run("bees", subtasks=[("w", "look")])
    assert str(caught.value) == (
        "the aggregator's answer is not a valid Report (the Executor's output_type): "
        "Report.count: Input should be greater than or equal to 0 (got -1)"
    )
    assert caught.value.partial.status == "failed"
    assert caught.value.partial.subtasks["s1"].ok


async def test_a_stored_answer_comes_back_as_the_type_it_was_returned_as(
    tmp_path: Path,
) -> None:
    store = tmp_path / "runs.db"
    executor = Executor(ROLES, worker_model(), aggregator=as_dict, output_type=Report, store=store)
    first = await executor.run("bees", subtasks=[("w", "look")], run_id="r1")
    again = await executor.run("bees", subtasks=[("w", "look")], run_id="r1")
    assert first.answer == again.answer == Report(title="bees", count=1)


async def test_a_stored_answer_made_for_another_type_is_a_config_error(tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    untyped = Executor(ROLES, worker_model(), store=store)
    await untyped.run("bees", subtasks=[("w", "look")], run_id="r1")
    typed = Executor(ROLES, worker_model(), aggregator=as_dict, output_type=Report, store=store)
    with pytest.raises(ConfigError, match="the stored answer is not a valid Report"):
        await typed.run("bees", subtasks=[("w", "look")], run_id="r1")
