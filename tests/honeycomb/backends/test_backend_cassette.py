"""A cassette replayed on either backend gives each recorded call once, across every
worker of every run, wherever the workers run (on Ray, in two actors), and cuts a run
where its wall time cut the recording."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Literal

import anyio
import pytest

from honeycomb import (
    ApprovalRequest,
    Budgets,
    Decision,
    Executor,
    Policy,
    Role,
    SubtaskResult,
    tool,
)
from honeycomb.backends import RayBackend
from honeycomb.errors import BudgetExceeded, ModelError, RunFailed
from honeycomb.evals import Case, evaluate
from honeycomb.events import Event, ModelCallStarted
from honeycomb.models import Cassette, Model, cassette
from honeycomb.testing import FunctionModel, call
from honeycomb.tools import Tool
from runtime import AssistantMessage, ModelRequest, ToolMessage
from runtime.models.layers.cassette import current_case

pytestmark = [pytest.mark.xdist_group("ray"), pytest.mark.timeout(120)]


async def unique(request: ModelRequest) -> str:
    """An answer no other call gets, a while coming (two runs' workers at once)."""
    await anyio.sleep(0.5)
    return f"answer {uuid.uuid4().hex}"


async def two_runs_at_once(models: Model, backend: RayBackend | None) -> set[str]:
    executor = Executor([Role(name="r")], models, aggregator="concat", backend=backend)
    answers: set[str] = set()

    async def one() -> None:
        result = await executor.run("t", subtasks=[("r", "the same question")])
        answers.add(result.answer_text)

    async with anyio.create_task_group() as runs:
        runs.start_soon(one)
        runs.start_soon(one)
    return answers


async def test_runs_asking_the_same_at_once_get_each_recorded_answer_once(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    tape = tmp_path / "calls.jsonl"
    recorded = await two_runs_at_once(cassette(FunctionModel(unique), record=tape), backend)
    assert len(recorded) == 2  # two answers, one a run
    assert len(Cassette(tape).calls) == 2
    # On Ray, each actor had its own copy of the cassette, and both answered the first.
    assert await two_runs_at_once(cassette(FunctionModel(unique), replay=tape), backend) == recorded


def cut_short() -> FunctionModel:
    """s1 answers at once; s2's answer never comes (its run's wall time cuts it off)."""

    async def answer(request: ModelRequest) -> str:
        if (request.conversation or "").endswith("/s2"):
            await anyio.sleep_forever()
        return "done"

    return FunctionModel(answer)


LIMIT_S = 3.0
"""The recorded runs' wall time and workers' time limit, which cut them."""

REPLAY_LIMIT_S = 30.0
"""A replay's: far past what the replay takes, however busy the machine, so that only
the recording's cut, replayed, ends it sooner (its own clock would end it alike, but
not before this)."""


async def cut_off_on(
    models: Model, backend: RayBackend | None, limit_s: float = LIMIT_S
) -> BudgetExceeded:
    policy = Policy(budgets=Budgets(wall_time_s=limit_s))
    executor = Executor(
        [Role(name="r")], models, aggregator="concat", policy=policy, backend=backend
    )
    with pytest.raises(BudgetExceeded) as caught:
        await executor.run("t", subtasks=[("r", "one"), ("r", "two")])
    return caught.value


def said(cut: BudgetExceeded) -> tuple[object, ...]:
    """What a cut run says of itself, its timings apart."""
    assert cut.partial is not None
    statuses = {name: sub.status for name, sub in cut.partial.subtasks.items()}
    return cut.used, [(c.who, c.kind, c.turn) for c in cut.in_flight], statuses


async def test_a_run_cut_by_its_wall_time_is_cut_alike_replayed_wherever_its_workers_run(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    if backend is not None:
        await backend.start()  # its actors' start is not the runs' time, which 3 s cuts
    tape = tmp_path / "cut.jsonl"
    recorded = await cut_off_on(cassette(cut_short(), record=tape), backend)
    # On Ray, the actors' calls did not know the driver's cut: none was kept cut.
    (kept,) = [call for call in Cassette(tape).calls if call.cut]
    assert kept.worker == "s2"

    started = time.monotonic()
    replayed = await cut_off_on(cassette(cut_short(), replay=tape), backend, REPLAY_LIMIT_S)
    assert time.monotonic() - started < REPLAY_LIMIT_S  # cut where the recording was
    assert said(replayed) == said(recorded)


@tool(approval=True)
def pay(amount: int) -> str:
    """Pays an amount."""
    return f"paid {amount}"


def paying(request: ModelRequest) -> str | AssistantMessage:
    """Pays 100, then says what came of it."""
    last = request.messages[-1]
    if isinstance(last, ToolMessage):
        return f"done: {last.content}"
    return AssistantMessage(tool_calls=(call("pay", {"amount": 100}),))


async def test_a_replay_is_decided_as_recorded_wherever_its_workers_run(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    tape = tmp_path / "paid.jsonl"
    asked: list[str] = []

    async def person(request: ApprovalRequest) -> Decision:
        asked.append(request.tool)
        return Decision.approved({"amount": 40}, by="ann")

    async def one(models: Model) -> str:
        payer = Role(name="payer", tools=("pay",))
        executor = Executor(
            [payer], models, tools=[pay], aggregator="concat", approver=person, backend=backend
        )
        return (await executor.run("t", subtasks=[("payer", "pay")])).answer_text

    recorded = await one(cassette(FunctionModel(paying), record=tape))
    assert asked == ["pay"]
    assert await one(cassette(FunctionModel(paying), replay=tape)) == recorded
    assert asked == ["pay"]  # nobody was asked again
    assert "paid 40" in recorded


async def test_an_evals_decisions_are_recorded_as_its_cases_wherever_its_workers_run(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    # Cases whose workers make the same call, decided apart (their person edits the
    # amount by the case), more of them than actors. On Ray each decision was recorded
    # from its actor's event as the case of the worker that first opened that actor's
    # channel, so a replay, which gives each case its own decision first, could give
    # one case another's.
    tape = tmp_path / "cases.jsonl"
    amounts = {"a": 1, "b": 2, "c": 3, "d": 4}

    async def person(request: ApprovalRequest) -> Decision:
        return Decision.approved({"amount": amounts[current_case() or ""]})

    payer = Role(name="payer", tools=("pay",))
    executor = Executor(
        [payer], cassette(FunctionModel(paying), record=tape), tools=[pay],
        aggregator="concat", approver=person, backend=backend,
        planner=lambda task: [("payer", task)],
    )  # fmt: skip
    report = await evaluate(executor, [Case(id=name, task="pay") for name in amounts])
    assert [c.attempts[0].status for c in report.cases] == ["ok"] * len(amounts)
    decided = {d.case: d.edited for d in Cassette(tape).decisions}
    assert decided == {name: {"amount": amount} for name, amount in amounts.items()}


async def timed_out_on(
    models: Model, backend: RayBackend | None, limit_s: float = LIMIT_S
) -> dict[str, object]:
    policy = Policy(worker_timeout_s=limit_s, failure="best_effort")
    executor = Executor(
        [Role(name="r")], models, aggregator="concat", policy=policy, backend=backend
    )
    result = await executor.run("t", subtasks=[("r", "one"), ("r", "two")])
    return {n: (s.status, s.error and s.error.type) for n, s in result.subtasks.items()}


async def test_a_worker_cut_by_its_own_time_limit_is_cut_alike_replayed_wherever_it_runs(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    if backend is not None:
        await backend.start()
    tape = tmp_path / "timed_out.jsonl"
    recorded = await timed_out_on(cassette(cut_short(), record=tape), backend)
    assert recorded == {"s1": ("ok", None), "s2": ("failed", "WorkerTimeout")}
    (kept,) = [call for call in Cassette(tape).calls if call.cut]  # none was kept
    assert kept.worker == "s2"

    started = time.monotonic()
    # Not kept, s2's call was not on the cassette: it failed on a CassetteMismatch.
    replay = cassette(cut_short(), replay=tape)
    assert await timed_out_on(replay, backend, REPLAY_LIMIT_S) == recorded
    assert time.monotonic() - started < REPLAY_LIMIT_S  # cut where the recording was


async def stopped_on(
    models: Model, backend: RayBackend | None, failure: Literal["fail_fast", "best_effort"]
) -> dict[str, SubtaskResult]:
    """s1 fails once s2's model call is under way (its start told here, where s1 waits
    for it in a pinned tool, whichever actor either runs in); s2's call never ends."""
    under_way = anyio.Event()

    async def once_s2_calls() -> str:
        """Returns once s2's model call is under way."""
        await under_way.wait()
        return "it is"

    def told(event: Event) -> None:
        if isinstance(event, ModelCallStarted) and event.worker == "s2":
            under_way.set()

    executor = Executor(
        [Role(name="r", tools=("once_s2_calls",))], models, backend=backend,
        tools=[Tool(once_s2_calls, pinned=True)], policy=Policy(failure=failure),
        on_event=[told],
    )  # fmt: skip
    with pytest.raises(RunFailed) as caught:
        await executor.run("t", subtasks=[("r", "one"), ("r", "two")])
    assert caught.value.partial is not None
    return caught.value.partial.subtasks


async def fails_once_s2_calls(request: ModelRequest) -> AssistantMessage:
    if not (request.conversation or "").endswith("/s1"):
        await anyio.sleep_forever()
    if isinstance(request.messages[-1], ToolMessage):
        raise ModelError("endpoint down")
    return AssistantMessage(tool_calls=(call("once_s2_calls", {}),))


def ended(subtasks: dict[str, SubtaskResult]) -> dict[str, tuple[str, str | None]]:
    return {name: (sub.status, sub.error and sub.error.type) for name, sub in subtasks.items()}


async def test_a_call_its_run_stopped_is_kept_cancelled_and_fails_clearly_replayed_otherwise(
    tmp_path: Path, backend: RayBackend | None
) -> None:
    # s1 failed under fail_fast as s2's call was under way: kept cancelled, wherever it
    # was recorded (on Ray, the actor's recording model was told nothing: not kept, and
    # its replay failed s2 on a CassetteMismatch). Replayed under fail_fast, s2 is
    # cancelled again; under best_effort, where nothing stops s2, its call fails it
    # naming the call (on Ray, the actor asks the driver's cassette to hold it).
    tape = tmp_path / "stopped.jsonl"
    models = cassette(FunctionModel(fails_once_s2_calls), record=tape)
    recorded = ended(await stopped_on(models, backend, "fail_fast"))
    assert recorded == {"s1": ("failed", "ModelError"), "s2": ("cancelled", "RunFailed")}
    (kept,) = [call for call in Cassette(tape).calls if call.cancelled]
    assert kept.worker == "s2"

    replay = cassette(FunctionModel(fails_once_s2_calls), replay=tape)
    again = ended(await stopped_on(replay, backend, "fail_fast"))
    if backend is None:
        # On Ray, s1's end may reach the held call's check before the run has stopped
        # s2 for it, which then fails s2 on a CassetteMismatch: a race of the hold's
        # check (a turn of the loop after an end) with the driver's fail_fast.
        assert again == recorded
    replay = cassette(FunctionModel(fails_once_s2_calls), replay=tape)
    error = (await stopped_on(replay, backend, "best_effort"))["s2"].error
    assert error is not None
    assert error.type == "CassetteMismatch"
    assert "its call of turn 1 was under way when the recorded run cancelled" in error.message
