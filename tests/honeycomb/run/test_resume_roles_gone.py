"""A stored run continued by an Executor whose roles changed since its earlier life:
a subtask that finished is kept as it ended, whatever became of its role (renamed, or
taken out of the hive); a subtask still to run needs its role."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from honeycomb import Approvals, Executor, Role, Subtask, ToolMessage, tool
from honeycomb.errors import PlanError
from honeycomb.testing import FunctionModel
from runtime import AssistantMessage, ModelRequest, ToolCall

PLAN = [
    Subtask(id="payer", role="payer", instruction="pay ann"),
    Subtask(id="r0", role="reader", instruction="read the news"),
]


class Team:
    """A payer whose ``pay`` waits for approval, and a reader that answers in
    :class:`~tests.support.role_tools.Summary`; every worker's model call is counted."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def answer(self, request: ModelRequest) -> AssistantMessage | str:
        worker = (request.conversation or "").rsplit("/", 1)[-1]
        self.asked.append(worker)
        if worker != "payer":
            return json.dumps({"title": f"{worker} read it", "points": []})
        if not any(isinstance(m, ToolMessage) for m in request.messages):
            call = ToolCall(id="pay_1", name="pay", arguments=json.dumps({"to": "ann"}))
            return AssistantMessage(tool_calls=(call,))
        return "paid ann"

    def executor(self, db: Path, *, payer: str = "payer", reader: str = "reader") -> Executor:
        async def pay(to: str) -> str:
            """Pay someone."""
            return f"paid {to}"

        roles = [
            Role(name=payer, tools=("pay",), approvals=Approvals(tools=("pay",))),
            Role(name=reader, output_schema="tests.support.role_tools:Summary"),
        ]
        tools = [tool(pay, side_effects=True)]
        return Executor(
            roles, FunctionModel(self.answer), tools=tools, aggregator="concat", store=db
        )


async def waiting_run(team: Team, db: Path) -> None:
    """r0 finishes; the payer waits for its call's approval, which is given."""
    first = team.executor(db)
    waiting = await first.run("pay and read", subtasks=PLAN, run_id="r1")
    assert [(i, s.status) for i, s in waiting.subtasks.items()] == [
        ("payer", "waiting"),
        ("r0", "ok"),
    ]
    await first.decide("r1", "pay_1", approve=True)


async def test_a_finished_subtasks_role_renamed_since_does_not_stop_the_run(
    tmp_path: Path,
) -> None:
    team, db = Team(), tmp_path / "runs.db"
    await waiting_run(team, db)
    asked_before = list(team.asked)
    result = await team.executor(db, reader="news_reader").resume("r1")
    assert result.status == "ok"
    assert team.asked[len(asked_before) :] == ["payer"]  # r0 is not run again
    kept = result.subtasks["r0"]
    assert kept.status == "ok"
    assert kept.worker is not None
    assert kept.worker.output == {"title": "r0 read it", "points": []}  # as kept: its role is gone
    assert "r0 read it" in str(result.answer)
    assert "paid ann" in str(result.answer)


async def test_a_subtask_still_to_run_needs_its_role(tmp_path: Path) -> None:
    team, db = Team(), tmp_path / "runs.db"
    await waiting_run(team, db)
    with pytest.raises(PlanError, match=r"subtask 'payer': unknown role 'payer'") as caught:
        await team.executor(db, payer="cashier").resume("r1")
    partial = caught.value.partial
    assert partial is not None
    assert [(i, s.status) for i, s in partial.subtasks.items()] == [
        ("payer", "cancelled"),
        ("r0", "ok"),
    ]
    # with its roles again, the run goes on
    assert (await team.executor(db).resume("r1")).status == "ok"
