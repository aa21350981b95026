"""Evals where they meet the other features, from the outside: what a run says, in
the reports that show it (JUnit, HTML, the terminal's table)."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from pathlib import Path

from honeycomb import Executor, Role
from honeycomb.cli.eval_view import print_comparison
from honeycomb.evals import (
    Case,
    CaseRun,
    EvalBudget,
    EvalReport,
    Score,
    compare,
    evaluate,
    junit,
)
from honeycomb.evals.checks import REASON_CHARS, built_check
from honeycomb.evals.compare import over, run_over
from honeycomb.evals.html import report_page
from honeycomb.evals.spec import CheckSpec
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from runtime import Price, PricedModel
from tests.support.evals import writer

RAW = "a <b>&\"' ]]> \x00 NUL, \x1b[2J a terminal's escape, \x07 a bell"
"""An answer a model or a tool may well give: markup, and characters no XML can hold."""


def _quotes_the_answer(answer: str, run: CaseRun) -> str:
    return f"it said {answer!s}"  # a check's reason that quotes the answer as it is


async def test_junit_and_html_of_an_answer_with_control_characters_are_well_formed() -> None:
    case = Case(id="odd <1>", task="Say something odd.", checks=[_quotes_the_answer])
    report = await evaluate(writer(RAW), [case])

    suite = ET.fromstring(junit(report).encode())  # one NUL made it no XML at all
    (failure,) = suite.iter("failure")
    assert "a <b>&\"' ]]>" in failure.attrib["message"]
    assert "\ufffd NUL" in failure.attrib["message"]
    assert "\x1b" not in (failure.text or "")
    assert [c.attrib["name"] for c in suite.iter("testcase")] == ["odd <1>"]

    page = report_page(report)
    assert not {"\x00", "\x1b", "\x07"} & set(page)
    assert "a &lt;b&gt;&amp;&quot;&#x27; ]]&gt; \ufffd NUL" in page


async def test_a_lone_surrogate_in_one_cases_answer_takes_no_report_down(tmp_path: Path) -> None:
    # What Python makes of a file name that is not UTF-8, as a tool may answer with it.
    store = RunStore(tmp_path / "runs.db")
    executor = writer("found report-\udcff.txt", store=store)
    cases = [
        Case(id="files", task="List the files.", checks=[_quotes_the_answer]),
        Case(id="other", task="Say something."),
    ]
    async with executor:
        report = await evaluate(executor, cases)  # kept in the store, as JSON
        kept = store.eval_report(report.eval_id)
    assert [c.attempts[0].status for c in report.cases] == ["ok", "ok"]
    assert kept is not None
    back = EvalReport.from_json(kept)
    assert "report-\ufffd.txt" in (back.cases[0].attempts[0].verdicts[0].reason or "")
    assert b"report-\xef\xbf\xbd.txt" in report.to_json()
    assert "report-\ufffd.txt" in junit(report)


async def test_junit_of_a_replay_that_no_longer_matches_gives_the_difference_in_full(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "calls.jsonl"
    # What a cases file's defaults give every case: a status check.
    status = built_check(
        CheckSpec.model_validate({"status": "ok"}), expected=None, output_schema=None, python=None
    )
    case = Case(id="hello", task="Say hello.", checks=[status])
    assert (await evaluate(writer(instructions="Be brief.", record=tape), [case])).passed
    report = await evaluate(
        writer(instructions="Be brief, and name the city.", replay=tape), [case]
    )
    (attempt,) = report.cases[0].attempts
    assert attempt.status == "failed"
    difference = "content: at character"  # the end of the mismatch's long message
    assert difference in (attempt.error or "")
    (failure,) = ET.fromstring(junit(report).encode()).iter("failure")
    # How the run ended comes first: its checks had no answer to score.
    said = "the run ended failed, with no answer: its only subtask failed; nothing to aggregate"
    assert failure.attrib["message"].startswith(said)
    assert "status 'ok': the run ended failed, not ok" in (failure.text or "")
    assert difference in (failure.text or "")
    assert "record it again if the change is meant" in (failure.text or "")


async def test_a_check_that_scores_nan_fails_and_its_eval_is_a_baseline_still(
    tmp_path: Path,
) -> None:
    def similarity(answer: str, run: CaseRun) -> float:
        return float("nan")  # a metric's 0/0: an empty answer against an empty reference

    store = RunStore(tmp_path / "runs.db")
    cases = [
        Case(id="similar", task="Say it again.", checks=[similarity]),
        Case(id="other", task="Say something."),
    ]
    async with writer(store=store) as executor:
        before = await evaluate(executor, cases)
        after = await evaluate(executor, cases)
        kept = store.eval_report(before.eval_id)
    (verdict,) = before.cases[0].attempts[0].verdicts
    assert (verdict.passed, verdict.score) == (False, 0.0)
    assert verdict.reason == "the check's score is NaN, not a number"
    assert [c.passed for c in before.cases] == [False, True]
    # Kept as JSON, which has no NaN: read back for --baseline, eval compare, serve.
    baseline = EvalReport.from_json(kept or "")
    assert [c.change for c in compare(baseline, after).cases] == ["failing", "passing"]


def _writer_at_a_dollar_a_token() -> Executor:
    """A hive of one writer who says hello, on a model at a dollar a token."""
    price = Price(input_per_mtok=1_000_000.0, output_per_mtok=0.0)
    model = PricedModel(FunctionModel(lambda request: "hello"), price)
    return Executor(
        [Role(name="writer")],
        model,
        aggregator="concat",
        planner=lambda task: [("writer", task)],
    )


async def test_evals_of_different_cases_compare_their_totals_over_the_cases_in_both() -> None:
    executor = _writer_at_a_dollar_a_token()
    greets = [Case(id="greet", task="Say hello.")]
    fails = [Case(id="fails", task="Say hello.", checks=[lambda answer, run: False])]
    every = await evaluate(executor, greets + fails)
    some = await evaluate(executor, greets)  # as --case greet runs it
    assert (every.pass_rate, some.pass_rate) == (0.5, 1.0)
    comparison = compare(every, some)
    assert [(c.id, c.change) for c in comparison.cases] == [
        ("greet", "passing"),
        ("fails", "removed"),
    ]
    # Nothing changed of the case both ran: no better pass rate, nor a cheaper eval.
    assert (comparison.compared, comparison.pass_rate, comparison.cost) == (1, 0.0, 0.0)
    shown = io.StringIO()
    print_comparison(shown, comparison)
    assert "1 unchanged · over the 1 case in both: pass rate +0%" in shown.getvalue()
    assert "over the 1 case in both: pass rate +0%" in report_page(some, comparison)
    same = compare(every, every)
    assert (same.compared, same.pass_rate) == (2, 0.0)
    assert over(same) == ""


async def test_cases_an_evals_budget_left_unrun_are_no_saving_against_a_baseline() -> None:
    executor = _writer_at_a_dollar_a_token()
    cases = [Case(id=f"c{n}", task="Say hello.") for n in range(4)]
    every = await evaluate(executor, cases, concurrency=1)
    cut = await evaluate(executor, cases, concurrency=1, budget=EvalBudget(cost=every.cost / 2))
    assert cut.not_run == ("c2", "c3")
    comparison = compare(every, cut)
    assert (comparison.compared, comparison.ran, comparison.pass_rate) == (4, 2, -0.5)
    assert comparison.cost == 0.0  # the two cases both ran cost the same: nothing saved
    shown = io.StringIO()
    print_comparison(shown, comparison)
    said = " ".join(shown.getvalue().split())  # the totals' line as one, wrapped or not
    assert "pass rate -50% · over the 2 cases run in both: cost +$0.0000" in said
    assert "over the 2 cases run in both: cost +$0.0000" in report_page(cut, comparison)
    assert run_over(compare(every, every)) == ""


async def test_more_runs_of_a_case_or_fewer_made_are_no_change_of_its_cost() -> None:
    executor = _writer_at_a_dollar_a_token()
    cases = [Case(id=f"c{n}", task="Say hello.") for n in range(2)]
    once = await evaluate(executor, cases)
    twice = await evaluate(executor, cases, repeat=2)
    # Its budget covers three runs of the four: c1 has one of its two made.
    cut = await evaluate(
        executor, cases, repeat=2, concurrency=1, budget=EvalBudget(cost=once.cost * 1.5)
    )
    assert cut.unmade == ["c1 (1 of 2 runs made)"]
    for before, after in ((once, twice), (twice, cut)):
        comparison = compare(before, after)
        assert comparison.cost == 0.0  # what a run of each costs, as before
        assert [c.cost for c in comparison.cases] == [0.0, 0.0]
    shown = io.StringIO()
    print_comparison(shown, compare(once, twice))
    assert "cost +$0.0000" in shown.getvalue()


async def test_a_check_that_quotes_a_huge_answer_keeps_its_report_small(tmp_path: Path) -> None:
    huge = "word " * 200_000  # a megabyte: a concatenation of many workers' answers, say
    store = RunStore(tmp_path / "runs.db")
    cases = [Case(id=f"c{n}", task="Say it all.", checks=[_quotes_the_answer]) for n in range(3)]
    async with writer(huge, store=store) as executor:
        report = await evaluate(executor, cases)
        kept = store.eval_report(report.eval_id)
    said = f"it said ## s1 (writer)\n{huge.strip()}"  # the concat aggregator's answer
    for case in report.cases:
        (verdict,) = case.attempts[0].verdicts
        assert verdict.reason == (
            f"{said[:REASON_CHARS]}… ({len(said) - REASON_CHARS} more characters)"
        )
    # Each run keeps its answer; the report keeps what each check said of it, cut.
    assert len(kept or "") < 10 * REASON_CHARS
    assert len(junit(report)) < 10 * REASON_CHARS
    assert len(report_page(report)) < 10 * REASON_CHARS + 10_000


class Float64(float):
    """A float of its own type, as numpy's ``float64`` is (a metric's score)."""


async def test_a_score_a_check_makes_of_a_numpy_float_is_kept_with_its_report(
    tmp_path: Path,
) -> None:
    def similarity(answer: str, run: CaseRun) -> Score:
        return Score(score=Float64(0.25), reason=Float64(0.25))  # type: ignore[arg-type]

    store = RunStore(tmp_path / "runs.db")
    async with writer(store=store) as executor:
        report = await evaluate(executor, [Case(id="similar", task="Say it.", checks=[similarity])])
        kept = store.eval_report(report.eval_id)
    (verdict,) = report.cases[0].attempts[0].verdicts
    assert (type(verdict.score), verdict.score, verdict.reason) == (float, 0.25, "0.25")
    assert EvalReport.from_json(kept or "") == report
