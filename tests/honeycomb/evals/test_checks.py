"""Every kind of check of a cases file passes on a run that meets it and fails on one
that does not, saying why; checks in Python are plain callables."""

from __future__ import annotations

import asyncio
import json
import math
import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from honeycomb.errors import ConfigErrors
from honeycomb.evals import Case, CaseRun, Check, Judges, Score, evaluate, load_cases
from honeycomb.evals.checks import CHECK_TIMEOUT_S, built_check, verdict
from honeycomb.evals.spec import CheckSpec
from honeycomb.hive import load_hive
from honeycomb.offline import OfflineModel
from honeycomb.offline.rules import PREFIX
from honeycomb.testing import FunctionModel
from runtime import ModelRequest, Usage
from tests.support.evals import shown_run, tiny_hive, write, writer

CALLS = [
    {
        "worker": "s1",
        "role": "meteorologist",
        "tool": "get_weather",
        "arguments": {"city": "Lisbon", "day": "sat"},
    },
    {
        "worker": "s1",
        "role": "meteorologist",
        "tool": "get_weather",
        "arguments": {"city": "Porto", "day": "sat"},
    },
    {"worker": "s2", "role": "courier", "tool": "send", "arguments": {}, "side_effects": True},
]

# (the check as a cases file writes it, a run it passes, a run it fails, the reason)
KINDS: dict[str, tuple[str, dict[str, Any], dict[str, Any], str]] = {
    "equals": ("equals: 42", {"answer": " 42\n"}, {"answer": "41"}, "the answer is '41', not 42"),
    "equals expected": ("equals: null", {"answer": "yes"}, {"answer": "no"}, "not 'yes'"),
    "contains": (
        "contains: Lisbon",
        {"answer": "to Lisbon"},
        {"answer": "to Porto"},
        "lacks 'Lisbon'",
    ),
    "contains all": ("contains: [a1, b2]", {"answer": "a1 b2"}, {"answer": "a1"}, "lacks 'b2'"),
    "contains any": (
        "contains: {any: [a1, b2]}",
        {"answer": "b2"},
        {"answer": "c3"},
        "none of 'a1', 'b2'",
    ),
    "icontains": ("icontains: LISBON", {"answer": "lisbon"}, {"answer": "porto"}, "lacks 'LISBON'"),
    "not_contains": (
        "not_contains: [sorry, cannot]",
        {"answer": "ok"},
        {"answer": "sorry"},
        "holds 'sorry'",
    ),
    "regex": (
        "regex: '\\d+ euros'",
        {"answer": "361 euros"},
        {"answer": "many euros"},
        "no match for /\\d+ euros/",
    ),
    "json": ("json: true", {"answer": '{"a": 1}'}, {"answer": "{a: 1}"}, "the answer is not JSON"),
    "json schema": (
        "json: {schema: {type: object, required: [total], properties: {total: {type: number}}}}",
        {"answer": '{"total": 3}'},
        {"answer": '{"total": "3"}'},
        "total: '3' is not of type 'number'",
    ),
    "status": (
        "status: [ok, partial]",
        {"status": "partial"},
        {"status": "failed", "error": "boom"},
        "the run ended failed, not ok or partial (boom)",
    ),
    "tool_called": (
        "tool_called: {name: get_weather, args: {city: Lisbon}, role: meteorologist}",
        {"tool_calls": CALLS},
        {"tool_calls": CALLS[1:]},
        "called 0 times, wanted at least 1; the run called: get_weather, send",
    ),
    "tool_called at most": (
        "tool_called: {name: get_weather, at_least: 0, at_most: 1}",
        {"tool_calls": CALLS[1:]},
        {"tool_calls": CALLS},
        "called 2 times, wanted at least 0, at most 1",
    ),
    "tool_called once": (
        "tool_called: {name: get_weather, at_least: 2}",
        {"tool_calls": CALLS},
        {"tool_calls": CALLS[1:]},
        "called 1 time, wanted at least 2; the run called: get_weather, send",
    ),
    "side_effects": (
        "side_effects: 1",
        {"tool_calls": CALLS},
        {"tool_calls": CALLS[:2]},
        "0 side-effecting calls, wanted exactly 1",
    ),
    "side_effects at most": (
        "side_effects: {at_most: 0}",
        {},
        {"tool_calls": CALLS},
        "1 side-effecting call, wanted at most 0",
    ),
    "cost": (
        "cost: 0.01",
        {"usage": Usage(cost=0.005)},
        {"usage": Usage(cost=0.02)},
        "cost $0.0200, above 0.01",
    ),
    "tokens": (
        "tokens: {at_most: 100}",
        {"usage": Usage(input_tokens=60)},
        {"usage": Usage(input_tokens=60, output_tokens=60)},
        "120 tokens, above 100",
    ),
    "model_calls": (
        "model_calls: {at_least: 2, at_most: 5}",
        {"usage": Usage(model_calls=2)},
        {"usage": Usage(model_calls=1)},
        "1 model call, below 2",
    ),
    "latency": ("latency: 1.5", {"wall_s": 1.0}, {"wall_s": 2.0}, "wall time 2.00s, above 1.5"),
    "latency critical path": (
        "latency: {at_most: 1, of: critical_path}",
        {"wall_s": 9, "critical_path_s": 0.5},
        {"critical_path_s": 1.25},
        "critical path 1.25s, above 1",
    ),
    "python": (
        "python: checks:short",
        {"answer": "hi"},
        {"answer": "hello there"},
        "too long: 11 characters",
    ),
    "python score": (
        "{python: 'checks:share', threshold: 0.5}",
        {"answer": "aab"},
        {"answer": "abb"},
        "score 0.33 is below its threshold 0.50",
    ),
}

CHECKS = """
def short(answer, run):
    return None if len(answer) < 5 else f"too long: {len(answer)} characters"


def share(answer, run):
    return answer.count("a") / len(answer)
"""


def _check(folder: Path, written: str) -> Check:
    write(folder, "checks.py", CHECKS)
    path = write(
        folder,
        "evals.yaml",
        f"""
        cases:
          - task: the task
            expected: "yes"
            assert:
              - {written}
        """,
    )
    (case,) = load_cases(path).cases
    (check,) = case.checks
    assert isinstance(check, Check)
    return check


@pytest.mark.parametrize("kind", list(KINDS))
async def test_each_kind_passes_on_a_run_that_meets_it_and_fails_saying_why(
    tmp_path: Path, kind: str
) -> None:
    written, good, bad, reason = KINDS[kind]
    check = _check(tmp_path, written)
    passed = await verdict(check, shown_run(**good))
    assert (passed.passed, passed.reason) == (True, None), passed
    failed = await verdict(check, shown_run(**bad))
    assert not failed.passed
    assert reason in (failed.reason or ""), failed.reason


@pytest.mark.parametrize(
    ("written", "name"),
    [
        ("side_effects: 1", "side_effects exactly 1"),
        ("side_effects: {at_most: 0}", "side_effects at most 0"),
        ("model_calls: {at_least: 2, at_most: 5}", "model_calls at least 2, at most 5"),
        ("latency: {at_most: 1, of: critical_path}", "latency at most 1 of critical_path"),
        ("cost: 0.01", "cost at most 0.01"),
        ("judge: {role: writer, rubric: It greets.}", "judge writer 'It greets.'"),
        ("tool_called: get_weather", "tool_called get_weather"),
        (
            "tool_called: {name: send, role: writer, args: {to: bob}, at_most: 1}",
            "tool_called send by writer with to='bob', exactly 1",
        ),
        ("tool_called: {name: send, at_most: 0}", "tool_called send, never"),
    ],
)
def test_a_check_is_named_by_what_it_allows(tmp_path: Path, written: str, name: str) -> None:
    # Not by its fields as JSON: 'side_effects {"at_least": 1, "at_most": 1}', 'judge
    # {"role": "writer", "rubric": "It greets."}', 'tool_called name 'get_weather''.
    assert _check(tmp_path, written).name == name


@pytest.mark.parametrize(
    ("written", "answer", "passed"),
    [
        ("equals: {total: 3}", '{"total": 3}', True),  # the answer's JSON, not Python's repr
        ("equals: {total: 3}", '{"total": 3.0, "more": 1}', False),
        ("equals: true", "true", True),
        ("equals: true", "1", False),  # JSON's true is not 1
        ("equals: 3", " 3.0 ", True),
        ("equals: 240", "240 euros", False),
        ("equals: [a, b]", '["a", "b"]', True),
    ],
)
async def test_equals_a_value_compares_it_with_the_answers_json(
    tmp_path: Path, written: str, answer: str, passed: bool
) -> None:
    found = await verdict(_check(tmp_path, written), shown_run(answer))
    assert found.passed is passed, found.reason


async def test_tool_called_args_compare_as_json_values(tmp_path: Path) -> None:
    def sent(**arguments: Any) -> dict[str, Any]:
        return {
            "tool_calls": [{"worker": "s", "role": "r", "tool": "send", "arguments": arguments}]
        }

    check = _check(tmp_path, "tool_called: {name: send, args: {urgent: true, copies: 2}}")
    assert (await verdict(check, shown_run(**sent(urgent=True, copies=2.0)))).passed
    refused = await verdict(check, shown_run(**sent(urgent=1, copies=2)))  # 1 is not true
    assert not refused.passed
    # Which calls it counts is said by its name, shown before it: not said twice.
    assert check.name == "tool_called send with urgent=True, copies=2"
    assert refused.reason == "called 0 times, wanted at least 1; the run called: send"


async def test_equals_a_value_that_fails_shows_it_as_json(tmp_path: Path) -> None:
    found = await verdict(_check(tmp_path, "equals: {total: 3, ok: true}"), shown_run("{}"))
    assert found.reason == """the answer is '{}', not {"total": 3, "ok": true}"""


class Trip(BaseModel):
    total: float
    cities: list[str]


async def test_json_against_the_hives_output_schema() -> None:
    spec = CheckSpec.model_validate({"json": "output_schema"})
    made = built_check(spec, expected=None, output_schema=Trip, python=None)
    good = await verdict(made, shown_run(json.dumps({"total": 3, "cities": ["Lisbon"]})))
    assert good.passed
    bad = await verdict(made, shown_run(json.dumps({"total": "lots"})))
    assert not bad.passed
    assert bad.reason is not None
    assert "does not match Trip" in bad.reason
    assert "total" in bad.reason
    assert made.name == "json schema 'output_schema'"


async def test_a_judge_grades_by_its_rubric_and_its_cost_is_its_own(tmp_path: Path) -> None:
    def grade(request: ModelRequest) -> str:
        shown = str(request.messages[-1].content)
        assert "Rubric: names a city" in shown
        return "PASS" if "Lisbon" in shown else "It names no city."

    hive = load_hive(tiny_hive(tmp_path))
    model = FunctionModel(grade)
    judges = Judges(hive.roles, lambda role: model)
    check = _check(tmp_path, "judge: {role: writer, rubric: names a city}")
    first = judges.fresh()
    assert (await verdict(check, shown_run("to Lisbon", judges=first))).passed
    failed = await verdict(check, shown_run("nowhere", judges=first))
    assert failed.reason == "writer: It names no city."
    assert first.spent.model_calls == 2
    assert judges.fresh().spent == Usage()


class Scalar:
    """A value of an array library, as numpy's ``bool_`` or ``float32`` is: Python's
    own by its ``item()``."""

    def __init__(self, value: object) -> None:
        self.value = value

    def item(self) -> object:
        return self.value


@pytest.mark.parametrize(
    ("returned", "passed", "reason"),
    [
        (Scalar(True), True, None),  # np.float64(0.9) > 0.8
        (Scalar(False), False, "the check returned False"),
        (Scalar(0.5), False, "score 0.50 is below its threshold 1.00"),
        ((Scalar(0.5), "vague"), False, "vague"),
        (Scalar("text"), False, "the check raised TypeError: a check returns a bool, a score, "
         "a reason, None or (score, reason), not Scalar"),
    ],
)  # fmt: skip
async def test_a_scalar_of_an_array_library_is_taken_as_pythons(
    returned: object, passed: bool, reason: str | None
) -> None:
    found = await verdict(Check(name="mine", fn=lambda answer, run: returned), shown_run("a"))
    assert (found.passed, found.reason) == (passed, reason)


@pytest.mark.parametrize(
    ("returned", "passed", "reason"),
    [
        (True, True, None),
        (False, False, "the check returned False"),
        (None, True, None),
        ("", True, None),
        ("it rambles", False, "it rambles"),
        (0.75, False, "score 0.75 is below its threshold 1.00"),
        ((0.2, "too vague"), False, "too vague"),
        (Score(score=1.0), True, None),
    ],
)
async def test_a_plain_callable_returns_a_bool_a_score_or_a_reason(
    returned: object, passed: bool, reason: str | None
) -> None:
    found = await verdict(Check(name="mine", fn=lambda answer, run: returned), shown_run("a"))
    assert (found.passed, found.reason) == (passed, reason)


async def test_an_async_check_is_awaited_and_a_check_that_raises_fails_with_its_error() -> None:
    async def later(answer: str, run: object) -> bool:
        return answer == "a"

    def broken(answer: str, run: object) -> bool:
        raise KeyError("total")

    assert (await verdict(Check(name="later", fn=later), shown_run("a"))).passed
    found = await verdict(Check(name="broken", fn=broken), shown_run("a"))
    assert found.reason == "the check raised KeyError: 'total'"


async def test_a_check_that_calls_pytest_fail_fails_with_its_message_and_the_eval_goes_on() -> None:
    def polite(answer: str, run: CaseRun) -> None:
        if "hello" not in answer:
            pytest.fail(f"not polite: {answer!r}")  # Failed: a BaseException, no Exception

    found = await verdict(Check(name="polite", fn=polite), shown_run("go away"))
    assert (found.passed, found.reason) == (False, "the check raised Failed: not polite: 'go away'")
    cases = [
        Case(id="rude", task="Be rude.", checks=[polite]),
        Case(id="kind", task="Be kind.", checks=[lambda answer, run: True]),
    ]
    report = await evaluate(writer("go away"), cases)
    assert [(c.id, c.passed) for c in report.cases] == [("rude", False), ("kind", True)]
    assert report.cases[0].why.startswith("polite: the check raised Failed: not polite: ")


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit])
def test_ctrl_c_or_an_exit_in_a_check_stops_the_eval(stop: type[BaseException]) -> None:
    def stops(answer: str, run: CaseRun) -> None:
        raise stop()

    case = Case(id="stops", task="Say it.", checks=[stops])
    with pytest.raises(stop):
        asyncio.run(evaluate(writer("it"), [case]))


async def test_a_check_cancelled_is_cancelled_not_failed() -> None:
    async def cancelled(answer: str, run: CaseRun) -> None:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await verdict(Check(name="cancelled", fn=cancelled), shown_run("a"))


async def test_a_check_past_its_time_limit_fails_naming_itself_and_its_case() -> None:
    release = threading.Event()

    def loops(answer: str, run: CaseRun) -> bool:
        while not release.is_set():  # a sync check that never returns: in its own thread
            pass
        return True

    async def waits(answer: str, run: CaseRun) -> bool:
        await asyncio.Event().wait()  # an async one: cancelled
        return True

    cases = [
        Case(id="looped", task="Say it.", checks=[Check(name="loops", fn=loops, timeout_s=0.2)]),
        Case(id="waited", task="Say it.", checks=[Check(name="waits", fn=waits, timeout_s=0.2)]),
        Case(id="fine", task="Say it.", checks=[lambda answer, run: True]),
    ]
    try:
        report = await evaluate(writer("it"), cases)
    finally:
        release.set()
    assert [(c.id, c.passed) for c in report.cases] == [
        ("looped", False),
        ("waited", False),
        ("fine", True),
    ]
    assert [c.why for c in report.cases] == [
        "loops: the check loops took longer than its time limit of 0.2s on case 'looped' "
        "(its thread cannot be stopped)",
        "waits: the check waits took longer than its time limit of 0.2s on case 'waited' "
        "(it was cancelled)",
        "",
    ]


async def test_a_check_that_gives_no_score_fails_whatever_its_threshold() -> None:
    def broken(answer: str, run: CaseRun) -> float:
        raise ZeroDivisionError("division by zero")

    async def waits(answer: str, run: CaseRun) -> float:
        await asyncio.Event().wait()
        return 1.0

    # A threshold of 0: its score counts in its case's, it never fails on a low one.
    for check, reason in (
        (Check(name="metric", fn=broken, threshold=0.0), "the check raised ZeroDivisionError"),
        (Check(name="metric", fn=waits, threshold=0.0, timeout_s=0.05), "the check metric took"),
        (Check(name="metric", fn=lambda a, r: math.nan, threshold=0.0), "the check's score is NaN"),
    ):
        found = await verdict(check, shown_run("a"))
        assert (found.passed, found.score) == (False, 0.0)
        assert (found.reason or "").startswith(reason)
    scored = await verdict(Check(name="low", fn=lambda a, r: 0.1, threshold=0.0), shown_run("a"))
    assert (scored.passed, scored.reason) == (True, None)


async def test_a_checks_own_timeout_error_is_its_error_not_its_limit() -> None:
    def times_out(answer: str, run: CaseRun) -> bool:
        raise TimeoutError("the metric's server did not answer")

    found = await verdict(Check(name="metric", fn=times_out), shown_run("a"))
    assert found.reason == "the check raised TimeoutError: the metric's server did not answer"


def test_a_cases_file_gives_python_and_judge_checks_their_time_limit(tmp_path: Path) -> None:
    write(tmp_path, "mine.py", "def fine(answer, run):\n    return True\n")
    path = write(
        tmp_path,
        "evals.yaml",
        """
        cases:
          - task: Say it.
            assert:
              - python: mine:fine
              - python: mine:fine
                timeout: 300
              - judge: {role: writer, rubric: it says it}
              - judge: {role: writer, rubric: it says it}
                timeout: 30
              - contains: it
        """,
    )
    (case,) = load_cases(path).cases
    limits = [c.timeout_s for c in case.checks if isinstance(c, Check)]
    assert limits == [CHECK_TIMEOUT_S, 300, None, 30, None]
    write(
        tmp_path,
        "evals.yaml",
        """
        cases:
          - task: Say it.
            assert:
              - contains: it
                timeout: 5
              - python: mine:fine
                timeout: 0
        """,
    )
    with pytest.raises(ConfigErrors) as caught:
        load_cases(path)
    assert [str(e) for e in caught.value.errors] == [
        f"{path}:5:9: cases[0].assert[0].timeout: a time limit is for python and judge "
        "checks: the other kinds return at once",
        f"{path}:7:9: cases[0].assert[1].timeout: Input should be greater than 0 (got 0)",
    ]


async def test_the_offline_judge_fails_an_empty_answer_and_passes_one_that_is_not(
    tmp_path: Path,
) -> None:
    hive = load_hive(tiny_hive(tmp_path))
    offline = OfflineModel(latency=0)
    judges = Judges(hive.roles, lambda role: offline)
    check = _check(tmp_path, "judge: {role: writer, rubric: names a city}")
    assert (await verdict(check, shown_run("Lisbon", judges=judges.fresh()))).passed
    for empty in ("", " \n"):
        found = await verdict(check, shown_run(empty, judges=judges.fresh()))
        assert found.reason == (
            f"writer: {PREFIX}There is nothing to judge: the answer I was shown is empty."
        )


def test_equals_with_no_value_on_a_case_with_no_expected_answer_is_refused(
    tmp_path: Path,
) -> None:
    path = write(
        tmp_path,
        "evals.yaml",
        """
        cases:
          - id: given
            task: Say 42
            expected: "42"
            assert:
              - equals: null
          - id: none
            task: Say 42
            assert:
              - equals: null
        """,
    )
    with pytest.raises(ConfigErrors) as caught:
        load_cases(path)
    assert [str(e) for e in caught.value.errors] == [
        f"{path}:10:9: cases[1].assert[0].equals: equals with no value compares with the "
        "case's expected answer, and the case gives none: write the value, or give the case "
        "expected:"
    ]
