"""A guard that hangs or raises: the run's wall time cuts one that hangs off and names
it among what was in flight (as it names model calls), and the other workers' results
are kept; one that raises trips as broken (no other answer would pass it), named
before a guard beside it that only refused, a run's own guard as a worker's."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import anyio
import pytest

from honeycomb import (
    BudgetExceeded,
    Budgets,
    Executor,
    GuardCheck,
    GuardrailTripped,
    Guards,
    ModelRequest,
    Policy,
    Role,
    ToolCall,
    tool,
)
from honeycomb.testing import FunctionModel, call

WALL = 0.3
STUCK = threading.Event()


@pytest.fixture(autouse=True)
def _freed() -> Iterator[None]:
    """The thread of a sync guard that hangs is freed as the test ends."""
    STUCK.clear()
    yield
    STUCK.set()


def hangs_in_a_thread(check: GuardCheck) -> None:
    STUCK.wait(30)


async def hangs(check: GuardCheck) -> None:
    await anyio.sleep(30)


def in_flight(caught: pytest.ExceptionInfo[BudgetExceeded]) -> list[str]:
    return sorted(str(c).split(" (")[0] for c in caught.value.in_flight)


@pytest.mark.parametrize(
    ("guards", "named"),
    [
        (Guards(output=(hangs_in_a_thread,)), "hangs_in_a_thread"),
        (Guards(input=(hangs,)), "hangs"),
    ],
)
async def test_a_workers_guard_that_hangs_is_named_as_the_wall_time_cuts_it_off(
    guards: Guards, named: str
) -> None:
    executor = Executor(
        [Role(name="slow", guards=guards), Role(name="fast")],
        FunctionModel(lambda request: "found"),
        aggregator="concat",
        policy=Policy(failure="best_effort", budgets=Budgets(wall_time_s=WALL)),
    )
    with pytest.raises(BudgetExceeded) as caught:
        await executor.run("task", subtasks=[("slow", "a"), ("fast", "b")])
    assert in_flight(caught) == [f"guard {named} of s1"]
    assert f"cut off in flight: guard {named} of s1 (" in str(caught.value)
    partial = caught.value.partial
    assert partial is not None
    assert partial.subtasks["s2"].ok  # the other worker's answer is kept


async def test_a_runs_own_guard_that_hangs_is_named_without_a_worker() -> None:
    executor = Executor(
        [Role(name="w")],
        FunctionModel(lambda request: "found"),
        aggregator="concat",
        guards=Guards(input=(hangs,)),
        policy=Policy(budgets=Budgets(wall_time_s=WALL)),
    )
    with pytest.raises(BudgetExceeded) as caught:
        await executor.run("task", subtasks=[("w", "a")])
    assert in_flight(caught) == ["guard hangs"]


async def test_a_worker_its_time_limit_cuts_off_names_the_guards_and_judges_it_waited_on() -> None:
    # The error said only that the worker ran past its worker_timeout_s, not that its
    # time went to a judge (a role of its own, with a model and a model_timeout of its
    # own) or to a guard, as the wall time's does; nor a nested worker's judge.
    async def answer(request: ModelRequest) -> str | list[ToolCall]:
        if "You are a guard" in (request.messages[0].content or ""):
            await anyio.sleep(30 if "slow" in (request.messages[-1].content or "") else 0)
            return "PASS"
        if "You are the lead" in (request.messages[0].content or ""):
            return [call("w", {"instruction": "slow"}, id="ask")]
        return f"{request.messages[-1].content} answer"

    executor = Executor(
        [
            Role(name="w", guards=Guards(output=("reviewer",))),
            Role(name="g", guards=Guards(output=(hangs,))),
            Role(name="lead", tools=("agent:w",)),
            Role(name="reviewer"),
        ],
        FunctionModel(answer),
        aggregator="concat",
        policy=Policy(failure="best_effort", worker_timeout_s=WALL),
    )
    subtasks = [("w", "slow"), ("w", "fast"), ("g", "any"), ("lead", "ask")]
    result = await executor.run("task", subtasks=subtasks)
    errors = {sid: str(s.error) for sid, s in result.subtasks.items() if not s.ok}
    cut = f"ran past {WALL:g}s, its policy's worker_timeout_s (raise it); cut off in flight"
    assert set(errors) == {"s1", "s3", "s4"}  # s2's judge passed it at once
    assert f"{cut}: judge reviewer of s1 (" in errors["s1"]
    assert f"{cut}: guard hangs of s3 (" in errors["s3"]
    assert f"{cut}: judge reviewer of s4/ask (" in errors["s4"]
    assert all(errors[s].count(" of s") == 1 for s in errors)  # its own, no other's


def refuses(check: GuardCheck) -> str:
    return "not this"


def raises(check: GuardCheck) -> None:
    raise KeyError("lookup")


@pytest.mark.parametrize("kind", ["input", "output"])
async def test_a_runs_own_guard_that_raises_trips_as_broken_named_before_a_refusal(
    kind: str,
) -> None:
    executor = Executor(
        [Role(name="w")],
        FunctionModel(lambda request: "found"),
        aggregator="concat",
        guards=Guards(**{kind: (refuses, raises)}),
    )
    with pytest.raises(GuardrailTripped) as caught:
        await executor.run("task", subtasks=[("w", "a")])
    tripped = caught.value
    assert (tripped.guard, tripped.kind, tripped.broken) == ("raises", kind, True)
    where = f"test_guard_faults.py, line {raises.__code__.co_firstlineno + 1}"
    assert tripped.reason == f"the guard raised KeyError: 'lookup' ({where})"


async def test_a_workers_input_guard_that_raises_fails_it_as_broken() -> None:
    executor = Executor(
        [Role(name="w", guards=Guards(input=(refuses, raises))), Role(name="v")],
        FunctionModel(lambda request: "found"),
        aggregator="concat",
    )
    result = await executor.run("task", subtasks=[("w", "a"), ("v", "b")])
    failed = result.subtasks["s1"].worker
    assert failed is not None
    assert isinstance(failed.exception, GuardrailTripped)
    assert (failed.exception.guard, failed.exception.broken) == ("raises", True)
    assert result.subtasks["s2"].ok


async def test_a_call_its_argument_guard_could_not_judge_is_not_to_be_changed() -> None:
    """A call refused because its guard raised (a judge that gave no verdict, one whose
    model could not be reached) was told to change the call, though no change would
    pass a guard that judges nothing."""

    def answer(request: ModelRequest) -> object:
        if not any(m.role == "tool" for m in request.messages):
            return call("note", {"text": "hi"}, id="c1")
        return "done"

    @tool
    async def note(text: str) -> str:
        """Note something."""
        return "noted"

    executor = Executor(
        [Role(name="w", tools=("note",), guards=Guards(arguments=(raises,)))],
        FunctionModel(answer),
        tools=[note],
    )
    result = await executor.run("task", subtasks=[("w", "a")])
    worker = result.subtasks["s1"].worker
    assert worker is not None
    refused = worker.transcript.messages[3].content
    assert "its guard could not judge it" in refused
    assert "Change the call" not in refused
