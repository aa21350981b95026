"""Evals where they meet the other features: secrets in a case, a cassette that no
longer matches a worker's request, a run cut off mid-eval, a store of either kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb import Executor, Role, add_secret
from honeycomb.evals import Case, CaseRun, EvalBudget, assert_case, evaluate, junit
from honeycomb.testing import FunctionModel
from runtime import ModelRequest
from runtime.models.layers.cassette import cassette
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


async def test_a_workers_request_the_cassette_did_not_record_is_the_cases_reason(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "calls.jsonl"

    def writer(instructions: str, **mode: Path) -> Executor:
        return Executor(
            [Role(name="writer", instructions=instructions)],
            models=cassette({"m": FunctionModel(lambda request: "done")}, **mode),
            aggregator="concat",
            planner=lambda task: [("writer", task)],
        )

    case = Case(id="hello", task="Say hello.")
    assert (await evaluate(writer("Be brief.", record=tape), [case])).passed
    assert (await evaluate(writer("Be brief.", replay=tape), [case])).passed
    # The worker's instructions changed: its request is not the one recorded. The
    # run fails (its only subtask did), and the case says why: the mismatch.
    report = await evaluate(writer("Be long.", replay=tape), [case])
    (attempt,) = report.cases[0].attempts
    assert attempt.status == "failed"
    assert attempt.error is not None
    assert attempt.error.startswith("its only subtask failed")
    assert "(s1: " in attempt.error
    assert "that the cassette did not record" in attempt.error
    assert "case 'hello'" in attempt.error
    assert "that the cassette did not record" in report.cases[0].why


async def test_what_a_run_that_raised_spent_counts_in_its_case_and_the_evals_budget() -> None:
    def answer(request: ModelRequest) -> str:
        return "no plan at all"  # the planner's answers are no plan: PlanError

    executor = Executor([Role(name="planner"), Role(name="writer")], FunctionModel(answer))
    cases = [Case(id=f"c{n}", task=f"Plan {n}.") for n in range(3)]
    report = await evaluate(executor, cases, concurrency=1, budget=EvalBudget(model_calls=2))
    # The first case's planner asked three times before the run raised: the eval's
    # budget of two calls is spent, and the other cases never start.
    (case,) = report.cases
    (attempt,) = case.attempts
    assert attempt.status == "error"
    assert attempt.model_calls == 3
    assert attempt.tokens > 0
    assert attempt.latency_s > 0
    assert report.not_run == ("c1", "c2")
    assert report.totals()["model_calls"] == 3
