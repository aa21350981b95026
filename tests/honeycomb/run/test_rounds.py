"""Planning in rounds: a lead reads each round's results and adds subtasks (which may
depend on subtasks of any earlier round) until it is done, bounded by its rounds, the
policy's max_subtasks and the run's budgets; every round is in the store, and a run
cut off mid-round resumes there."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from honeycomb import (
    BudgetExceeded,
    Budgets,
    Executor,
    PlanRound,
    Policy,
    Role,
    RunFailed,
    RunResult,
)
from honeycomb.cli.main import main
from honeycomb.events import RoundPlanned, RunFinished
from honeycomb.offline.plan import follow_up_for
from honeycomb.planning import RolePlanner
from honeycomb.run.plan import Plan, Subtask, critical_path
from honeycomb.run.prompts import ResultEntry, follow_up_task
from honeycomb.run.result import rounds_of
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from honeycomb.tracing import Span, build_timeline
from runtime import Event, ModelConnectionError, ModelRequest, UserMessage
from tests.support.cpu_time import LINEAR_BOUND, cpu_growth
from tests.support.stores import finished_in_store

Lead = Callable[[int, str], list[dict[str, Any]]]
"""The test's lead: given the round and its message, the subtasks it adds."""


def _subtask(sid: str, instruction: str, *after: str) -> dict[str, Any]:
    return {"id": sid, "role": "researcher", "instruction": instruction, "depends_on": after}


class Hive:
    """A lead and researchers on one function model: the lead's answers come from
    ``lead``; a researcher answers ``found: <instruction>`` (with the results it was
    given), or fails when its instruction says ``fail``, or waits at ``gate`` when its
    instruction says ``hold``."""

    def __init__(self, lead: Lead) -> None:
        self.lead = lead
        self.lead_messages: list[str] = []  # what the lead was told, call by call
        self.worked: list[str] = []  # the researchers' instructions, call by call
        self.gate: anyio.Event | None = None
        self.holding = anyio.Event()

    async def answer(self, request: ModelRequest) -> str:
        users = [m.content for m in request.messages if isinstance(m, UserMessage)]
        if request.output is not None and request.output.name == "Plan":
            text = users[-1]
            self.lead_messages.append(text)
            found = re.search(r"Planning round (\d+)", text)
            return json.dumps({"subtasks": self.lead(int(found.group(1)) if found else 1, text)})
        instruction = users[0]
        self.worked.append(instruction.split("\n", 1)[0])
        if "fail" in instruction.split("\n", 1)[0]:
            raise ValueError("the researcher broke")
        if "hold" in instruction and self.gate is not None:
            self.holding.set()
            await self.gate.wait()
        return "found: " + instruction

    def executor(self, rounds: int, store: Path | None = None, **policy: Any) -> Executor:
        return Executor(
            [
                Role(name="lead", description="Plans in rounds."),
                Role(name="researcher", description="Researches one question."),
            ],
            FunctionModel(self.answer),
            planner=RolePlanner("lead", rounds=rounds),
            aggregator="concat",
            policy=Policy(**policy),
            store=store,
        )


async def test_each_round_sees_the_results_and_failures_and_may_depend_on_any_earlier_round() -> (
    None
):
    def lead(round: int, text: str) -> list[dict[str, Any]]:
        if round == 1:
            return [_subtask("s1", "look at bees"), _subtask("s2", "fail at wasps")]
        if round == 2:
            return [_subtask("s3", "compare with s1", "s1")]
        return [_subtask("s4", "sum up s1 and s3", "s1", "s3")]

    hive = Hive(lead)
    events: list[Event] = []
    result = await hive.executor(3).run("Study insects.", on_event=[events.append])

    assert result.status == "partial"  # b failed; the rest went on
    assert result.rounds == [
        PlanRound(round=1, added=("s1", "s2")),
        PlanRound(round=2, added=("s3",)),
        PlanRound(round=3, added=("s4",)),
    ]
    assert result.rounds_ended == "rounds"  # 3 rounds: the lead is not asked a 4th time
    assert [s.round for s in result.plan.subtasks] == [1, 1, 2, 3]
    assert [s.status for s in result.subtasks.values()] == ["ok", "failed", "ok", "ok"]
    first, second, third = hive.lead_messages
    assert "Planning round" not in first
    # the lead sees every result so far, a failure as one, with why
    # (and what it asked of each)
    assert "### s1 (researcher)\nAsked: look at bees\nfound: look at bees" in second
    assert "### s2 (researcher) FAILED" in second
    assert "the researcher broke" in second
    assert "with the ids s3, s4, s5 ... in order" in second  # what the schema allows too
    assert "### s3 (researcher)" in third
    assert "Planning round 3 of at most 3" in third
    # s4, of round 3, was given the results of s1 (round 1) and s3 (round 2)
    d = result.subtasks["s4"].text
    assert "s1 (researcher)" in d
    assert "found: look at bees" in d
    assert "s3 (researcher)" in d
    planned = [e for e in events if isinstance(e, RoundPlanned)]
    assert [(e.round, e.added.ids) for e in planned] == [(2, ("s3",)), (3, ("s4",))]


async def test_the_lead_says_it_is_done() -> None:
    hive = Hive(lambda round, text: [_subtask("s1", "look")] if round == 1 else [])
    result = await hive.executor(4).run("Study bees.")
    assert result.status == "ok"
    assert result.rounds == [PlanRound(round=1, added=("s1",)), PlanRound(round=2, added=())]
    assert result.rounds_ended == "done"
    assert len(hive.lead_messages) == 2


async def test_max_subtasks_bounds_the_whole_run_over_every_round() -> None:
    def lead(round: int, text: str) -> list[dict[str, Any]]:
        if round == 1:
            return [_subtask("s1", "one"), _subtask("s2", "two")]
        return [_subtask("s3", "more"), _subtask("s3", "more")]  # one too many

    hive = Hive(lead)
    result = await hive.executor(5, max_subtasks=3, plan_attempts=1).run("Study bees.")
    # round 2 had room for one subtask and the lead gave two: the round is refused
    assert "add at most 1 new subtasks" in hive.lead_messages[1]
    assert result.rounds_ended == "lead_failed"
    assert result.rounds[-1].error is not None
    assert "at most 1" in result.rounds[-1].error
    assert list(result.subtasks) == ["s1", "s2"]

    fitting = Hive(lambda round, text: [_subtask(f"s{round}", "more")])
    done = await fitting.executor(9, max_subtasks=3).run("Study bees.")
    assert list(done.subtasks) == ["s1", "s2", "s3"]
    assert done.rounds_ended == "max_subtasks"  # full: the lead is not asked again
    assert len(fitting.lead_messages) == 3


async def test_a_quorum_counts_the_subtasks_later_rounds_may_add() -> None:
    def lead(round: int, text: str) -> list[dict[str, Any]]:
        if round == 1:
            return [_subtask("s1", "one")]
        if round == 2:
            return [_subtask("s2", "two"), _subtask("s3", "three")]
        return []

    quorum = {"failure": "quorum", "quorum": 3, "max_subtasks": 4}
    result = await Hive(lead).executor(4, **quorum).run("Study bees.")
    assert result.status == "ok"  # a first round smaller than the quorum is no failure
    assert list(result.subtasks) == ["s1", "s2", "s3"]

    alone = Hive(lambda round, text: [_subtask("s1", "one")] if round == 1 else [])
    with pytest.raises(RunFailed) as caught:
        await alone.executor(4, **quorum).run("Study bees.")
    assert str(caught.value) == (
        "a quorum of 3 successful subtasks was not reached: 1 of 1 succeeded"
    )
    assert caught.value.partial is not None
    assert caught.value.partial.rounds_ended == "done"

    def failing(round: int, text: str) -> list[dict[str, Any]]:
        return [_subtask("s1", "fail at one"), _subtask("s2", "fail at two")] if round == 1 else []

    with pytest.raises(RunFailed, match=r"quorum of 3 .* out of at most 4 cannot be reached"):
        await Hive(failing).executor(4, **quorum).run("Study bees.")


async def test_in_the_last_round_a_quorum_out_of_reach_stops_the_run_at_once() -> None:
    def lead(round: int, text: str) -> list[dict[str, Any]]:
        if round == 1:
            return [_subtask("s1", "one")]
        return [_subtask("s2", "fail at two"), _subtask("s3", "hold three")]

    hive = Hive(lead)
    hive.gate = anyio.Event()  # never set: s3 runs until the run stops it
    executor = hive.executor(2, failure="quorum", quorum=3, max_subtasks=10)
    # No round comes after the 2nd: once s2 fails, 3 successes are out of reach.
    with anyio.fail_after(5), pytest.raises(RunFailed) as caught:
        await executor.run("Study bees.")
    assert "a quorum of 3 successful subtasks out of 3 cannot be reached" in str(caught.value)
    assert caught.value.partial is not None
    assert {i: s.status for i, s in caught.value.partial.subtasks.items()} == {
        "s1": "ok",
        "s2": "failed",
        "s3": "cancelled",
    }


async def test_a_quorum_counts_a_first_plan_of_your_own_past_max_subtasks() -> None:
    class Lead:
        rounds = 3

        async def plan(self, task: str, context: Any) -> Plan:
            return Plan.of([("researcher", "fail at one"), *[("researcher", "look")] * 4])

        async def follow_up(self, task: str, plan: Plan, results: Any, **kw: Any) -> Plan:
            return Plan(subtasks=())

    executor = Executor(
        [Role(name="researcher")],
        FunctionModel(Hive(lambda round, text: []).answer),
        planner=Lead(),
        policy=Policy(failure="quorum", quorum=3, max_subtasks=3),
    )
    # 5 subtasks, not max_subtasks' 3: one failing leaves 4 able to succeed
    result = await executor.run("Study bees.")
    assert result.status == "partial"
    assert [s.status for s in result.subtasks.values()] == ["failed", "ok", "ok", "ok", "ok"]


async def test_the_budget_bounds_the_rounds(tmp_path: Path) -> None:
    hive = Hive(lambda round, text: [_subtask(f"s{round}", "more")])
    # each round costs the lead one call and its researcher one: the 6th, round 3's
    # researcher's, would go past the budget
    executor = hive.executor(9, tmp_path / "runs.db", budgets=Budgets(model_calls=5))
    events: list[Event] = []
    with pytest.raises(BudgetExceeded) as caught:
        await executor.run("Study bees.", run_id="bees", on_event=[events.append])
    partial = caught.value.partial
    assert partial is not None
    assert partial.rounds_ended == "budget"  # what stopped the rounds, said everywhere
    (finished,) = [e for e in events if isinstance(e, RunFinished)]
    assert finished.result is not None
    assert finished.result.rounds_ended == "budget"
    stored = await RunStore(tmp_path / "runs.db").load("bees")
    assert stored is not None
    assert stored.result is not None
    assert RunResult.model_validate_json(stored.result).rounds_ended == "budget"
    assert [r.added for r in partial.rounds] == [("s1",), ("s2",), ("s3",)]
    assert [s.status for s in partial.subtasks.values()] == ["ok", "ok", "over_budget"]
    assert partial.usage.model_calls == 5
    assert len(hive.lead_messages) == 3  # no round after the budget stopped the run

    # 4 calls: the lead's own call for round 3 is the one past the budget
    short = Hive(lambda round, text: [_subtask(f"s{round}", "more")])
    with pytest.raises(BudgetExceeded) as caught:
        await short.executor(9, budgets=Budgets(model_calls=4)).run("Study bees.")
    partial = caught.value.partial
    assert partial is not None
    assert partial.rounds_ended == "budget"
    assert [r.added for r in partial.rounds] == [("s1",), ("s2",), ()]  # round 3 begun
    assert (partial.rounds[2].error or "").startswith("BudgetExceeded: budget exceeded: model")
    assert [s.status for s in partial.subtasks.values()] == ["ok", "ok"]
    assert len(short.lead_messages) == 2


async def test_a_failed_subtask_that_stops_the_run_ends_its_rounds_saying_so() -> None:
    """Under fail_fast, a researcher's failure in round 2 stopped the run: its
    ``rounds_ended`` was None, as if the run had been planned once."""
    hive = Hive(lambda round, text: [_subtask(f"s{round}", "fail" if round == 2 else "look")])
    events: list[Event] = []
    with pytest.raises(RunFailed) as caught:
        await hive.executor(5, failure="fail_fast").run("Study bees.", on_event=[events.append])
    partial = caught.value.partial
    assert partial is not None
    assert partial.rounds_ended == "failed"
    assert [r.added for r in partial.rounds] == [("s1",), ("s2",)]
    (finished,) = [e for e in events if isinstance(e, RunFinished)]
    assert finished.result is not None
    assert finished.result.rounds_ended == "failed"


async def test_a_lead_that_fails_a_round_ends_the_rounds_with_what_the_run_has() -> None:
    def lead(round: int, text: str) -> list[dict[str, Any]]:
        if round == 1:
            return [_subtask("s1", "look")]
        # an id used before (which the schema allows too, for a dependency), dangling
        return [_subtask("s2", "again"), _subtask("s2", "y", "s1")]

    hive = Hive(lead)
    result = await hive.executor(3, plan_attempts=2).run("Study bees.")
    assert result.status == "ok"
    assert result.answer_text  # the first round's results were aggregated
    assert result.rounds_ended == "lead_failed"
    error = result.rounds[-1].error or ""
    assert "'s2' is used twice" in error
    assert len(hive.lead_messages) == 3  # round 2 asked twice, the problems the second time
    assert "The plan is invalid" in hive.lead_messages[2]

    strict = Hive(lead)
    with pytest.raises(RunFailed, match="the lead failed to plan round 2") as caught:
        await strict.executor(3, plan_attempts=1, failure="fail_fast").run("Study bees.")
    assert caught.value.partial is not None
    assert caught.value.partial.subtasks["s1"].ok


async def test_an_invalid_round_costs_the_lead_at_most_plan_attempts_answers() -> None:
    def lead(round: int, text: str) -> list[dict[str, Any]]:
        if len(hive.lead_messages) == 1:  # its first answer: round 1
            return [_subtask("s1", "look")]
        return [{"id": "s2", "role": "nobody", "instruction": "go"}]  # fails the schema

    hive = Hive(lead)
    result = await hive.executor(3, plan_attempts=3).run("Study bees.")
    assert result.rounds_ended == "lead_failed"
    assert "after 3 attempts" in (result.rounds[-1].error or "")
    # One answer for round 1, three for round 2: not 3 × (1 + the lead's output_retries).
    assert len(hive.lead_messages) == 1 + 3


async def test_a_lead_whose_model_cannot_be_reached_ends_the_rounds_with_that_error() -> None:
    def lead(round: int, text: str) -> list[dict[str, Any]]:
        if round == 1:
            return [_subtask("s1", "look")]
        raise ModelConnectionError("Connection refused", base_url="http://127.0.0.1:9/v1")

    hive = Hive(lead)
    result = await hive.executor(3, plan_attempts=3).run("Study bees.")
    assert result.status == "ok"  # the first round's results, aggregated
    assert result.rounds_ended == "lead_failed"
    error = result.rounds[-1].error or ""
    assert error.startswith("ModelConnectionError: cannot reach the model endpoint")
    assert "invalid plan" not in error
    assert len(hive.lead_messages) == 2  # round 2 was asked once: plan attempts do not retry it

    strict = Hive(lead)
    with pytest.raises(RunFailed, match="cannot reach the model endpoint"):
        await strict.executor(3, failure="fail_fast").run("Study bees.")


async def test_a_run_cut_off_mid_round_resumes_in_that_round(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"

    def lead(round: int, text: str) -> list[dict[str, Any]]:
        if round == 1:
            return [_subtask("s1", "look"), _subtask("s2", "look again")]
        if round == 2:
            return [_subtask("s3", "hold on, then compare", "s1"), _subtask("s4", "quick")]
        return [_subtask("s5", "wrap up", "s2", "s3")] if round == 3 else []

    first = Hive(lead)
    first.gate = anyio.Event()  # c waits: the run is cancelled in the middle of round 2
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: first.executor(4, db).run("Study bees.", run_id="r1"))
        with anyio.fail_after(10):
            await first.holding.wait()
            await finished_in_store(db, "r1", "s4")  # d's result
        tg.cancel_scope.cancel()
    stored = await RunStore(db).load("r1")
    assert stored is not None
    assert stored.status == "interrupted"
    assert stored.plan is not None
    assert '"s3"' in stored.plan

    second = Hive(lead)
    result = await second.executor(4, db).run("Study bees.", run_id="r1")
    assert result.status == "ok"
    # only s3, cut off, ran again; s1, s2 (round 1) and s4 (round 2) stood as they were
    assert [w for w in second.worked if not w.startswith("wrap")] == ["hold on, then compare"]
    # the lead was not asked for round 2 again: first for round 3, then for round 4
    assert [re.findall(r"Planning round (\d)", m) for m in second.lead_messages] == [["3"], ["4"]]
    assert [(r.round, r.added) for r in result.rounds] == [
        (1, ("s1", "s2")), (2, ("s3", "s4")), (3, ("s5",)), (4, ()),
    ]  # fmt: skip
    assert result.rounds_ended == "done"
    # the timeline shows each round's planning before its subtasks
    spans = RunStore(db).spans("r1")
    timeline = build_timeline(spans, result.plan.subtasks)
    assert [(r.name, r.round) for r in timeline.rows] == [
        ("plan", 1), ("s1", 1), ("s2", 1), ("round 2", 2), ("s3", 2), ("s4", 2),
        ("round 3", 3), ("s5", 3), ("round 4", 4), ("aggregate", 4),
    ]  # fmt: skip


async def test_a_run_given_its_subtasks_resumes_without_asking_the_lead(tmp_path: Path) -> None:
    # Given subtasks=, a run plans once, whatever its planner: resumed without them (as
    # `honeycomb resume` does), it must not turn into a run planned in rounds.
    db = tmp_path / "runs.db"
    given = [Subtask(id="a", role="researcher", instruction="look"),
             Subtask(id="b", role="researcher", instruction="hold on")]  # fmt: skip

    def lead(round: int, text: str) -> list[dict[str, Any]]:
        return [_subtask("more", "something the lead would add")]

    first = Hive(lead)
    first.gate = anyio.Event()  # b waits: the run is cancelled before it ends
    async with anyio.create_task_group() as tg:
        run = first.executor(3, db).run
        tg.start_soon(lambda: run("Study bees.", subtasks=given, run_id="r1"))
        with anyio.fail_after(10):
            await first.holding.wait()
        tg.cancel_scope.cancel()
    assert first.lead_messages == []

    second = Hive(lead)
    result = await second.executor(3, db).run("Study bees.", run_id="r1")
    assert result.status == "ok"
    assert second.lead_messages == [], "the resumed run asked the lead for more rounds"
    assert list(result.subtasks) == ["a", "b"]
    assert [(r.round, r.added) for r in result.rounds] == [(1, ("a", "b"))]


def test_the_offline_lead_follows_up_a_result_that_asks_for_more() -> None:
    results = [
        ResultEntry(
            id="r1", role="researcher", ok=True, text="Bees dance. Range needs more study."
        ),
        ResultEntry(id="r2", role="researcher", ok=True, text="Brood is kept at 35 C."),
        ResultEntry(id="r3", role="writer", ok=False, text="failed: more research is needed"),
    ]
    text = follow_up_task("Task: t", results, round=2, rounds=3, room=5)
    plan = follow_up_for(text)
    [added] = plan.subtasks  # r2 asks for nothing, r3 failed
    assert (added.id, added.role, added.depends_on, added.round) == (
        "r1.more", "researcher", ("r1",), 2,
    )  # fmt: skip
    assert added.instruction == "Follow up on r1: Range needs more study."
    # a follow-up is not followed up again, and nothing asking: the lead is done
    again = [*results, ResultEntry(id="r1.more", role="researcher", ok=True, text="Needs more.")]
    assert follow_up_for(follow_up_task("Task: t", again, round=3, rounds=3, room=5)).subtasks == ()


def test_the_critical_path_adds_up_the_rounds_which_run_one_after_another() -> None:
    plan = Plan(
        subtasks=(
            Subtask(id="a", role="r", instruction="i"),
            Subtask(id="b", role="r", instruction="i"),
            Subtask(id="c", role="r", instruction="i", round=2),  # independent, but after a, b
            Subtask(id="d", role="r", instruction="i", depends_on=("a", "c"), round=2),
        )
    )
    durations = {"a": 1.0, "b": 3.0, "c": 2.0, "d": 1.0}
    # round 1 ends with b (3 s); in round 2, c then d (3 s)
    assert critical_path(plan, durations) == pytest.approx(6.0)
    single = Plan(subtasks=plan.subtasks[:2])
    assert critical_path(single, durations) == pytest.approx(3.0)


def test_the_timeline_s_critical_chain_goes_through_every_round() -> None:
    subtasks = [
        Subtask(id="a", role="r", instruction="i"),
        Subtask(id="b", role="r", instruction="i", round=2),  # after a, though independent
    ]
    spans = [
        Span(span_id="1", parent_id=None, kind="run", name="t", start=0.0, end=6.0),
        Span(span_id="2", parent_id="1", kind="worker", name="a", start=0.0, end=3.0, worker="a"),
        Span(span_id="3", parent_id="1", kind="plan", name="round 2", start=3.0, end=4.0),
        Span(span_id="4", parent_id="1", kind="worker", name="b", start=4.0, end=6.0, worker="b"),
    ]
    timeline = build_timeline(spans, subtasks)
    assert timeline.critical_path == ("a", "b")
    assert timeline.critical_path_s == pytest.approx(6.0)  # a, round 2's planning, b


def test_a_plans_rounds_are_its_subtasks_grouped_in_order() -> None:
    subtasks = [Subtask(id=f"s{i}", role="worker", instruction="x", round=1 + i // 3)
                for i in range(7)]  # fmt: skip
    assert rounds_of(Plan(subtasks=tuple(subtasks))) == [
        PlanRound(round=1, added=("s0", "s1", "s2")),
        PlanRound(round=2, added=("s3", "s4", "s5")),
        PlanRound(round=3, added=("s6",)),
    ]


def test_reading_a_plans_rounds_takes_time_in_proportion_to_its_subtasks() -> None:
    """A run reads its rounds from its plan (10,000 subtasks in the benchmark): sixteen
    times the subtasks take about sixteen times the processor time (linear), far from
    the 256 times of copying a round's ids for each subtask (see cpu_growth)."""

    def reading(count: int) -> Callable[[], object]:
        plan = Plan(subtasks=tuple(
            Subtask(id=f"s{i}", role="worker", instruction="x") for i in range(count)
        ))  # fmt: skip
        (only,) = rounds_of(plan)
        assert len(only.added) == count
        return lambda: rounds_of(plan)

    assert cpu_growth(reading, 1000) < LINEAR_BOUND


def test_the_offline_lead_follows_up_a_finding_by_its_heading_without_the_offline_marker() -> None:
    asking = "[offline simulation] Pesticides and forage — How long harm lasts needs more research."
    results = [ResultEntry(id="r3", role="researcher", ok=True, text=asking)]
    [added] = follow_up_for(follow_up_task("Task: t", results, round=2, rounds=3, room=5)).subtasks
    assert added.instruction == (
        "Pesticides and forage: follow up on r3, which says how long harm lasts needs more "
        "research."
    )


def test_the_rounds_demo_says_each_heading_once_and_the_follow_up_under_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--rounds", "--plain", "--latency", "0", "--no-store"]) == 0
    answer = capsys.readouterr().out.split("\nAnswer:\n", 1)[1].split("\n\nwall time")[0]
    headings = re.findall(r"(?:^|\. )([A-Z][\w ]+) — ", answer, re.M)
    assert len(headings) == len(set(headings)) >= 3, headings
    follow_up = "Neonicotinoid pesticides threaten colonies even in small doses"
    (paragraph,) = [p for p in answer.split("\n\n") if follow_up in p]
    assert paragraph.startswith("Pesticides and forage — How long pesticide harm lasts")
    assert "The waggle dance" not in paragraph  # the follow-up searched for its topic
    assert "It holds the results of" not in answer  # said of what a worker sends on
