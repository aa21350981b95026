"""A judge's calls on a cassette: recorded as that judge's (of the worker it judges),
and answered so when replayed, whatever order the judges ask in; a judge's request
that was not recorded names the judge."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from honeycomb import Executor, Guards, ModelRequest, Policy, Role, RunResult, ToolContext, tool
from honeycomb.errors import RunFailed
from honeycomb.models import Cassette, Model, cassette
from honeycomb.testing import FunctionModel, call
from runtime import Event, ToolMessage
from workers.guards import GuardChecked

pytestmark = pytest.mark.timeout(60)

ROLES = [
    Role(name="writer", tools=("hold",), guards=Guards(output=("reviewer",))),
    Role(name="reviewer", description="Judges the writing."),
]


class Order:
    """Which worker's judge asks second: its ``hold`` tool returns once the other's
    judge gave a verdict."""

    def __init__(self, second: str) -> None:
        self.second = second
        self.judged = asyncio.Event()

    def heard(self, event: Event) -> None:
        if isinstance(event, GuardChecked):
            self.judged.set()


order = Order("s2")


@tool
async def hold(context: ToolContext) -> str:
    """Waits for its turn."""
    if context.worker == order.second:
        await order.judged.wait()
    return "held"


def answers(verdicts: list[str]) -> FunctionModel:
    """Workers hold, then answer ``done``; the judge gives ``verdicts`` in turn."""
    given = iter(verdicts)

    def answer(request: ModelRequest) -> object:
        if "You are a guard" in (request.messages[0].content or ""):
            return next(given)
        if isinstance(request.messages[-1], ToolMessage) or len(request.messages) > 3:
            return "done"
        return call("hold", {})

    return FunctionModel(answer)


async def run(models: Model, second: str) -> tuple[RunResult, list[tuple[str, str]]]:
    global order
    order = Order(second)
    checks: list[tuple[str, str]] = []

    def heard(event: Event) -> None:
        order.heard(event)
        if isinstance(event, GuardChecked):
            checks.append((event.worker or "", event.status))

    executor = Executor(ROLES, models, tools=[hold], policy=Policy(max_workers=2))
    result = await executor.run(
        "write", subtasks=[("writer", "Write."), ("writer", "Write.")], on_event=[heard]
    )
    return result, sorted(checks)


async def test_a_replayed_judge_answers_each_worker_as_recorded_whatever_its_order(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "judged.cassette.jsonl"
    model = answers(["PASS", "It is too short.", "PASS"])
    recorded, recorded_checks = await run(cassette(model, record=tape), second="s2")
    assert recorded.status == "ok"
    # s1's answer passed at once; s2's was refused once, then passed.
    assert recorded_checks == [("s1", "ok"), ("s2", "ok"), ("s2", "tripped")]
    judges = [c.worker for c in Cassette(tape).calls if c.request.tool_choice == "none"]
    assert judges == ["reviewer of s1", "reviewer of s2", "reviewer of s2"]

    # Replayed, s2's judge asks first: it is given what s2's judge was given.
    replayed, replayed_checks = await run(cassette(model, replay=tape), second="s1")
    assert replayed.status == "ok"
    assert replayed_checks == recorded_checks
    assert replayed.usage == recorded.usage


async def test_a_judges_request_not_recorded_names_the_judge_and_its_worker(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "judged.cassette.jsonl"
    await run(cassette(answers(["PASS", "PASS"]), record=tape), second="s2")
    changed = [
        ROLES[0],
        Role(name="reviewer", description="Judges the writing.", instructions="Be strict."),
    ]
    executor = Executor(changed, cassette(answers([]), replay=tape), tools=[hold])
    with pytest.raises(RunFailed) as caught:
        await executor.run("write", subtasks=[("writer", "Write.")])
    failure = str(caught.value)
    assert "a call of model 'default' (worker 'reviewer of s1') that the cassette" in failure
    assert "Be strict." in failure
