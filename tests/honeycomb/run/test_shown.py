"""How the views of a stored run (``honeycomb trace``, ``honeycomb serve``'s page) say
what each worker is at."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from honeycomb import Approvals, Executor, Policy, Role, RunFailed, tool
from honeycomb.run.shown import stored_timeline, worker_statuses
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from runtime import AssistantMessage, ModelRequest
from runtime.testing import call


@tool(side_effects=True)
async def pay(to: str) -> str:
    """Pay someone."""
    return f"paid {to}"


async def test_a_worker_whose_call_a_failed_run_left_undecided_is_not_shown_waiting(
    tmp_path: Path,
) -> None:
    """A run that failed fast while a worker's call waited for a person ended with the
    call undecided (no decision would be acted on): the worker was cut off, and every
    view says ``cancelled``, not ``waiting`` for a decision nobody may give."""
    store = RunStore(tmp_path / "runs.db")

    async def answer(request: ModelRequest) -> AssistantMessage | str:
        if request.conversation and request.conversation.endswith("/s2"):
            while not await store.approvals_of("r1"):  # noqa: ASYNC110 - a store row has no event
                await asyncio.sleep(0.005)
            raise ValueError("the model broke")
        return AssistantMessage(tool_calls=(call("pay", {"to": "bob"}),))

    payer = Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",)))
    executor = Executor(
        [payer],
        FunctionModel(answer),
        tools=[pay],
        store=store,
        planner=lambda task: [("payer", "pay bob"), ("payer", "think")],
        policy=Policy(failure="fail_fast"),
        aggregator="concat",
    )
    with pytest.raises(RunFailed, match="fail_fast"):
        await executor.run("Pay", run_id="r1")
    stored = await store.load("r1")
    assert stored is not None
    assert stored.status == "failed"
    assert worker_statuses(stored) == {"s1": "cancelled", "s2": "failed"}
    timeline = stored_timeline(stored, store.spans("r1"))
    assert {row.name: row.status for row in timeline.workers} == worker_statuses(stored)
