"""How the views of a stored run (``honeycomb trace``, ``honeycomb serve``'s page) say
what each worker is at."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from honeycomb import Approvals, BudgetExceeded, Budgets, Executor, Policy, Role, RunFailed, tool
from honeycomb.run.shown import stored_timeline, worker_statuses
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from runtime import AssistantMessage, ModelRequest
from runtime.testing import call
from tests.support.model_requests import observations, role_of


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


async def test_the_workers_a_budget_stopped_are_shown_over_budget_as_the_result_says(
    tmp_path: Path,
) -> None:
    """A run a budget stopped has its stopped workers ``over_budget`` in its result, its
    events and its spans, the nested worker of one too; every view of the stored run
    said ``cancelled``."""
    store = RunStore(tmp_path / "runs.db")

    @tool
    def look(query: str) -> str:
        """Look something up."""
        return query

    def answer(request: ModelRequest) -> AssistantMessage | str:
        if str(request.messages[0].content).startswith("You are the lead"):
            return AssistantMessage(tool_calls=(call("digger", {"instruction": "dig"}, id="c1"),))
        return AssistantMessage(tool_calls=(call("look", {"query": "more"}),))  # never done

    executor = Executor(
        [Role(name="lead", tools=("agent:digger",)), Role(name="digger", tools=("look",))],
        FunctionModel(answer), tools=[look], store=store, aggregator="concat",
        policy=Policy(budgets=Budgets(model_calls=4)),
    )  # fmt: skip
    plan = [{"id": "s1", "role": "lead", "instruction": "x"}]
    with pytest.raises(BudgetExceeded) as stopped:
        await executor.run("Dig", subtasks=plan, run_id="r1")
    assert stopped.value.partial is not None
    assert stopped.value.partial.subtasks["s1"].status == "over_budget"
    stored = await store.load("r1")
    assert stored is not None
    assert worker_statuses(stored) == {"s1": "over_budget", "s1/c1": "over_budget"}
    timeline = stored_timeline(stored, store.spans("r1"))
    assert {row.name: row.status for row in timeline.workers} == worker_statuses(stored)


async def test_an_aggregators_calls_under_way_are_on_the_aggregate_row(tmp_path: Path) -> None:
    """While a stored run's aggregator role worked, its live timeline (``honeycomb
    trace``, the page of ``honeycomb serve``) drew its calls on a worker row named
    after its role, and its nested worker's as a row of no caller: its phase's and
    its nested worker's spans are kept as they end. They are on the rows the run ends
    with: the aggregate row, running, and the nested worker's after it."""
    store = RunStore(tmp_path / "runs.db")
    reached, release = asyncio.Event(), asyncio.Event()

    @tool
    async def look(query: str) -> str:
        """Look something up."""
        reached.set()
        await release.wait()
        return query

    def answer(request: ModelRequest) -> AssistantMessage | str:
        role, seen = role_of(request), observations(request)
        if role == "merger" and not seen:
            return AssistantMessage(tool_calls=(call("clerk", {"instruction": "x"}, id="c1"),))
        if role == "clerk" and not seen:
            return AssistantMessage(tool_calls=(call("look", {"query": "y"}, id="k1"),))
        return f"done by {role}"

    roles = [
        Role(name="w"),
        Role(name="clerk", tools=("look",)),
        Role(name="merger", tools=("agent:clerk",)),
    ]
    executor = Executor(
        roles, FunctionModel(answer), tools=[look], store=store, aggregator="merger"
    )
    plan = [{"id": "s1", "role": "w", "instruction": "x"}]

    def rows() -> list[tuple[str, str, str | None, int]]:
        timeline = stored_timeline(stored, store.spans("r1"))
        return [(r.name, r.status, r.parent, len(r.bars)) for r in timeline.rows]

    async with asyncio.TaskGroup() as group:
        group.create_task(executor.run("Merge", subtasks=plan, run_id="r1"))
        await reached.wait()
        await store.flush()
        stored = await store.load("r1")
        assert stored is not None
        nested = next(name for name in stored.workers if name.endswith("/c1"))
        assert rows() == [
            ("plan", "ok", None, 0),
            ("s1", "ok", None, 1),
            ("aggregate", "running", None, 1),
            (nested, "running", "aggregate", 1),
        ]
        release.set()
    stored = await store.load("r1")
    assert stored is not None
    assert rows() == [
        ("plan", "ok", None, 0),
        ("s1", "ok", None, 1),
        ("aggregate", "ok", None, 3),
        (nested, "ok", "aggregate", 3),
    ]
