"""The command line with many features of one run at once (parallel workers, nested
agents and hives as tools, approvals, guards, budgets, a run store, streaming,
secrets): what it shows and says where they meet."""

from __future__ import annotations

import asyncio
import io
import json

from rich.console import Console

from honeycomb import Approvals, Executor, Role, tool
from honeycomb.cli.view import LiveView
from honeycomb.testing import FunctionModel
from runtime import AssistantMessage, ModelRequest
from runtime.testing import call
from runtime.tools.approvals import ApprovalRequest, Decision
from tests.support.model_requests import Answer, observations, role_of

LIMIT_S = 30.0
"""No test here waits longer than this for its run: a hang fails the test."""


@tool(side_effects=True, approval=True)
async def publish(text: str) -> str:
    """Publish a text."""
    return f"published {text}"


def _row(drawn: str, subtask: str) -> str:
    (row,) = [line for line in drawn.splitlines() if line.strip("│ ").startswith(f"{subtask} ")]
    return row


async def test_the_live_view_marks_the_subtask_whose_nested_worker_waits_for_a_person() -> None:
    """Two leads run at once; only the second calls a nested worker whose call is
    asked about on the terminal. While it is asked, the second lead's row says it
    needs approval (before, no row did: the view looked for a row named after the
    nested worker, ``s2/call_N``), and the first lead's does not."""

    def answer(request: ModelRequest) -> Answer:
        role, seen = role_of(request), observations(request)
        task = str(request.messages[1].content)
        if (role == "lead" and task == "quiet") or seen:
            return f"{role} done"
        if role == "lead":
            return AssistantMessage(tool_calls=(call("writer", {"instruction": "publish"}),))
        return AssistantMessage(tool_calls=(call("publish", {"text": "bees"}),))

    out = io.StringIO()
    view = LiveView(Console(file=out, force_terminal=True, width=100, color_system=None), "h")
    drawn: list[str] = []

    async def person(request: ApprovalRequest) -> Decision:
        frame = io.StringIO()
        Console(file=frame, width=100, color_system=None).print(view)
        drawn.append(frame.getvalue())
        return Decision.approved()

    roles = [
        Role(name="lead", tools=("agent:writer",)),
        Role(name="writer", tools=("publish",), approvals=Approvals(tools=("publish",))),
    ]
    executor = Executor(
        roles, FunctionModel(answer), tools=[publish], approver=view.asked(person),
        aggregator="concat",
    )  # fmt: skip
    with view:
        async with asyncio.timeout(LIMIT_S):
            async with executor.stream(
                "t", subtasks=[("lead", "quiet"), ("lead", "delegate")]
            ) as events:
                async for event in events:
                    view.handle(event)
    assert events.result is not None
    assert events.result.status == "ok"
    (frame,) = drawn
    assert "needs approval" in _row(frame, "s2")
    assert "needs approval" not in _row(frame, "s1")


async def test_the_live_view_marks_the_subtask_whose_hive_tool_waits_for_a_person() -> None:
    """As above, the second lead calling a hive as a tool whose worker's call is asked
    about: its row needs approval, not the first lead's (the sub-run's worker is
    ``s1`` of its own run: before, it was asked about as ``s1``, marking the wrong row)."""

    def answer(request: ModelRequest) -> Answer:
        role, seen = role_of(request), observations(request)
        task = str(request.messages[1].content)
        if role == "planner":
            return json.dumps({"subtasks": [{"id": "s1", "role": "writer", "instruction": "go"}]})
        if (role == "lead" and task == "quiet") or seen:
            return f"{role} done"
        if role == "lead":
            return AssistantMessage(tool_calls=(call("desk", {"instruction": "publish"}),))
        return AssistantMessage(tool_calls=(call("publish", {"text": "bees"}),))

    out = io.StringIO()
    view = LiveView(Console(file=out, force_terminal=True, width=100, color_system=None), "h")
    drawn: list[str] = []

    async def person(request: ApprovalRequest) -> Decision:
        frame = io.StringIO()
        Console(file=frame, width=100, color_system=None).print(view)
        drawn.append(frame.getvalue())
        return Decision.approved()

    model = FunctionModel(answer)
    desk = Executor(
        [Role(name="planner"), Role(name="writer", tools=("publish",))],
        model, tools=[publish], aggregator="concat",
    )  # fmt: skip
    executor = Executor(
        [Role(name="lead", tools=("desk",))], model, tools=[desk.as_tool("desk")],
        approver=view.asked(person), aggregator="concat",
    )  # fmt: skip
    with view:
        async with asyncio.timeout(LIMIT_S):
            async with executor.stream(
                "t", subtasks=[("lead", "quiet"), ("lead", "delegate")]
            ) as events:
                async for event in events:
                    view.handle(event)
    assert events.result is not None
    assert events.result.status == "ok"
    (frame,) = drawn
    assert "needs approval" in _row(frame, "s2")
    assert "needs approval" not in _row(frame, "s1")
