"""``evaluate``: the cases run at most N at once, each a run of the store; repeats give
a pass rate and a spread; the eval's budget stops it; the report is kept by its id,
and two reports compare case by case."""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import anyio
import pytest

from honeycomb import (
    AssistantMessage,
    ConfigErrors,
    Executor,
    GuardCheck,
    Guards,
    Policy,
    Role,
    ToolMessage,
    tool,
)
from honeycomb.evals import (
    Case,
    CaseRun,
    EvalBudget,
    EvalReport,
    Judges,
    assert_case,
    evaluate,
    junit,
    load_cases,
)
from honeycomb.evals.compare import compare
from honeycomb.hive import Hive, load_hive
from honeycomb.offline import OfflineModel
from honeycomb.run.events import RunFinished, RunStarted
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel, call
from runtime import Event, Limits, ModelRequest, ModelResponse, Price, PricedModel, Usage
from runtime.models.cassettes import Cassette
from runtime.models.layers.cassette import cassette
from runtime.tools.approvals import ApprovalRequest, Decision
from tests.support.evals import tiny_hive, write
from tests.support.model_requests import Answer


@pytest.fixture
def hive(tmp_path: Path) -> Hive:
    return load_hive(tiny_hive(tmp_path))


def _cases(count: int, *checks: Any) -> list[Case]:
    return [Case(id=f"c{n}", task=f"Say hello to city {n}", checks=checks) for n in range(count)]


async def test_cases_run_in_parallel_but_never_more_than_the_concurrency(hive: Hive) -> None:
    running, most = 0, 0

    def count(event: Event) -> None:
        nonlocal running, most
        if isinstance(event, RunStarted):
            running += 1
            most = max(most, running)
        elif isinstance(event, RunFinished):
            running -= 1

    executor = Executor.from_hive(hive, model=OfflineModel(latency=0.02), on_event=[count])
    report = await evaluate(executor, _cases(12), concurrency=3)
    assert most == 3
    assert [c.id for c in report.cases] == [f"c{n}" for n in range(12)]  # the cases' order
    assert report.passed
    assert report.totals()["runs"] == 12


async def test_a_budget_that_bounds_nothing_lets_the_first_runs_start_together(
    hive: Hive,
) -> None:
    # `honeycomb eval` with no --max-* option gives EvalBudget(): no run waits on it.
    running, most = 0, 0

    def count(event: Event) -> None:
        nonlocal running, most
        if isinstance(event, RunStarted):
            running += 1
            most = max(most, running)
        elif isinstance(event, RunFinished):
            running -= 1

    executor = Executor.from_hive(hive, model=OfflineModel(latency=0.05), on_event=[count])
    report = await evaluate(executor, _cases(4), concurrency=4, budget=EvalBudget())
    assert report.passed
    assert most == 4  # not the first alone, then the other three


async def test_each_case_is_a_run_of_the_store_and_the_report_is_kept_by_its_id(
    hive: Hive, tmp_path: Path
) -> None:
    store = RunStore(tmp_path / "runs.db")
    executor = Executor.from_hive(hive, store=store)
    report = await evaluate(executor, _cases(2), eval_id="ev-1", hive="tiny")
    run_ids = [a.run_id for c in report.cases for a in c.attempts]
    assert len(set(run_ids)) == 2
    for run_id in run_ids:
        found = store.find(run_id)
        assert found is not None
        assert found.status == "ok"
        assert store.spans(run_id)  # its trace, for honeycomb trace and serve
    kept = store.eval_report("ev-1")
    assert kept is not None
    assert EvalReport.from_json(kept) == report
    assert [(e.eval_id, e.passed) for e in store.evals()] == [("ev-1", True)]


async def test_repeats_give_each_case_a_pass_rate_and_flag_the_flaky_ones(hive: Hive) -> None:
    turns = itertools.cycle([True, False])

    def sometimes(answer: str, run: CaseRun) -> bool:
        return next(turns)

    executor = Executor.from_hive(hive)
    report = await evaluate(executor, _cases(1, sometimes), repeat=4, concurrency=1)
    (case,) = report.cases
    assert len({a.run_id for a in case.attempts}) == 4  # a run each
    assert (case.pass_rate, case.flaky, case.spread, case.passed) == (0.5, True, 1.0, False)
    assert report.totals()["flaky"] == 1


async def test_the_evals_budget_stops_new_runs_and_leaves_the_rest_unrun(hive: Hive) -> None:
    executor = Executor.from_hive(hive)
    budget = EvalBudget(model_calls=6)  # a run of the tiny hive makes 3 calls
    report = await evaluate(executor, _cases(5), budget=budget, concurrency=1)
    assert [c.id for c in report.cases] == ["c0", "c1"]
    assert report.not_run == ("c2", "c3", "c4")
    assert report.stopped == "the eval's budget of 6 model calls is spent (6)"
    assert not report.passed
    assert report.pass_rate == 2 / 5


async def test_the_hives_own_budget_bounds_each_case(hive: Hive) -> None:
    policy = hive.policy.model_copy(update={"budgets": Limits(model_calls=2)})
    report = await evaluate(Executor.from_hive(hive, policy=policy), _cases(2))
    for case in report.cases:
        (attempt,) = case.attempts
        assert attempt.status == "over_budget"
        assert attempt.failing is not None
        assert attempt.failing.reason is not None
        assert attempt.failing.reason.startswith("the run ended over_budget")


async def test_a_judges_calls_cost_the_eval_not_the_run(hive: Hive, tmp_path: Path) -> None:
    price = Price(input_per_mtok=1_000_000.0, output_per_mtok=0.0)  # a dollar a token

    def grade(request: ModelRequest) -> str:
        return "PASS"

    judge = PricedModel(FunctionModel(grade), price)
    executor = Executor.from_hive(hive)
    path = write(
        tmp_path,
        "evals.yaml",
        """
        cases:
          - task: Say hello to Lisbon
            assert:
              - judge: {role: writer, rubric: it greets}
        """,
    )
    judges = Judges(executor.roles, lambda role: judge)
    report = await evaluate(executor, load_cases(path, hive), judges=judges)
    (attempt,) = report.cases[0].attempts
    assert attempt.passed
    assert attempt.cost == 0.0  # the offline runs cost nothing
    assert attempt.judge_cost > 0
    assert report.judge_cost == attempt.judge_cost
    assert attempt.model_calls == 3  # the run's own


async def test_the_evals_budget_its_judges_spent_the_last_of_says_so(
    hive: Hive, tmp_path: Path
) -> None:
    # The run made 3 calls, its judge the 4th: "spent (4)" alone did not add up to the
    # run's 3 calls the report shows.
    path = write(
        tmp_path,
        "evals.yaml",
        """
        defaults:
          assert:
            - judge: {role: writer, rubric: it greets}
        cases:
          - {id: lisbon, task: Say hello to Lisbon}
          - {id: oslo, task: Say hello to Oslo}
        """,
    )
    judges = Judges(hive.roles, lambda role: FunctionModel(lambda request: "PASS"))
    cases = load_cases(path, hive)
    budget = EvalBudget(model_calls=4)
    report = await evaluate(
        Executor.from_hive(hive), cases, judges=judges, concurrency=1, budget=budget
    )
    assert report.not_run == ("oslo",)
    assert (
        report.stopped == "the eval's budget of 4 model calls is spent (4, 1 of them by the judges)"
    )


async def test_a_judge_that_gave_no_verdict_counts_what_it_spent_in_the_evals_budget(
    hive: Hive, tmp_path: Path
) -> None:
    price = Price(input_per_mtok=0.0, output_per_mtok=1_000_000.0)  # a dollar a token out

    def cut_off(request: ModelRequest) -> ModelResponse:  # its whole output limit spent
        limit = request.max_output_tokens or 0
        return ModelResponse(
            message=AssistantMessage(content=""),
            usage=Usage(output_tokens=limit),
            model="judge",
            finish_reason="length",
        )

    judge = PricedModel(FunctionModel(cut_off), price)
    path = write(
        tmp_path,
        "evals.yaml",
        """
        defaults:
          assert:
            - judge: {role: writer, rubric: it greets}
        cases:
          - {id: lisbon, task: Say hello to Lisbon}
          - {id: oslo, task: Say hello to Oslo}
        """,
    )
    judges = Judges(hive.roles, lambda role: judge)
    report = await evaluate(
        Executor.from_hive(hive),
        load_cases(path, hive),
        judges=judges,
        concurrency=1,
        budget=EvalBudget(cost=1.0),
    )
    (attempt,) = report.cases[0].attempts
    assert attempt.failing is not None
    assert "gave no verdict" in str(attempt.failing.reason)
    assert (attempt.judge_model_calls, attempt.judge_tokens) == (1, 256)
    assert attempt.judge_cost == pytest.approx(256.0)
    assert report.not_run == ("oslo",)  # what the judge spent spent the eval's budget


async def test_the_judges_hive_of_a_cases_file_grades_in_python_too(
    hive: Hive, tmp_path: Path
) -> None:
    write(
        tmp_path,
        "judges.yaml",
        """
        name: judges
        models:
          offline: {provider: offline, latency: 0}
        roles:
          critic: {description: Grades answers.}
        """,
    )
    path = write(
        tmp_path,
        "evals.yaml",
        """
        judges: judges.yaml
        cases:
          - task: Say hello to Lisbon
            assert:
              - judge: {role: critic, rubric: It greets.}
        """,
    )
    # As honeycomb eval does: the critic is the judges' hive's, on its own model.
    cases = load_cases(path, hive)
    report = await evaluate(Executor.from_hive(hive), cases)
    (attempt,) = report.cases[0].attempts
    assert [(v.passed, v.reason) for v in attempt.verdicts] == [(True, None)]
    assert attempt.judge_model_calls == 1
    # A case of the file run alone, as a test does, is graded alike.
    (case,) = cases.cases
    found = await assert_case(Executor.from_hive(hive), case)
    assert found.attempts[0].judge_model_calls == 1


async def test_a_comparison_tells_what_newly_fails_and_passes(hive: Hive) -> None:
    executor = Executor.from_hive(hive)

    def lisbon(answer: str, run: CaseRun) -> bool:
        return "city 0" in answer

    def everywhere(answer: str, run: CaseRun) -> bool:
        return "city 1" in answer or "city 2" in answer

    before = await evaluate(executor, _cases(2, lisbon))
    cases = [*_cases(3, everywhere)]
    after = await evaluate(executor, cases)
    found = compare(before, after)
    changes = {c.id: c.change for c in found.cases}
    assert changes == {"c0": "newly_failing", "c1": "newly_passing", "c2": "added"}
    assert [c.id for c in found.regressions] == ["c0"]
    c0 = next(c for c in found.cases if c.id == "c0")
    assert c0.score == -1.0
    assert c0.reason == "everywhere: the check returned False"
    assert compare(after, before).cases[-1].change == "removed"


async def test_bad_arguments_are_refused(hive: Hive) -> None:
    executor = Executor.from_hive(hive)
    with pytest.raises(ValueError, match="at least 1"):
        await evaluate(executor, _cases(1), concurrency=0)
    with pytest.raises(ValueError, match="two cases are named 'c0'"):
        await evaluate(executor, [*_cases(1), *_cases(1)])
    with pytest.raises(ValueError, match="no cases to evaluate"):  # not a green eval
        await evaluate(executor, [case for case in _cases(3) if case.id == "c9"])


async def test_a_case_as_a_test_fails_naming_its_failing_checks(hive: Hive, tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "evals.yaml",
        """
        cases:
          - id: hello
            task: Say hello to Lisbon
            assert:
              - contains: Lisbon
          - id: bye
            task: Say hello to Oslo
            assert:
              - contains: Bergen
              - status: ok
        """,
    )
    good, bad = load_cases(path, hive).cases
    executor = Executor.from_hive(hive)
    assert (await assert_case(executor, good)).passed
    with pytest.raises(AssertionError) as failed:
        await assert_case(executor, bad)
    (line,) = str(failed.value).splitlines()[1:]
    assert re.fullmatch(r"  \S+: contains 'Bergen': the answer lacks 'Bergen': .*", line)


async def test_a_run_that_raised_before_any_result_is_scored_as_an_error(
    hive: Hive, tmp_path: Path
) -> None:
    def no_plan(request: ModelRequest) -> str:
        return "not a plan"

    store = RunStore(tmp_path / "runs.db")
    executor = Executor.from_hive(hive, model=FunctionModel(no_plan), store=store)
    report = await evaluate(executor, _cases(1))
    (attempt,) = report.cases[0].attempts
    assert (attempt.status, attempt.passed) == ("error", False)
    kept = store.find(attempt.run_id)  # its run is named: honeycomb trace shows where it failed
    assert kept is not None
    assert kept.status == "failed"
    assert attempt.failing is not None
    assert attempt.failing.reason is not None
    assert attempt.failing.reason.startswith("the run ended error: ")


async def test_a_case_whose_python_planner_raises_is_an_error_and_the_others_are_kept(
    tmp_path: Path,
) -> None:
    def plan(task: str) -> list[tuple[str, str]]:
        if "BOOM" in task:
            raise RuntimeError("planner bug")
        return [("worker", task)]

    store = RunStore(tmp_path / "runs.db")
    executor = Executor(
        [Role(name="worker")],
        FunctionModel(lambda request: "fine"),
        planner=plan,
        aggregator="concat",
        store=store,
    )
    cases = [
        Case(id="good-1", task="hello"),
        Case(id="bad", task="BOOM"),
        Case(id="good-2", task="bye"),
    ]
    report = await evaluate(executor, cases, eval_id="ev-bug")
    found = {c.id: c.attempts[0] for c in report.cases}
    assert {i: (a.status, a.passed) for i, a in found.items()} == {
        "good-1": ("ok", True),
        "bad": ("error", False),
        "good-2": ("ok", True),
    }
    told = "invalid plan: the planner raised RuntimeError: planner bug"  # a PlanError
    assert found["bad"].error == told
    assert found["bad"].failing is not None
    assert found["bad"].failing.reason == f"the run ended error: {told}"
    assert [e.eval_id for e in store.evals()] == ["ev-bug"]  # the report is kept


async def test_a_run_that_raised_fails_its_case_whatever_its_checks_say(
    hive: Hive, tmp_path: Path
) -> None:
    path = write(
        tmp_path,
        "evals.yaml",
        """
        cases:
          - id: holds-on-nothing
            task: Say hello to Oslo
            assert:
              - not_contains: Norway
              - side_effects: 0
              - cost: 0.01
              - tokens: 100000
          - id: scored-above-its-threshold
            task: Say hello to Oslo
            threshold: 0.5
            assert:
              - not_contains: Norway
              - contains: Oslo
          - id: meant-to-raise
            task: Say hello to Oslo
            assert:
              - status: error
        """,
    )

    def no_plan(request: ModelRequest) -> str:
        return "not a plan"

    executor = Executor.from_hive(hive, model=FunctionModel(no_plan))
    report = await evaluate(executor, load_cases(path, hive))
    found = {c.id: c.attempts[0] for c in report.cases}
    assert {i: (a.status, a.passed, a.score) for i, a in found.items()} == {
        "holds-on-nothing": ("error", False, 0.0),
        "scored-above-its-threshold": ("error", False, 0.0),
        "meant-to-raise": ("error", True, 1.0),  # a check that asks for the error
    }
    said = report.cases[0].why
    assert said.startswith("the run ended error: invalid plan"), said
    assert not report.passed


def _nested_hive(tmp_path: Path | None, **options: Any) -> Executor:
    """A lead whose turn asks for five calls: its mailer (an ``agent:`` tool, whose
    nested worker sends an email), a tool there is none of, an email with no
    arguments, a payment a person denies, and one its own journal would skip."""

    @tool(side_effects=True)
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        return f"sent to {to}"

    @tool(side_effects=True, approval=True)
    def pay(to: str) -> str:
        """Pay someone."""
        raise AssertionError("a denied call ran")

    async def deny(request: ApprovalRequest) -> Decision:
        return Decision.denied("not today")

    def answer(request: ModelRequest) -> Answer:
        me = str(request.messages[0].content)
        seen = [m for m in request.messages if isinstance(m, ToolMessage)]
        if me.startswith("You are the mailer worker"):
            if seen:
                return "mailed"
            return call("send_email", {"to": "ceo@example.com", "body": "hi"})
        if me.startswith("You are the lead worker") and not seen:
            return AssistantMessage(
                tool_calls=(
                    call("mailer", {"instruction": "email the ceo"}),
                    call("nope", {}),
                    call("send_email", {}),
                    call("pay", {"to": "bob"}),
                )
            )
        return "done"

    return Executor(
        [
            Role(name="lead", tools=("agent:mailer", "send_email", "pay")),
            Role(name="mailer", description="Sends mail.", tools=("send_email",)),
        ],
        FunctionModel(answer),
        tools=[send_email, pay],
        aggregator="concat",
        planner=lambda task: [("lead", task)],
        approver=deny,
        store=RunStore(tmp_path / "runs.db") if tmp_path is not None else None,
        **options,
    )


@pytest.mark.parametrize("kept", [True, False], ids=["store", "no-store"])
async def test_tool_checks_count_the_calls_that_ran_nested_workers_included(
    tmp_path: Path, kept: bool
) -> None:
    def calls(answer: str, run: CaseRun) -> str:
        return repr([(u.role, u.tool, u.arguments, u.side_effects) for u in run.tool_calls])

    executor = _nested_hive(tmp_path if kept else None)
    report = await evaluate(executor, [Case(id="mail", task="Do it.", checks=[calls])])
    (attempt,) = report.cases[0].attempts
    assert attempt.status == "ok"
    assert attempt.verdicts[0].reason is not None
    ran = eval(attempt.verdicts[0].reason)  # the check says what it saw
    # Refused (an unknown tool, arguments not valid) and denied calls never ran; the
    # nested mailer's email did, its arguments known from the store where it is kept.
    sent = {"to": "ceo@example.com", "body": "hi"} if kept else {}
    assert ran == [("lead", "mailer", {"instruction": "email the ceo"}, False),
                   ("mailer", "send_email", sent, True)]  # fmt: skip


async def test_a_call_waiting_for_approval_is_not_counted(tmp_path: Path) -> None:
    @tool(side_effects=True, approval=True)
    def pay(to: str) -> str:
        """Pay someone."""
        raise AssertionError("a call waiting for approval ran")

    def answer(request: ModelRequest) -> Answer:
        return call("pay", {"to": "bob"})

    executor = Executor(
        [Role(name="payer", tools=("pay",))],
        FunctionModel(answer),
        tools=[pay],
        aggregator="concat",
        planner=lambda task: [("payer", task)],
        store=RunStore(tmp_path / "runs.db"),
    )
    path = write(
        tmp_path,
        "evals.yaml",
        """
        cases:
          - task: Pay bob.
            assert:
              - status: waiting
              - side_effects: 0
              - tool_called: {name: pay, at_most: 0}
        """,
    )
    report = await evaluate(executor, load_cases(path))
    (attempt,) = report.cases[0].attempts
    assert [v.reason for v in attempt.verdicts] == [None, None, None]
    assert attempt.passed


async def test_a_run_no_call_of_which_may_ask_is_not_looked_up_in_the_store_first(
    hive: Hive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each run given an id of the eval's making (one that says it is the eval's, for
    its calls may wait for a person) is looked up in the store first, to be resumed: a
    wait for the store's writer, 1.7 ms of CPU a case. A run of a hive no call of which
    may ask is given none."""
    store = RunStore(tmp_path / "runs.db")
    looked: list[str] = []
    load = RunStore.load

    async def counted(self: RunStore, run_id: str) -> Any:
        looked.append(run_id)
        return await load(self, run_id)

    monkeypatch.setattr(RunStore, "load", counted)
    report = await evaluate(Executor.from_hive(hive, store=store), _cases(2))
    assert report.passed
    assert looked == []
    assert not any(a.run_id.startswith("eval:") for a in report.attempts)
    store.close()


async def test_runs_the_evals_budget_left_unmade_fail_their_case(hive: Hive) -> None:
    executor = Executor.from_hive(hive)
    budget = EvalBudget(model_calls=3)  # one run of the tiny hive
    report = await evaluate(executor, _cases(2), budget=budget, concurrency=1, repeat=3)
    (case,) = report.cases
    assert (case.id, len(case.attempts), case.not_run) == ("c0", 1, 2)
    assert (case.passed, case.pass_rate, case.flaky) == (False, 1 / 3, False)
    assert case.why == "2 of its 3 runs not made"
    assert report.not_run == ("c1",)
    assert report.unmade == ["c1", "c0 (1 of 3 runs made)"]
    assert not report.passed
    suite = ET.fromstring(junit(report))
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("6", "0", "5")
    names = [(c.get("name"), c.find("skipped") is not None) for c in suite]
    # A case not run at all has its runs named as those of a case run are (a CI server
    # tracks a test by its name): each skipped.
    assert names == [
        ("c0 #1", False),
        ("c0 #2", True),
        ("c0 #3", True),
        ("c1 #1", True),
        ("c1 #2", True),
        ("c1 #3", True),
    ]
    # Stopped before the last run of the only case: it fails alone.
    alone = await evaluate(executor, _cases(1), budget=budget, concurrency=1, repeat=2)
    assert (alone.not_run, alone.cases[0].not_run, alone.passed) == ((), 1, False)
    assert EvalReport.from_json(alone.to_json()) == alone


async def test_a_judges_calls_are_the_cases_in_a_cassette(hive: Hive, tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "evals.yaml",
        """
        cases:
          - id: judged
            task: Say hello to Lisbon
            assert:
              - judge: {role: writer, rubric: it greets}
        """,
    )
    tape = tmp_path / "calls.jsonl"
    models = cassette({"offline": OfflineModel(latency=0)}, record=tape)
    report = await evaluate(Executor.from_hive(hive, models=models), load_cases(path, hive))
    assert report.passed
    recorded = Cassette(tape).calls
    assert len(recorded) == 4  # the run's three calls, and its judge's
    assert [c.case for c in recorded] == ["judged"] * 4


async def test_an_executor_no_run_of_which_can_begin_is_refused_before_any_case(
    tmp_path: Path,
) -> None:
    # A hive tool whose hive asks for approval, and nobody to decide: each case's run
    # raised the same ConfigError as it began, the eval ran them all (every case an
    # error) and honeycomb eval exited 4, a failing eval, not 2, a hive to mend.
    (tmp_path / "payer").mkdir()
    write(tmp_path / "payer", "tools.py", "def pay(to: str) -> str:\n    return f'paid {to}'\n")
    write(
        tmp_path / "payer",
        "hive.yaml",
        """
        models: {default: offline}
        roles:
          planner: {description: Plans.}
          payer: {description: Pays., tools: ["tools:pay"]}
        approvals: {tools: [pay]}
        """,
    )
    lead = write(
        tmp_path,
        "hive.yaml",
        """
        models: {default: offline}
        roles:
          planner: {description: Plans.}
          lead: {description: Leads., tools: ["hive:payer/hive.yaml"]}
        """,
    )
    runs: list[CaseRun] = []
    with pytest.raises(ConfigErrors) as refused:
        await evaluate(Executor.from_hive(load_hive(lead)), [Case(id="a", task="pay")],
                       on_run=runs.append)  # fmt: skip
    assert runs == []
    assert "asks for approval of some calls, and nobody can decide them" in str(refused.value)


async def test_a_run_its_budget_stopped_says_why_once_not_again_for_each_subtask() -> None:
    """Each subtask the run's end stopped said the run's error again ('the run
    stopped: budget exceeded ...'), after it: a reason three times as long."""

    @tool
    async def wait() -> str:
        """Wait."""
        await anyio.sleep_forever()
        return "never"

    executor = Executor(
        [Role(name="waiter", tools=("wait",))],
        FunctionModel(lambda request: call("wait", {})),
        tools=[wait],
        planner=lambda task: [("waiter", "Wait."), ("waiter", "Wait too.")],
        aggregator="concat",
        policy=Policy(budgets=Limits(wall_time_s=0.2)),
    )
    report = await evaluate(executor, [Case(id="wait", task="Wait.")])
    (attempt,) = report.cases[0].attempts
    assert attempt.status == "over_budget"
    assert attempt.error is not None
    assert attempt.error.startswith("budget exceeded: wall_time_s")
    assert "the run stopped" not in attempt.error


async def test_a_case_whose_worker_a_guard_failed_says_why_once() -> None:
    """The run's error names what its subtasks failed of ('nothing to aggregate (s1:
    GuardrailTripped: ...)'), and the case's reason said each of them again after it."""

    def no_lisbon(check: GuardCheck) -> str | None:
        return "it names Lisbon" if "Lisbon" in check.text else None

    executor = Executor(
        [Role(name="writer", guards=Guards(output=(no_lisbon,)))],
        FunctionModel(lambda request: "Hello Lisbon"),
        planner=lambda task: [("writer", task)],
        aggregator="concat",
    )
    report = await evaluate(executor, [Case(id="hello", task="Say hello.")])
    (attempt,) = report.cases[0].attempts
    assert attempt.status == "failed"
    assert attempt.error is not None
    assert attempt.error.startswith("its only subtask failed; nothing to aggregate (s1: ")
    assert attempt.error.count("it names Lisbon") == 1, attempt.error
