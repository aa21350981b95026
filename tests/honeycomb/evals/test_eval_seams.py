"""Evals where they meet the other features: secrets in a case, a cassette that no
longer matches a worker's request, a run cut off mid-eval, a store of either kind."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from functools import partial
from pathlib import Path

import anyio
import msgspec
import pytest

from honeycomb import Executor, Role, add_secret
from honeycomb.cli import main
from honeycomb.cli.exits import ExitStatus
from honeycomb.errors import ConfigError, ConfigErrors
from honeycomb.evals import (
    Case,
    CaseRun,
    EvalBudget,
    EvalReport,
    assert_case,
    evaluate,
    junit,
    load_cases,
)
from honeycomb.evals.checks import built_check
from honeycomb.evals.spec import CheckSpec
from honeycomb.hive import load_hive
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from runtime import ModelRequest, Price, PricedModel, StoreError
from runtime.models.cassettes import Cassette
from runtime.secrets import isolated
from tests.support import ROOT
from tests.support.evals import TINY_HIVE, write, writer
from tests.support.stores import Where

SECRET = "hunter2-but-longer"


async def test_a_secret_in_a_case_is_masked_in_its_report_junit_and_assertion() -> None:
    def quotes_the_task(answer: str, run: CaseRun) -> str:
        return f"it was asked {run.task!r}"  # a check's reason that quotes the task

    told: list[str] = []
    with isolated():
        add_secret(SECRET, "password")
        case = Case(id="login", task=f"Log in with {SECRET}.", checks=[quotes_the_task])
        executor = writer()
        report = await evaluate(
            executor, [case], on_run=lambda case, attempt, done, total: told.append(repr(attempt))
        )
        with pytest.raises(AssertionError) as raised:
            await assert_case(executor, case)
    shown = [report.to_json().decode(), junit(report), str(raised.value), *told]
    assert all(SECRET not in text for text in shown), shown
    assert "[password hidden]" in report.cases[0].task
    assert "[password hidden]" in str(raised.value)


async def test_a_secret_a_check_names_or_quotes_is_masked_before_it_is_cut(
    tmp_path: Path,
) -> None:
    key = "sk-proj-" + "abcdefghij" * 12  # as long as a real key: longer than a name shows

    def quotes_a_file(answer: str, run: CaseRun) -> str:
        return "x" * 1990 + key  # a long reason, cut at REASON_CHARS inside the key

    with isolated():
        add_secret(key, "api key")
        hive = load_hive(write(tmp_path, "hive.yaml", TINY_HIVE))
        path = write(
            tmp_path,
            "evals.yaml",
            f"""
            cases:
              - id: no-leak
                task: Say hi
                assert:
                  - not_contains: "{key}"  # ${{API_KEY}}, in a real file
            """,
        )
        (case,) = load_cases(path, hive).cases
        checks = (*case.checks, quotes_a_file)
        report = await evaluate(writer(), [msgspec.structs.replace(case, checks=checks)])
    shown = [report.to_json().decode(), junit(report)]
    assert all(key[:12] not in text for text in shown), shown  # not even a piece of it
    (named, quoted) = report.cases[0].attempts[0].verdicts
    assert named.check == "not_contains '[api key hidden]'"
    assert quoted.reason is not None
    assert "[api key hidden]"[:10] in quoted.reason


async def test_a_workers_request_the_cassette_did_not_record_is_the_cases_reason(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "calls.jsonl"
    case = Case(id="hello", task="Say hello.")
    assert (await evaluate(writer(instructions="Be brief.", record=tape), [case])).passed
    assert (await evaluate(writer(instructions="Be brief.", replay=tape), [case])).passed
    # The worker's instructions changed: its request is not the one recorded. The
    # run fails (its only subtask did), and the case says why: the mismatch.
    report = await evaluate(writer(instructions="Be long.", replay=tape), [case])
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


async def _cut_after_first(store: Where, cases: list[Case], eval_id: str) -> None:
    """Run ``cases`` one at a time, each its own run of ``store``, and cancel the eval
    while the second case's worker waits in its model call."""
    second = anyio.Event()

    async def answer(request: ModelRequest) -> str:
        if "Say hello to b" in str(request.messages[-1].content):
            second.set()
            await anyio.sleep_forever()  # cancelled with the eval
        return "hello"

    executor = Executor(
        [Role(name="writer")],
        FunctionModel(answer),
        aggregator="concat",
        planner=lambda task: [("writer", task)],
        store=store,
    )
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(evaluate, executor, cases, concurrency=1, eval_id=eval_id))
            await second.wait()
            tg.cancel_scope.cancel()
    executor.store.close()


async def test_an_eval_cancelled_midway_keeps_the_report_of_the_runs_it_made(
    store: Where,
) -> None:
    cases = [Case(id=name, task=f"Say hello to {name}.") for name in ("a", "b", "c")]
    await _cut_after_first(store, cases, "ev-cut")
    kept = RunStore(store)
    text = kept.eval_report("ev-cut")
    assert text is not None
    report = EvalReport.from_json(text)
    assert report.interrupted
    assert [(c.id, [a.passed for a in c.attempts]) for c in report.cases] == [("a", [True])]
    assert report.not_run == ("b", "c")
    assert report.stopped == "the eval was interrupted (1 of 3 runs made)"
    assert not report.passed
    statuses = sorted(r.status for r in kept.runs())
    assert statuses == ["interrupted", "ok"]  # a's run, and b's cut off
    kept.close()


@pytest.mark.parametrize(("stop", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_honeycomb_eval_with_the_report_of_the_runs_it_made(
    tmp_path: Path, stop: signal.Signals, code: int
) -> None:
    write(tmp_path, "hive.yaml", TINY_HIVE.replace("latency: 0", "latency: 0.5"))
    write(
        tmp_path,
        "evals.yaml",
        """
        name: tiny
        cases:
          - {id: a, task: Say hello to Lisbon}
          - {id: b, task: Say hello to Porto}
          - {id: c, task: Say hello to Oslo}
        """,
    )
    command = [sys.executable, "-m", "honeycomb", "eval", "hive.yaml", "evals.yaml", "--plain",
               "--concurrency", "1", "--eval-id", "ev-cut", "--junit", "cut.xml"]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    child = subprocess.Popen(
        command, cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert child.stderr is not None
    for line in child.stderr:  # stop it once the first case is scored, the second under way
        if "eval: 1 of 3 runs" in line:
            break
    child.send_signal(stop)
    out, err = child.communicate(timeout=60)
    assert child.returncode == code, err
    assert f"{stop.name}: eval ev-cut stopped." in err
    assert "the eval was interrupted (1 of 3 runs made): not run: b, c" in out
    assert "eval ev-cut kept in .honeycomb/runs.db" in out
    suite = ET.parse(tmp_path / "cut.xml").getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "0", "2")
    assert "The same command with --eval-id ev-cut goes on with it" in err
    # Run again with its id, it makes only the runs left: a's is not made again.
    again = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert "3 of 3 cases passed" in again.stdout
    store = RunStore(tmp_path / ".honeycomb" / "runs.db")
    statuses = [r.status for r in store.runs()]  # b's first run, if it had started, cut off
    assert sorted(statuses) in (["ok"] * 3, ["interrupted", "ok", "ok", "ok"])
    store.close()


async def test_an_interrupted_eval_goes_on_with_its_id_making_only_the_runs_left(
    tmp_path: Path,
) -> None:
    store = tmp_path / "runs.db"
    cases = [Case(id=name, task=f"Say hello to {name}.") for name in ("a", "b", "c")]
    await _cut_after_first(store, cases, "ev-cut")
    executor = Executor(
        [Role(name="writer")],
        FunctionModel(lambda request: "hello"),
        aggregator="concat",
        planner=lambda task: [("writer", task)],
        store=store,
    )
    assert executor.store is not None
    first = EvalReport.from_json(executor.store.eval_report("ev-cut") or "")
    (made,) = first.cases[0].attempts
    told: list[str] = []
    report = await evaluate(
        executor, cases, eval_id="ev-cut", on_run=lambda case, *_: told.append(case)
    )
    # a's run was made before the eval was cut off: taken as it was, not made again.
    assert report.passed
    assert not report.interrupted
    assert [a.run_id for a in report.cases[0].attempts] == [made.run_id]
    assert sorted(told) == ["a", "b", "c"]
    assert report.started_at == first.started_at
    statuses = sorted(r.status for r in executor.store.runs())
    assert statuses == ["interrupted", "ok", "ok", "ok"]
    # Ended, the eval is one of its id as any: run again, it makes every run anew.
    again = await evaluate(executor, cases, eval_id="ev-cut")
    assert again.cases[0].attempts[0].run_id != made.run_id
    executor.store.close()


async def test_an_interrupted_eval_of_another_hive_is_not_gone_on_with(tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    cases = [Case(id=name, task=f"Say hello to {name}.") for name in ("a", "b", "c")]
    await _cut_after_first(store, cases, "ev-cut")  # an eval of the hive '' (Python's)
    executor = writer("hello", store=RunStore(store))
    assert executor.store is not None
    first = EvalReport.from_json(executor.store.eval_report("ev-cut") or "")
    (made,) = first.cases[0].attempts
    # The same id by mistake, on another hive: its runs are made, not taken from the other.
    report = await evaluate(executor, cases, eval_id="ev-cut", hive="other/hive.yaml")
    assert report.passed
    assert report.cases[0].attempts[0].run_id != made.run_id
    assert report.started_at != first.started_at
    executor.store.close()


async def test_the_judges_spending_of_an_eval_gone_on_with_counts_in_its_totals_and_budget(
    tmp_path: Path,
) -> None:
    store = tmp_path / "runs.db"
    second = anyio.Event()
    hold = True

    async def answer(request: ModelRequest) -> str:
        shown = str(request.messages[-1].content)
        if "Rubric:" in shown:
            return "PASS"  # a judge's call
        if hold and "Say hello to b" in shown:
            second.set()
            await anyio.sleep_forever()  # cancelled with the eval
        return "hello"

    def executor() -> Executor:
        return Executor(
            [Role(name="writer")],
            FunctionModel(answer),
            aggregator="concat",
            planner=lambda task: [("writer", task)],
            store=store,
        )

    spec = CheckSpec.model_validate({"judge": {"role": "writer", "rubric": "it greets"}})
    judged = built_check(spec, expected=None, output_schema=None, python=None)
    cases = [Case(id=name, task=f"Say hello to {name}.", checks=[judged]) for name in "abc"]
    cut = executor()
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(evaluate, cut, cases, concurrency=1, eval_id="ev-j"))
            await second.wait()
            tg.cancel_scope.cancel()
    assert cut.store is not None
    cut.store.close()
    hold = False
    # a's run and its judge made two model calls before the eval was cut off: gone on
    # with, they are spent, and b's two reach the budget, so that c is not run.
    again = executor()
    budget = EvalBudget(model_calls=4)
    report = await evaluate(again, cases, concurrency=1, eval_id="ev-j", budget=budget)
    assert again.store is not None
    again.store.close()
    assert [c.id for c in report.cases] == ["a", "b"]
    assert report.not_run == ("c",)
    attempts = report.attempts
    assert [(a.model_calls, a.judge_model_calls) for a in attempts] == [(1, 1), (1, 1)]
    assert all(a.judge_tokens > 0 for a in attempts)
    totals = report.totals()
    assert totals["judge_model_calls"] == 2
    assert totals["judge_tokens"] == sum(a.judge_tokens for a in attempts)


def test_a_json_check_whose_schema_is_no_schema_is_a_mistake_of_the_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "evals.yaml",
        """
        cases:
          - id: totals
            task: Add them up.
            assert:
              - json: {schema: {type: object, properties: {total: {type: numbr}}}}
              - json: {schema: {type: object, required: [total]}}
        """,
    )
    with pytest.raises(ConfigErrors) as caught:
        load_cases(path)
    # Told before anything runs, at its line, not as every case's failure as it runs.
    assert [str(e) for e in caught.value.errors] == [
        f"{path}:5:16: cases[0].assert[0].json.schema: not a JSON schema: "
        "properties/total/type: 'numbr' is not valid under any of the given schemas"
    ]


async def test_an_eval_cancelled_with_a_store_that_fails_is_cancelled_still(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def fails(*args: object, **options: object) -> None:
        raise StoreError("the disk is full", path=str(tmp_path))

    second = anyio.Event()

    async def answer(request: ModelRequest) -> str:
        if "Say hello to b" in str(request.messages[-1].content):
            second.set()
            await anyio.sleep_forever()
        return "hello"

    monkeypatch.setattr(RunStore, "keep_eval", fails)
    executor = Executor(
        [Role(name="writer")],
        FunctionModel(answer),
        aggregator="concat",
        planner=lambda task: [("writer", task)],
        store=tmp_path / "runs.db",
    )
    cases = [Case(id=name, task=f"Say hello to {name}.") for name in ("a", "b")]
    # Cancelled as a service cancels the task it runs it in: the cancellation comes
    # out, not the store's error as the report of the runs made is kept.
    task = asyncio.ensure_future(evaluate(executor, cases, concurrency=1))
    with anyio.fail_after(30):
        await second.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert executor.store is not None
    executor.store.close()


async def test_a_run_with_no_answer_is_not_graded_by_its_judges(tmp_path: Path) -> None:
    graded: list[str] = []

    def answer(request: ModelRequest) -> str:
        text = str(request.messages[-1].content)
        if "Rubric:" in text:
            graded.append(text)
            return "PASS"
        return "no plan at all"  # the planner's answers are no plan: PlanError

    path = write(
        tmp_path,
        "evals.yaml",
        """
        cases:
          - id: judged
            task: Plan it.
            assert:
              - judge: {role: critic, rubric: It is a plan.}
        """,
    )
    roles = [Role(name="planner"), Role(name="writer"), Role(name="critic")]
    report = await evaluate(Executor(roles, FunctionModel(answer)), load_cases(path))
    (attempt,) = report.cases[0].attempts
    # Its run raised before it had an answer: a judge would grade nothing, and cost.
    assert attempt.status == "error"
    assert graded == []
    assert [v.reason for v in attempt.verdicts] == [
        "critic: no answer to grade (the run ended error)"
    ]


FACTS = """
name: facts
models:
  checker_model: {provider: offline, latency: 0}
roles:
  planner: {description: Gives the claim to the checker.}
  checker: {description: Checks the facts of a claim., max_turns: 2}
  aggregator: {description: Sums up the check.}
planner: planner
aggregator: aggregator
"""
"""A hive the lead calls as a tool, on a model of its own name."""

UNREACHABLE = """
  checker_model:
    provider: openai
    model: gpt-4o-mini
    base_url: http://127.0.0.1:9/v1
    api_key: sk-never-used-in-a-replay
"""


def test_the_models_of_a_hive_called_as_a_tool_are_recorded_and_replayed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lead = (
        (ROOT / "examples" / "lead" / "hive.yaml").read_text().replace("latency: 0.1", "latency: 0")
    )
    write(tmp_path, "hive.yaml", lead)
    write(tmp_path, "facts.yaml", FACTS)
    write(tmp_path, "evals.yaml", (ROOT / "examples" / "lead" / "evals.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    eval_ = ["eval", "hive.yaml", "evals.yaml", "--plain", "--no-store"]
    assert main([*eval_, "--record", "calls.jsonl"]) == ExitStatus.OK, capsys.readouterr().err
    recorded = {c.model for c in Cassette(tmp_path / "calls.jsonl").calls}
    assert recorded == {"offline", "facts/checker_model"}
    # Its model out of reach (a network call fails the test): the replay asks none.
    facts = FACTS.replace("\n  checker_model: {provider: offline, latency: 0}", UNREACHABLE)
    write(tmp_path, "facts.yaml", facts)
    assert main([*eval_, "--replay", "calls.jsonl"]) == ExitStatus.OK, capsys.readouterr().out


async def test_an_evals_budget_starts_no_run_it_cannot_cover_however_many_may_run_at_once() -> None:
    price = Price(input_per_mtok=1_000_000.0, output_per_mtok=0.0)  # a dollar a token
    executor = Executor(
        [Role(name="writer")],
        PricedModel(FunctionModel(lambda request: "hello"), price),
        aggregator="concat",
        planner=lambda task: [("writer", task)],
    )
    cases = [Case(id=f"c{n}", task="Say hello.") for n in range(6)]
    every = await evaluate(executor, cases, concurrency=1)
    one = every.cost / 6  # each run spends as much
    budget = EvalBudget(cost=one * 2.5)
    cut = await evaluate(executor, cases, concurrency=6, budget=budget)
    assert [c.id for c in cut.cases] == ["c0", "c1"]  # a third would pass the budget
    assert cut.cost == pytest.approx(one * 2)
    assert cut.not_run == ("c2", "c3", "c4", "c5")
    assert cut.stopped == (
        f"the eval's budget of ${one * 2.5:g} cannot cover another run: ${one * 2:.4f} spent, "
        f"and a run has spent up to ${one:.4f}"
    )


async def test_an_evals_budget_starts_its_runs_in_the_order_of_the_cases() -> None:
    price = Price(input_per_mtok=1_000_000.0, output_per_mtok=0.0)  # a dollar a token
    executor = Executor(
        [Role(name="writer")],
        PricedModel(FunctionModel(lambda request: "hello"), price),
        aggregator="concat",
        planner=lambda task: [("writer", task)],
    )
    cases = [Case(id=f"c{n}", task="Say hello.") for n in range(8)]
    one = (await evaluate(executor, cases[:1])).cost
    cut = await evaluate(executor, cases, concurrency=4, budget=EvalBudget(cost=one * 3.5))
    # The worker whose first run ended takes the fifth case: it waits behind the cases
    # that waited for room before it, and the cases left unrun are the last ones.
    assert [c.id for c in cut.cases] == ["c0", "c1", "c2"]
    assert cut.not_run == ("c3", "c4", "c5", "c6", "c7")


def cheap_then_dear(cheap: int) -> tuple[Executor, list[Case]]:
    """Seven cases: the first ``cheap`` runs make one model call each, the others five
    (five subtasks)."""
    executor = Executor(
        [Role(name="writer")],
        FunctionModel(lambda request: "hello"),
        aggregator="concat",
        planner=lambda task: [("writer", task)] * (1 if task.startswith("cheap") else 5),
    )
    cases = [Case(id=f"c{n}", task=f"{'cheap' if n < cheap else 'dear'} {n}") for n in range(7)]
    return executor, cases


async def test_an_evals_budget_starts_a_run_alone_while_what_a_run_spends_rises() -> None:
    """A cheap first run made the estimate one call, and four dear runs (five calls
    each) started at once on it: 21 calls for a budget of 6, told as spent (6)."""
    executor, cases = cheap_then_dear(1)
    budget = EvalBudget(model_calls=6)
    report = await evaluate(executor, cases, concurrency=4, budget=budget)
    assert report.totals()["model_calls"] == 6  # c0, then c1 alone: it spent more than c0
    assert [c.id for c in report.cases] == ["c0", "c1"]
    assert report.stopped == "the eval's budget of 6 model calls is spent (6)"
    # Two cheap runs hold the estimate at one call: dear runs go beside each other on
    # it, and pass the budget; the note tells what was spent in the end.
    _, two_cheap = cheap_then_dear(2)
    over = await evaluate(executor, two_cheap, concurrency=4, budget=budget)
    spent = over.totals()["model_calls"]
    assert spent > 6
    assert over.stopped == f"the eval's budget of 6 model calls is spent ({spent})"


async def test_an_evals_budget_in_dollars_with_no_priced_model_is_refused() -> None:
    executor = Executor(
        [Role(name="writer")],
        FunctionModel(lambda request: "hello"),  # no price: every run would cost 0
        aggregator="concat",
        planner=lambda task: [("writer", task)],
    )
    cases = [Case(id=f"c{n}", task="Say hello.") for n in range(2)]
    with pytest.raises(ConfigError) as refused:
        await evaluate(executor, cases, budget=EvalBudget(cost=0.01))
    assert refused.value.field == "budget.cost"
    assert "no model of the hive nor of its judges has one" in str(refused.value)
    assert "--max-cost" in str(refused.value)
    counted = await evaluate(executor, cases, budget=EvalBudget(model_calls=1))
    assert counted.not_run == ("c1",)  # a budget that counts what it can still bounds it
