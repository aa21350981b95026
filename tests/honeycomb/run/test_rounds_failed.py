"""A lead planning in rounds reads which subtasks failed, and is not let add one that
depends on any of them: it would be skipped, never run (a lead of one's own neither:
its round is refused). A lead that cannot be asked
(its context budget cannot hold the results) fails its round, as itself; one sent back
with the problems of its round is sent the results fitted beside them."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import pytest

from honeycomb import Compaction, Executor, Role
from honeycomb.planning import Plan, RolePlanner, RunContext
from honeycomb.run.plan import plan_type
from honeycomb.run.result import SubtaskResult
from honeycomb.testing import FunctionModel
from runtime import ContextBudgetTooSmall, ModelRequest, UserMessage


def _subtask(sid: str, instruction: str, *after: str) -> dict[str, object]:
    return {"id": sid, "role": "researcher", "instruction": instruction, "depends_on": after}


async def test_a_round_that_depends_on_a_failed_subtask_is_sent_back_saying_why() -> None:
    told: list[str] = []

    async def answer(request: ModelRequest) -> str:
        users = [m.content for m in request.messages if isinstance(m, UserMessage)]
        if request.output is not None and request.output.name == "Plan":
            told.append(users[-1])
            found = re.search(r"Planning round (\d+)", users[0])
            if found is None:
                return json.dumps({"subtasks": [_subtask("s1", "fail"), _subtask("s2", "look")]})
            if found.group(1) == "3":
                return json.dumps({"subtasks": []})
            if len(told) == 2:  # its first answer for round 2: a retry of s1, after it
                return json.dumps({"subtasks": [_subtask("s3", "retry s1", "s1", "s2")]})
            return json.dumps({"subtasks": [_subtask("s3", "retry s1's work", "s2")]})
        if users[0].startswith("fail"):
            raise ValueError("the researcher broke")
        return "found it"

    executor = Executor(
        [Role(name="lead"), Role(name="researcher")],
        FunctionModel(answer),
        planner=RolePlanner("lead", rounds=3),
        aggregator="concat",
    )
    result = await executor.run("Study bees.")

    assert "may depend on any subtask above not marked FAILED" in told[1]
    assert "it depends on 's1', which did not succeed" in told[2]  # sent back, saying why
    assert result.subtasks["s3"].status == "ok"  # run, not skipped
    assert result.subtasks["s3"].subtask.depends_on == ("s2",)
    assert result.rounds_ended == "done"


class _Lead:
    """A lead of one's own: round 1 gives s1 (which fails) and s2; round 2 adds s3,
    which depends on s1, and s4; round 3 is done."""

    rounds = 3

    def __init__(self) -> None:
        self.asked: list[int] = []

    async def plan(self, task: str, context: RunContext) -> Plan:
        return Plan.of([_subtask("s1", "fail"), _subtask("s2", "look")])

    async def follow_up(
        self,
        task: str,
        plan: Plan,
        results: Sequence[SubtaskResult],
        *,
        round: int,
        room: int,
        context: RunContext,
    ) -> Plan:
        self.asked.append(round)
        if round > 2:
            return Plan(subtasks=())
        return Plan.of([_subtask("s3", "use s1", "s1"), _subtask("s4", "look again")])


async def test_a_round_of_your_own_lead_that_depends_on_a_failed_subtask_is_refused() -> None:
    worked: list[str] = []

    async def answer(request: ModelRequest) -> str:
        users = [m.content for m in request.messages if isinstance(m, UserMessage)]
        worked.append(users[0].split("\n", 1)[0])
        if users[0].startswith("fail"):
            raise ValueError("the researcher broke")
        return "found it"

    lead = _Lead()
    executor = Executor(
        [Role(name="researcher")], FunctionModel(answer), planner=lead, aggregator="concat"
    )
    result = await executor.run("Study bees.")

    # Refused as the run's lead would have been (not run, not skipped in silence): the
    # round's error names the subtask and what it depends on that failed.
    assert result.rounds_ended == "lead_failed"
    error = result.rounds[-1].error or ""
    assert error.startswith("PlanError: invalid plan: subtask 's3': it depends on 's1', which")
    assert "did not succeed" in error
    assert list(result.subtasks) == ["s1", "s2"]
    assert sorted(worked) == ["fail", "look"]
    assert lead.asked == [2]
    assert result.status == "partial"  # s2's result, aggregated


def test_a_later_rounds_schema_leaves_out_the_subtasks_that_failed() -> None:
    schema = plan_type(("researcher",), 2, 0, ("s1", "s2"), frozenset({"s1"}))
    dependency = schema.model_json_schema()["$defs"]["Subtask"]["properties"]["depends_on"]
    assert dependency["items"]["enum"] == ["s2", "s3", "s4"]  # a grammar cannot write s1


async def test_a_lead_whose_budget_cannot_hold_its_round_fails_the_round_asking_nothing() -> None:
    asked: list[str] = []
    instruction = "look " * 199  # what the lead is shown it asked, which is never cut

    async def answer(request: ModelRequest) -> str:
        if request.output is not None and request.output.name == "Plan":
            asked.append("lead")
            return json.dumps({"subtasks": [_subtask(f"s{i}", instruction) for i in range(1, 9)]})
        return "a long finding " * 1000  # cut to fit: the results alone would fit

    lead = Role(name="lead", compaction=Compaction(budget_tokens=1500))
    executor = Executor(
        [lead, Role(name="researcher")],
        FunctionModel(answer),
        planner=RolePlanner("lead", rounds=3),
        aggregator="concat",
    )
    result = await executor.run("Study bees.")

    assert result.status == "ok"  # the first round's results, aggregated
    assert result.rounds_ended == "lead_failed"
    error = result.rounds[-1].error or ""
    assert error.startswith("ContextBudgetTooSmall: worker lead's context budget")
    assert "invalid plan" not in error  # not asked three times for a plan it never wrote
    assert asked == ["lead"]  # round 1 only: round 2's prompt was never sent

    first = Executor(
        [lead, Role(name="researcher")], FunctionModel(answer), planner=RolePlanner("lead")
    )
    with pytest.raises(ContextBudgetTooSmall):  # a first plan's: the run's error, as itself
        await first.run("Study bees. " * 1000)


async def test_a_round_sent_back_with_its_problems_fits_the_leads_budget_beside_them() -> None:
    """The results were cut to fill the lead's budget: its round sent back for a cycle
    is sent them cut further, beside the problems, not over the budget."""
    budget = 2000
    sent: list[str] = []

    async def answer(request: ModelRequest) -> str:
        if request.output is None or request.output.name != "Plan":
            return "a long finding " * 1000  # cut to fit the lead
        text = str(request.messages[-1].content)
        sent.append(text)
        if "Planning round 2" not in text:
            return json.dumps({"subtasks": [_subtask(f"s{i}", f"q{i}") for i in (1, 2, 3)]})
        if "The plan is invalid" not in text:  # a cycle: the run sends it back
            return json.dumps({"subtasks": [_subtask("s4", "a", "s5"), _subtask("s5", "b", "s4")]})
        return json.dumps({"subtasks": []})

    lead = Role(name="lead", compaction=Compaction(budget_tokens=budget))
    executor = Executor(
        [lead, Role(name="researcher")],
        FunctionModel(answer),
        planner=RolePlanner("lead", rounds=2),
        aggregator="concat",
    )
    result = await executor.run("Study bees.")

    assert result.rounds_ended == "done", result.rounds[-1].error
    first, again = sent[1:]
    assert "cycle" in again.split("The plan is invalid", 1)[1]
    assert "[cut here to fit" in first
    assert "[cut here to fit" in again
