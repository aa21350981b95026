"""A run its wall time cut off, recorded on a cassette, replays alike: answered at once,
it is cut where the recorded one was (the same calls answered, the same under way),
and stops over its budget as it did, having used what it had, without waiting for its
own clock; so is a worker its own time limit cut off."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from honeycomb import (
    ApprovalRequest,
    Approver,
    Budgets,
    Decision,
    Executor,
    GuardCheck,
    Guards,
    Policy,
    Role,
    RoleMemory,
    RunResult,
    SQLiteMemory,
    ToolContext,
    tool,
)
from honeycomb.errors import BudgetExceeded
from honeycomb.models import Cassette, Model, cassette
from honeycomb.testing import FunctionModel, call
from runtime import ModelRequest, ToolMessage
from runtime.model import WrapperModel

pytestmark = pytest.mark.timeout(60)

WALL_S = 2.0
NEVER: set[str] = set()
"""The workers whose ``note`` never ends (until the run's cut cancels it)."""


@tool
async def note(text: str, context: ToolContext) -> str:
    """Notes a text."""
    if context.worker in NEVER:
        await asyncio.Event().wait()
    return f"noted {text}"


def noting(stuck: tuple[str, ...] = ("s2",)) -> FunctionModel:
    """Each worker notes its instruction, then answers; the answers of those ``stuck``
    never come (the run's wall time cuts them off)."""

    async def answer(request: ModelRequest) -> object:
        last = request.messages[-1]
        if not isinstance(last, ToolMessage):
            return call("note", {"text": request.messages[1].content or ""})
        if (request.conversation or "").rpartition("/")[2] in stuck:
            await asyncio.Event().wait()
        return f"done: {last.content}"

    return FunctionModel(answer)


async def cut_off(
    models: Model, never: set[str], second: str = "two"
) -> tuple[BudgetExceeded, float]:
    NEVER.clear()
    NEVER.update(never)
    policy = Policy(budgets=Budgets(wall_time_s=WALL_S))
    executor = Executor([Role(name="writer", tools=("note",))], models, tools=[note], policy=policy)
    started = time.monotonic()
    with pytest.raises(BudgetExceeded) as caught:
        await executor.run("notes", subtasks=[("writer", "one"), ("writer", second)])
    return caught.value, time.monotonic() - started


def alike(error: BudgetExceeded) -> tuple[object, ...]:
    """What a cut run says of itself, its timings apart."""
    partial = error.partial
    assert partial is not None
    statuses = {name: sub.status for name, sub in partial.subtasks.items()}
    return (
        error.limit,
        error.used,
        [(c.who, c.kind, c.turn) for c in error.in_flight],
        statuses,
        partial.usage,
    )


async def test_a_run_cut_by_its_wall_time_is_cut_alike_replayed_at_once(tmp_path: Path) -> None:
    tape = tmp_path / "cut.cassette.jsonl"
    recorded, _ = await cut_off(cassette(noting(), record=tape), never=set())
    assert recorded.limit == "wall_time_s"
    assert [c.who for c in recorded.in_flight] == ["s2"]  # its second call, under way
    (kept,) = [c for c in Cassette(tape).calls if c.cut]
    assert kept.worker == "s2"

    replayed, took = await cut_off(cassette(noting(), replay=tape), never=set())
    assert took < WALL_S  # cut where the recording was, not by its own clock
    assert alike(replayed) == alike(recorded)


async def test_a_replay_whose_worker_asked_what_was_not_recorded_is_cut_at_once(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "cut.cassette.jsonl"
    await cut_off(cassette(noting(stuck=("s1", "s2")), record=tape), never=set())
    # s2's instruction changed since: its first call fails it, so its call the cut
    # caught never comes; the cut falls as s1's waits, not when the replay's time is up.
    replayed, took = await cut_off(cassette(noting(), replay=tape), set(), second="three")
    assert took < WALL_S
    assert [c.who for c in replayed.in_flight] == ["s1"]
    partial = replayed.partial
    assert partial is not None
    assert "CassetteMismatch" in str(partial.subtasks["s2"].error)


async def test_a_worker_between_calls_as_the_cut_fell_is_held_past_it_replayed(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "cut.cassette.jsonl"
    # Recorded, s1's note was still running as the cut fell; replayed, it ends at once
    # and s1 asks what the recording never asked: past the cut, it waits for it.
    recorded, _ = await cut_off(cassette(noting(), record=tape), never={"s1"})
    replayed, took = await cut_off(cassette(noting(), replay=tape), never=set())
    assert took < WALL_S
    assert replayed.used == recorded.used
    partial, before = replayed.partial, recorded.partial
    assert partial is not None
    assert before is not None
    assert {n: s.status for n, s in partial.subtasks.items()} == {
        n: s.status for n, s in before.subtasks.items()
    }
    assert "CassetteMismatch" not in str(partial.subtasks["s1"].error)


@tool(approval=True)
def pay(amount: int) -> str:
    """Pays an amount."""
    return f"paid {amount}"


def paying() -> FunctionModel:
    """Each worker pays what its instruction says, then answers."""

    def answer(request: ModelRequest) -> object:
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            return f"done: {last.content}"
        return call("pay", {"amount": int(request.messages[1].content or "0")})

    return FunctionModel(answer)


async def slow_to_decide_on_s2(request: ApprovalRequest) -> Decision:
    """Approves s1's call at once; s2's is still asked about as the run's cut falls."""
    if request.worker == "s2":
        await asyncio.Event().wait()
    return Decision.approved(by="ann")


async def cut_asking(models: Model, approver: Approver | None) -> tuple[BudgetExceeded, float]:
    policy = Policy(budgets=Budgets(wall_time_s=WALL_S))
    payer = Role(name="payer", tools=("pay",))
    executor = Executor([payer], models, tools=[pay], approver=approver, policy=policy)
    started = time.monotonic()
    with pytest.raises(BudgetExceeded) as caught:
        await executor.run("pay", subtasks=[("payer", "100"), ("payer", "7")])
    return caught.value, time.monotonic() - started


async def test_a_run_cut_while_its_approver_was_asked_is_cut_alike_replayed(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "asked.cassette.jsonl"
    recorded, _ = await cut_asking(cassette(paying(), record=tape), slow_to_decide_on_s2)
    (asked,) = [d for d in Cassette(tape).decisions if d.cut]
    assert (asked.worker, asked.arguments) == ("s2", {"amount": 7})

    # Replayed, s2's call is not a mismatch (no decision on it): it waits for the cut.
    replayed, took = await cut_asking(cassette(paying(), replay=tape), None)
    assert took < WALL_S
    assert alike(replayed) == alike(recorded)


async def timed_out(models: Model, never: set[str]) -> tuple[RunResult, float]:
    NEVER.clear()
    NEVER.update(never)
    policy = Policy(worker_timeout_s=WALL_S, failure="best_effort")
    executor = Executor([Role(name="writer", tools=("note",))], models, tools=[note], policy=policy)
    started = time.monotonic()
    result = await executor.run("notes", subtasks=[("writer", "one"), ("writer", "two")])
    return result, time.monotonic() - started


def ended(result: RunResult) -> dict[str, tuple[str, str | None]]:
    return {n: (s.status, s.error and s.error.type) for n, s in result.subtasks.items()}


async def test_a_worker_cut_by_its_own_time_limit_in_a_tool_is_cut_alike_replayed(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "timed_out.cassette.jsonl"
    # Recorded, s2's note ran past its worker's limit; replayed, it ends at once and s2
    # asks what the recording never asked: past its worker's cut, it waits for it.
    recorded, _ = await timed_out(cassette(noting(), record=tape), never={"s2"})
    assert ended(recorded) == {"s1": ("ok", None), "s2": ("failed", "WorkerTimeout")}
    replayed, took = await timed_out(cassette(noting(), replay=tape), never=set())
    assert took < WALL_S
    assert ended(replayed) == ended(recorded)


async def test_a_cut_keeps_only_the_asks_of_runs_under_way(tmp_path: Path) -> None:
    tape = tmp_path / "two_runs.cassette.jsonl"
    models = cassette(paying(), record=tape)
    payer = Role(name="payer", tools=("pay",))
    asked = asyncio.Event()

    async def never_decides(request: ApprovalRequest) -> Decision:
        asked.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    # A first run on the cassette is given up while its approver is asked about 7.
    first = Executor([payer], models, tools=[pay], approver=never_decides)
    async with anyio.create_task_group() as runs:
        runs.start_soon(functools.partial(first.run, "pay", subtasks=[("payer", "7")]))
        await asked.wait()
        runs.cancel_scope.cancel()
    await cut_asking(models, slow_to_decide_on_s2)  # a second: cut asking about s2's 7
    # The first run's ask ended with it: it is not kept under the second run's cut.
    kept = [(d.worker, d.arguments) for d in Cassette(tape).decisions if d.cut]
    assert kept == [("s2", {"amount": 7})]


async def test_a_replay_in_a_model_of_ones_own_is_cut_alike_replayed_at_once(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "cut.cassette.jsonl"
    recorded, _ = await cut_off(cassette(noting(), record=tape), never=set())
    # Wrapped, the replay is not told of the run's workers as they end (its Executor
    # does not know it for a cassette's): it is cut where the recording was all the same.
    replayed, took = await cut_off(WrapperModel(cassette(noting(), replay=tape)), never=set())
    assert took < WALL_S
    assert alike(replayed) == alike(recorded)


class Lengths:
    """Embeddings of a text's length."""

    name = "lengths"

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, float(len(text))] for text in texts]


async def test_a_replay_whose_worker_recalled_what_was_not_recorded_is_cut_at_once(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "cut.cassette.jsonl"
    recalling = Role(name="writer", tools=("note",), memory=RoleMemory(recall=1))

    async def one(models: Model, second: str, folder: str) -> tuple[BudgetExceeded, float]:
        memory = SQLiteMemory(tmp_path / folder / "memory.db", embeddings=Lengths())
        policy = Policy(budgets=Budgets(wall_time_s=WALL_S))
        executor = Executor([recalling], models, tools=[note], policy=policy, memory=memory)
        started = time.monotonic()
        with pytest.raises(BudgetExceeded) as caught:
            await executor.run("notes", subtasks=[("writer", "one"), ("writer", second)])
        return caught.value, time.monotonic() - started

    NEVER.clear()
    await one(cassette(noting(stuck=("s1", "s2")), record=tape), "two", "recorded")
    # s2's recall embeds what was not recorded, which fails it: s1's cut call waits on.
    replayed, took = await one(cassette(noting(), replay=tape), "three", "replayed")
    assert took < WALL_S
    partial = replayed.partial
    assert partial is not None
    assert "embeddings 'lengths'" in str(partial.subtasks["s2"].error)


async def test_a_run_or_worker_cut_before_any_model_call_is_cut_alike_replayed(
    tmp_path: Path,
) -> None:
    # Recorded, s1's input guard never passes: the run's wall time (then s1's own time
    # limit) cuts it before any call reached the cassette, which keeps the cut all the
    # same. Replayed, the guard passes and s1 asks its model at once: its call waits
    # past the cut, which falls where the recording's did, long before the replay's
    # own limit (30 s) would.
    held = asyncio.Event()

    async def slow_on_s1(check: GuardCheck) -> None:
        if check.worker == "s1":
            await held.wait()

    def on(models: Model, policy: Policy) -> Executor:
        role = Role(name="writer", tools=("note",), guards=Guards(input=(slow_on_s1,)))
        return Executor([role], models, tools=[note], policy=policy)

    async def over(models: Model, wall_s: float) -> BudgetExceeded:
        with pytest.raises(BudgetExceeded) as caught:
            await on(models, Policy(budgets=Budgets(wall_time_s=wall_s))).run(
                "x", subtasks=[("writer", "one")]
            )
        return caught.value

    async def timed(models: Model, limit_s: float) -> RunResult:
        policy = Policy(worker_timeout_s=limit_s, failure="best_effort")
        return await on(models, policy).run("x", subtasks=[("writer", "one"), ("writer", "two")])

    NEVER.clear()
    run_tape, worker_tape = tmp_path / "run.cassette.jsonl", tmp_path / "worker.cassette.jsonl"
    recorded = await over(cassette(noting(stuck=()), record=run_tape), 0.2)
    recorded_worker = await timed(cassette(noting(stuck=()), record=worker_tape), 0.2)
    assert ended(recorded_worker) == {"s1": ("failed", "WorkerTimeout"), "s2": ("ok", None)}
    held.set()
    replayed = await over(cassette(noting(stuck=()), replay=run_tape), 30.0)
    assert (replayed.limit, replayed.used) == (recorded.limit, recorded.used)
    assert alike(replayed)[3] == alike(recorded)[3] == {"s1": "over_budget"}
    replayed_worker = await timed(cassette(noting(stuck=()), replay=worker_tape), 30.0)
    assert ended(replayed_worker) == ended(recorded_worker)
