"""Limits and nesting: the tool and model concurrency limits, budgets, and the tools
that run nested work (``agent:ROLE``, ``hive:PATH``)."""

from __future__ import annotations

from msgspec.structs import replace

from honeycomb import BudgetExceeded, Budgets
from tests.interactions.brain import Call
from tests.interactions.drive import Outcome
from tests.interactions.features.base import Env, Feature, top_level, top_observations
from tests.interactions.hive import Hive
from tests.interactions.invariants import Report
from tests.interactions.ledger import Span, overlap

__all__ = ["AgentTools", "Budget", "HiveTools", "ModelLimit", "ToolLimit", "WallTime"]


class ToolLimit(Feature):
    name = "tool_limit"
    title = "tool concurrency limit"
    about = "`Policy(tool_concurrency=2)`; each worker calls a slow parallel-safe tool 3 times"
    promises = "at most 2 of the subtask workers' tool calls in flight at once"

    def apply(self, hive: Hive, env: Env) -> None:
        hive.policy["tool_concurrency"] = 2
        hive.tools.add("probe")
        hive.add_calls(0, *(Call("probe", {"text": f"{{w}} {i}"}) for i in range(3)))

    def check(self, outcome: Outcome, report: Report) -> None:
        calls = outcome.hive.ledger.tool_calls()
        for life in {c["life"] for c in calls}:
            spans = [
                Span(c["start"], c["end"], c["call"])
                for c in calls
                if c["life"] == life and c["tool"] == "probe" and top_level(c["worker"])
            ]
            report.expect(
                overlap(spans) <= 2,
                "tool limit",
                f"{overlap(spans)} probe calls in flight at once in life {life}",
            )


class ModelLimit(Feature):
    name = "model_limit"
    title = "model concurrency limit"
    about = "`Policy(model_concurrency=1)`; every model call yields to the event loop"
    promises = "at most 1 of the run's model calls in flight at once"

    def apply(self, hive: Hive, env: Env) -> None:
        hive.policy["model_concurrency"] = 1
        hive.pause = True

    def check(self, outcome: Outcome, report: Report) -> None:
        calls = [c for c in outcome.hive.ledger.model_calls() if c["scope"] == "run"]
        for life in {c["life"] for c in calls}:
            spans = [
                Span(c["start"], c["end"], c["conversation"]) for c in calls if c["life"] == life
            ]
            report.expect(
                overlap(spans) <= 1,
                "model limit",
                f"{overlap(spans)} model calls in flight at once in life {life}",
            )


class Budget(Feature):
    name = "budgets"
    title = "budgets"
    about = "`Budgets(model_calls=5)`: fewer than any cell's run needs"
    promises = "the run stops with `BudgetExceeded` (its partial result `over_budget`)"
    allowed = (BudgetExceeded,)

    def apply(self, hive: Hive, env: Env) -> None:
        hive.policy["budgets"] = replace(_budgets(hive), model_calls=5)

    def check(self, outcome: Outcome, report: Report) -> None:
        last = outcome.last
        if last.said is not None:  # it ended in a child process (before its crash)
            raised, partial = last.said == "raised BudgetExceeded", last.said_partial
        else:
            raised = isinstance(last.error, BudgetExceeded)
            partial = outcome.result.status if outcome.result is not None else None
        report.expect(
            raised and partial == "over_budget",
            "budget",
            f"a run that needs more than 5 model calls ended {last.status}",
        )


WALL_S = 0.5
"""The wall-time budget of a cell's run."""

STOP_GRACE_S = 5.0
"""How long past its wall time a run may take to stop, on a busy machine."""


class WallTime(Feature):
    name = "wall_time"
    title = "a wall-time budget"
    about = (
        f"`Budgets(wall_time_s={WALL_S})`; every working role's second turn calls `wait`, "
        "which takes longer than the run has"
    )
    promises = (
        "a run whose worker waited stops at its wall time, with `BudgetExceeded` (its "
        f"partial result `over_budget`), within {STOP_GRACE_S:g}s past it"
    )
    allowed = (BudgetExceeded,)

    def apply(self, hive: Hive, env: Env) -> None:
        hive.policy["budgets"] = replace(_budgets(hive), wall_time_s=WALL_S)
        hive.tools.add("wait")
        hive.add_calls(1, Call("wait"))

    def check(self, outcome: Outcome, report: Report) -> None:
        for life in outcome.lives:
            error = life.error
            if isinstance(error, BudgetExceeded) and error.limit == "wall_time_s":
                report.expect(
                    float(error.used) <= WALL_S + STOP_GRACE_S,
                    "wall time",
                    f"life {life.number} stopped {error.used}s into a {WALL_S}s wall time",
                )
        if not outcome.hive.ledger.tool_starts("wait") or outcome.hive.crash:
            return  # no worker got there (another feature stopped or refused it first)
        last = outcome.last
        stopped = isinstance(last.error, BudgetExceeded) and last.partial is not None
        report.expect(
            stopped and last.partial is not None and last.partial.status == "over_budget",
            "wall time",
            f"a run whose worker waited past its wall time ended {last.status}",
        )


def _budgets(hive: Hive) -> Budgets:
    """The budgets another feature of the cell gave its run (none: no limit)."""
    made = hive.policy.get("budgets")
    return made if isinstance(made, Budgets) else Budgets()


class AgentTools(Feature):
    name = "agent_tools"
    title = "`agent:` tools"
    about = (
        "the bee calls `agent:helper` twice in one turn; the helper is a working role "
        "(it makes the features' calls too)"
    )
    promises = "every call of the helper is answered by a nested worker that finished"

    def apply(self, hive: Hive, env: Env) -> None:
        hive.working.append("helper")
        hive.working_roles["helper"] = "Helps with a part."
        hive.bee_tools.add("agent:helper")
        hive.add_calls(
            0,
            Call("helper", {"instruction": "Help with part {n}."}),
            Call("helper", {"instruction": "Check part {n}."}),
            bee_only=True,
        )

    def check(self, outcome: Outcome, report: Report) -> None:
        _answered(outcome, report, "helper", "helper done", "agent tools answer")


class HiveTools(Feature):
    name = "hive_tools"
    title = "`hive:` tools"
    about = (
        "the bee calls a hive as its tool `facts` twice in one turn (`Executor.as_tool`, "
        "what `hive:PATH` makes): a sub-run with its planner, a worker and concatenation"
    )
    promises = "every call of the hive tool is answered by its sub-run's answer"

    def apply(self, hive: Hive, env: Env) -> None:
        hive.sub_hive = True
        hive.bee_tools.add("facts")
        hive.add_calls(
            0,
            Call("facts", {"instruction": "Facts on part {n}."}),
            Call("facts", {"instruction": "More facts on part {n}."}),
            bee_only=True,
        )

    def check(self, outcome: Outcome, report: Report) -> None:
        _answered(outcome, report, "facts", "fact done", "hive tools answer")


def _answered(outcome: Outcome, report: Report, tool: str, answer: str, invariant: str) -> None:
    """Every call of ``tool`` by a subtask worker that finished is answered by the
    nested work it started (its answer holds ``answer``)."""
    for sid, message in top_observations(outcome, tool):
        report.expect(
            message.status == "ok" and answer in message.content,
            invariant,
            f"{sid}'s call of {tool}: {message.status}: {message.content[:300]}",
        )
