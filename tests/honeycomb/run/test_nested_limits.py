"""Limits and nesting: ``tool_concurrency``, ``model_concurrency`` and exclusive locks
bound the leaf work of a run and of the workers and sub-runs its ``agent:`` and
``hive:`` tools start, and a nested call never waits on what its ancestor holds."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from honeycomb import BudgetExceeded, Budgets, Executor, Policy, Role, tool
from honeycomb.testing import FunctionModel
from runtime import (
    AssistantMessage,
    ModelRequest,
    Tool,
    ToolCall,
    ToolDefinitionError,
)
from runtime.testing import call
from tests.support.concurrency import Overlap
from tests.support.model_requests import Answer, observations, role_of

HARD_TIMEOUT_S = 20.0
"""No test here may take longer: a deadlock fails it instead of hanging the suite."""

ONE = [{"id": "s1", "role": "lead", "instruction": "find out about bees"}]


class InFlight:
    """Counts the calls in flight of the tools it makes, and the most at once."""

    def __init__(self) -> None:
        self.flight = Overlap()

    @property
    def calls(self) -> int:
        return self.flight.total

    @property
    def most(self) -> int:
        return self.flight.peak

    def look(self) -> Tool[..., str]:
        @tool
        async def look(query: str) -> str:
            """Look something up."""
            async with self.flight:
                await anyio.sleep(0.02)
            return f"result for {query}"

        return look


def makes(*calls: ToolCall) -> Callable[[ModelRequest], Answer]:
    """A worker that makes ``calls`` in one turn, then answers with the status of each
    observation (``ok | ok``), or with the first one that is not ok."""

    def answer(request: ModelRequest) -> Answer:
        seen = observations(request)
        if not seen:
            return AssistantMessage(tool_calls=calls)
        failed = [o.content for o in seen if o.status != "ok"]
        return failed[0] if failed else " | ".join(o.status for o in seen)

    return answer


def asks(tool_name: str, arguments: list[dict[str, str]]) -> Callable[[ModelRequest], Answer]:
    """A worker that calls ``tool_name`` once with each of ``arguments``, in one turn."""
    return makes(*(call(tool_name, a) for a in arguments))


def by_role(**answers: Callable[[ModelRequest], Answer]) -> FunctionModel:
    return FunctionModel(lambda request: answers[role_of(request)](request))


def looks(n: int) -> Callable[[ModelRequest], Answer]:
    return asks("look", [{"query": f"q{i}"} for i in range(n)])


def instructions(n: int) -> list[dict[str, str]]:
    return [{"instruction": f"topic {i}"} for i in range(n)]


@pytest.mark.parametrize(("limit", "nested_calls"), [(1, 1), (1, 3), (4, 2), (4, 6)])
async def test_agent_tools_run_under_a_tool_concurrency_limit(
    limit: int, nested_calls: int
) -> None:
    counter = InFlight()
    executor = Executor(
        [
            Role(name="lead", tools=("agent:researcher",)),
            Role(name="researcher", description="Finds things out.", tools=("look",)),
        ],
        by_role(lead=asks("researcher", instructions(nested_calls)), researcher=looks(3)),
        tools=[counter.look()],
        aggregator="concat",
        policy=Policy(tool_concurrency=limit),
    )
    with anyio.fail_after(HARD_TIMEOUT_S):
        result = await executor.run("bees", subtasks=ONE)

    assert result.status == "ok", result.subtasks["s1"].error
    assert result.subtasks["s1"].text == " | ".join(["ok"] * nested_calls)
    assert counter.calls == 3 * nested_calls
    assert counter.most <= limit  # the limit still bounds every leaf call
    if nested_calls * 3 > limit:
        assert counter.most == limit  # and lets that many run at once


async def test_agent_tools_nested_two_deep_under_a_limit_of_one() -> None:
    counter = InFlight()
    executor = Executor(
        [
            Role(name="lead", tools=("agent:manager", "look")),
            Role(name="manager", tools=("agent:researcher",)),
            Role(name="researcher", tools=("look",)),
        ],
        by_role(
            lead=makes(
                call("manager", {"instruction": "a"}),
                call("look", {"query": "lead's own"}),
                call("manager", {"instruction": "b"}),
            ),
            manager=asks("researcher", instructions(2)),
            researcher=looks(2),
        ),
        tools=[counter.look()],
        aggregator="concat",
        policy=Policy(tool_concurrency=1, model_concurrency=1),
    )
    with anyio.fail_after(HARD_TIMEOUT_S):
        result = await executor.run("bees", subtasks=ONE)
    assert result.subtasks["s1"].text == "ok | ok | ok"
    assert counter.calls == 1 + 2 * 2 * 2
    assert counter.most == 1


def sub_hive(counter: InFlight, looks_per_worker: int) -> Executor:
    """A hive of one checker with a ``look`` tool, planned by a splitter function into
    two subtasks."""
    return Executor(
        [Role(name="checker", tools=("look",))],
        by_role(checker=looks(looks_per_worker)),
        tools=[counter.look()],
        planner=lambda task: [
            {"id": "a", "role": "checker", "instruction": task},
            {"id": "b", "role": "checker", "instruction": task},
        ],
        aggregator="concat",
    )


@pytest.mark.parametrize("limit", [1, 2, 3])
async def test_hive_tools_with_as_many_calls_in_flight_as_the_limit(limit: int) -> None:
    counter = InFlight()
    facts = sub_hive(counter, 2).as_tool("facts")
    executor = Executor(
        [Role(name="lead", tools=("facts",))],
        by_role(lead=asks("facts", instructions(limit))),
        tools=[facts],
        aggregator="concat",
        policy=Policy(tool_concurrency=limit),
    )
    with anyio.fail_after(HARD_TIMEOUT_S):
        result = await executor.run("bees", subtasks=ONE)

    assert result.subtasks["s1"].text == " | ".join(["ok"] * limit)
    assert counter.calls == limit * 2 * 2
    assert counter.most == limit  # the sub-runs' leaf calls, bounded by the caller's limit


async def test_a_model_concurrency_limit_of_one_lets_nested_workers_and_sub_runs_think() -> None:
    in_flight: list[int] = []
    most = 0

    async def thinking(request: ModelRequest) -> Answer:
        nonlocal most
        in_flight.append(1)
        most = max(most, len(in_flight))
        try:
            await anyio.sleep(0.005)
            return answers[role_of(request)](request)
        finally:
            in_flight.pop()

    answers: dict[str, Callable[[ModelRequest], Answer]] = {
        "lead": makes(
            call("researcher", {"instruction": "a"}),
            call("facts", {"instruction": "b"}),
        ),
        "researcher": looks(2),
        "checker": looks(1),
    }
    counter = InFlight()
    model = FunctionModel(thinking)
    sub = Executor(
        [Role(name="checker", tools=("look",))],
        model,
        tools=[counter.look()],
        planner=lambda task: [{"id": "c", "role": "checker", "instruction": task}],
        aggregator="concat",
    )
    executor = Executor(
        [
            Role(name="lead", tools=("agent:researcher", "facts")),
            Role(name="researcher", tools=("look",)),
        ],
        model,
        tools=[counter.look(), sub.as_tool("facts")],
        aggregator="concat",
        policy=Policy(model_concurrency=1, tool_concurrency=1),
    )
    with anyio.fail_after(HARD_TIMEOUT_S):
        result = await executor.run("bees", subtasks=ONE)
    assert result.subtasks["s1"].text == "ok | ok"
    assert most == 1
    assert counter.most == 1


async def test_exclusive_calls_of_nested_workers_and_their_caller_never_wait_on_each_other() -> (
    None
):
    inside: list[str] = []
    overlaps: list[int] = []

    @tool(exclusive="ledger")
    async def write(entry: str) -> str:
        """Write an entry."""
        inside.append(entry)
        overlaps.append(len(inside))
        await anyio.sleep(0.01)
        inside.remove(entry)
        return "written"

    executor = Executor(
        [
            Role(name="lead", tools=("agent:researcher", "write")),
            Role(name="researcher", tools=("write",)),
        ],
        by_role(
            lead=makes(
                call("write", {"entry": "lead 1"}),
                call("researcher", {"instruction": "a"}),
                call("researcher", {"instruction": "b"}),
                call("write", {"entry": "lead 2"}),
            ),
            researcher=asks("write", [{"entry": "nested"}]),
        ),
        tools=[write],
        aggregator="concat",
        policy=Policy(tool_concurrency=1),
    )
    with anyio.fail_after(HARD_TIMEOUT_S):
        result = await executor.run("bees", subtasks=ONE)
    assert result.subtasks["s1"].text == "ok | ok | ok | ok"
    assert len(overlaps) == 4
    assert max(overlaps) == 1


@pytest.mark.parametrize("kind", ["agent", "hive"])
async def test_a_budget_a_nested_worker_runs_out_of_stops_the_run(kind: str) -> None:
    # The refusal was the caller's observation, and the run went on and ended ok.
    counter = InFlight()
    sub = Executor(
        [Role(name="researcher", tools=("look",))], by_role(researcher=looks(1)),
        tools=[counter.look()], aggregator="concat",
        planner=lambda task: [("researcher", task)],
    )  # fmt: skip
    tool_name = "researcher" if kind == "agent" else "facts"
    executor = Executor(
        [
            Role(name="lead", tools=("agent:researcher",) if kind == "agent" else ("facts",)),
            Role(name="researcher", description="Finds things out.", tools=("look",)),
        ],
        by_role(lead=asks(tool_name, instructions(1)), researcher=looks(1)),
        tools=[counter.look(), sub.as_tool("facts")],
        aggregator="concat",
        policy=Policy(budgets=Budgets(tool_calls=1)),  # the lead's call, and no more
    )
    with anyio.fail_after(HARD_TIMEOUT_S), pytest.raises(BudgetExceeded) as caught:
        await executor.run("t", subtasks=ONE)
    assert caught.value.limit == "tool_calls"
    assert counter.calls == 0  # the nested worker's call was refused
    assert caught.value.partial is not None
    assert caught.value.partial.subtasks["s1"].status == "over_budget"


def test_a_tool_that_runs_nested_workers_cannot_hold_an_exclusive_lock() -> None:
    async def ask(instruction: str) -> str:
        return instruction

    with pytest.raises(ToolDefinitionError) as caught:
        Tool(ask, exclusive="ledger", nests=True)
    assert "'ask'" in str(caught.value)
    assert "exclusive" in str(caught.value)
