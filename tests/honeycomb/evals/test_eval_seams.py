"""Evals where they meet the other features: secrets in a case, a cassette that no
longer matches a worker's request, a run cut off mid-eval, a store of either kind."""

from __future__ import annotations

import pytest

from honeycomb import Executor, Role, add_secret
from honeycomb.evals import Case, CaseRun, assert_case, evaluate, junit
from honeycomb.testing import FunctionModel
from runtime.secrets import isolated

SECRET = "hunter2-but-longer"


def _writer(answer: str = "done") -> Executor:
    """One worker that answers ``answer``, its run's answer as it is."""
    return Executor(
        [Role(name="writer")],
        FunctionModel(lambda request: answer),
        aggregator="concat",
        planner=lambda task: [("writer", task)],
    )


async def test_a_secret_in_a_case_is_masked_in_its_report_junit_and_assertion() -> None:
    def quotes_the_task(answer: str, run: CaseRun) -> str:
        return f"it was asked {run.task!r}"  # a check's reason that quotes the task

    told: list[str] = []
    with isolated():
        add_secret(SECRET, "password")
        case = Case(id="login", task=f"Log in with {SECRET}.", checks=[quotes_the_task])
        executor = _writer()
        report = await evaluate(
            executor, [case], on_run=lambda case, attempt, done, total: told.append(repr(attempt))
        )
        with pytest.raises(AssertionError) as raised:
            await assert_case(executor, case)
    shown = [report.to_json().decode(), junit(report), str(raised.value), *told]
    assert all(SECRET not in text for text in shown), shown
    assert "[password hidden]" in report.cases[0].task
    assert "[password hidden]" in str(raised.value)
