"""A call of a hive called as a tool that needs approval, in a run with no approver:
it cannot wait (the sub-run keeps no store), and its denial says so, and what to
attach, whether the calling run keeps a store or not."""

from __future__ import annotations

from pathlib import Path

from honeycomb import Executor, Role, tool
from honeycomb.run.agents import CANNOT_WAIT
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from runtime import AssistantMessage, ModelRequest
from runtime.testing import call
from tests.support.model_requests import Answer, observations

ONE = [{"id": "s1", "role": "lead", "instruction": "pay the team"}]


def _calling(paid: list[str], store: Path | None) -> Executor:
    """A lead that calls the hive ``payroll``, whose clerk's ``pay`` needs approval."""

    @tool(approval=True)
    def pay(to: str) -> str:
        """Pay someone."""
        paid.append(to)
        return f"paid {to}"

    def clerk(request: ModelRequest) -> Answer:
        seen = observations(request)
        if seen:
            return f"clerk: {seen[0].content}"
        return AssistantMessage(tool_calls=(call("pay", {"to": "bob"}),))

    def lead(request: ModelRequest) -> Answer:
        seen = observations(request)
        if not seen:
            return AssistantMessage(tool_calls=(call("payroll", {"instruction": "pay bob"}),))
        return "lead: " + seen[0].content

    payroll = Executor(
        [Role(name="clerk", tools=("pay",))], FunctionModel(clerk), tools=[pay],
        aggregator="concat", planner=lambda task: [("clerk", task)],
    )  # fmt: skip
    return Executor(
        [Role(name="lead", tools=("payroll",))], FunctionModel(lead),
        tools=[payroll.as_tool("payroll")], aggregator="concat", store=store,
    )  # fmt: skip


async def test_a_sub_hives_call_in_a_run_with_a_store_is_denied_for_the_true_reason(
    db: Path,
) -> None:
    paid: list[str] = []
    result = await _calling(paid, db).run("t", subtasks=ONE, run_id="r1")
    assert result.status == "ok"
    said = result.subtasks["s1"].text
    assert said == f"lead: ## s1 (clerk)\nclerk: denied: {CANNOT_WAIT}"
    assert "no store to wait in" not in said  # the calling run has one
    assert "a hive called as a tool cannot wait for a decision" in said
    assert "Attach an approver to the calling run (Executor(approver=...)" in said
    assert paid == []
    assert await RunStore(db).approvals_of("r1") == []  # nothing waits that never will


async def test_a_sub_hives_call_in_a_run_without_a_store_is_denied_so_too() -> None:
    paid: list[str] = []
    result = await _calling(paid, None).run("t", subtasks=ONE)
    assert result.subtasks["s1"].text == f"lead: ## s1 (clerk)\nclerk: denied: {CANNOT_WAIT}"
    assert paid == []
