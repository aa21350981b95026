"""Evals where they meet a run that ended with no answer (a replay whose request
changed, a final answer the run's guard refused, a budget spent, a call waiting): its
case fails whatever its checks of what a run did not do say, unless a check is about
how it ended (``status: failed``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb import Executor, GuardCheck, Guards, Role
from honeycomb.evals import Case, evaluate
from honeycomb.evals.checks import Check, built_check
from honeycomb.evals.spec import CheckSpec
from honeycomb.testing import FunctionModel
from tests.support.evals import writer


def _check(spec: dict[str, object]) -> Check:
    """The check a cases file's ``assert:`` item makes."""
    return built_check(
        CheckSpec.model_validate(spec), expected=None, output_schema=None, python=None
    )


async def test_a_replay_whose_request_changed_fails_a_case_of_what_it_did_not_do(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "calls.jsonl"
    case = Case(id="hello", task="Say hello.", checks=[_check({"not_contains": "sorry"})])
    assert (await evaluate(writer(instructions="Be brief.", record=tape), [case])).passed
    changed = writer(instructions="Be brief, and name the city.", replay=tape)
    report = await evaluate(changed, [case])
    (attempt,) = report.cases[0].attempts
    assert (attempt.status, attempt.passed, attempt.score) == ("failed", False, 0.0)
    assert not report.passed
    assert "content: at character" in report.cases[0].why  # the mismatch, named
    # A case about such a run passes so.
    about = Case(id="hello", task="Say hello.", checks=[_check({"status": "failed"})])
    assert (await evaluate(changed, [about])).passed


@pytest.mark.parametrize(
    ("checks", "passed"),
    [
        ([{"not_contains": "hunter2"}], False),
        ([{"not_contains": "hunter2"}, {"status": ["ok", "failed"]}], True),
    ],
    ids=["no-status-check", "status-failed"],
)
async def test_a_final_answer_the_runs_guard_refused_fails_its_case_unless_it_asks(
    checks: list[dict[str, object]], passed: bool
) -> None:
    def no_secrets(check: GuardCheck) -> str | None:
        return "it gives the password" if "hunter2" in check.text else None

    executor = Executor(
        [Role(name="writer")],
        FunctionModel(lambda request: "The password is hunter2."),
        aggregator="concat",
        planner=lambda task: [("writer", task)],
        guards=Guards(output=(no_secrets,)),
    )
    case = Case(id="leak", task="Tell the password.", checks=[_check(c) for c in checks])
    report = await evaluate(executor, [case])
    (attempt,) = report.cases[0].attempts
    assert (attempt.status, attempt.passed) == ("failed", passed)
    if not passed:
        assert "it gives the password" in report.cases[0].why
