"""A worker whose run stopped it while its model call was under way (another worker
failed under ``fail_fast``), recorded on a cassette, replays alike: its call, which
had no answer, is held until the replayed run stops the worker too, and it ends
cancelled, not failed on a call the cassette did not record; a replay that goes
otherwise, with nothing left to stop it, fails it at once naming the worker and the
call; so does one stopped while its approver was asked about a call, or while its
memory's embeddings were asked."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import pytest

from honeycomb import (
    ApprovalRequest,
    Approver,
    Decision,
    Executor,
    Policy,
    Role,
    RoleMemory,
    RunResult,
    SQLiteMemory,
    tool,
)
from honeycomb.errors import ModelError, RunFailed
from honeycomb.models import Cassette, Model, cassette
from honeycomb.testing import FunctionModel, call
from runtime import ModelRequest, ToolMessage
from runtime.models.cassettes import CassetteWriter

pytestmark = pytest.mark.timeout(30)


def failing_s1() -> FunctionModel:
    """s1's endpoint is down, once the others' calls are under way; theirs never
    answer (the run stops them)."""
    asked: set[str] = set()
    under_way = asyncio.Event()

    async def answer(request: ModelRequest) -> object:
        who = (request.conversation or "").rpartition("/")[2]
        if who == "s1":
            await under_way.wait()
            raise ModelError("endpoint down")
        asked.add(who)
        if asked == {"s2", "s3"}:
            under_way.set()
        await asyncio.Event().wait()

    return FunctionModel(answer)


async def ran(models: Model, failure: Literal["fail_fast", "best_effort"]) -> RunResult:
    executor = Executor([Role(name="writer")], models, policy=Policy(failure=failure))
    with pytest.raises(RunFailed) as caught:
        await executor.run("notes", subtasks=[("writer", n) for n in ("one", "two", "three")])
    partial = caught.value.partial
    assert partial is not None
    return partial


def ended(result: RunResult) -> dict[str, tuple[str, str | None]]:
    return {
        name: (sub.status, sub.error.type if sub.error else None)
        for name, sub in result.subtasks.items()
    }


async def test_a_worker_fail_fast_stopped_in_its_call_ends_cancelled_replayed(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "stopped.cassette.jsonl"
    recorded = await ran(cassette(failing_s1(), record=tape), "fail_fast")
    assert ended(recorded) == {
        "s1": ("failed", "ModelError"),
        "s2": ("cancelled", "RunFailed"),
        "s3": ("cancelled", "RunFailed"),
    }
    assert sorted(c.worker or "" for c in Cassette(tape).calls if c.cancelled) == ["s2", "s3"]

    replayed = await ran(cassette(failing_s1(), replay=tape), "fail_fast")
    assert ended(replayed) == ended(recorded)


async def test_a_call_held_as_cancelled_that_nothing_stops_fails_naming_it(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "stopped.cassette.jsonl"
    await ran(cassette(failing_s1(), record=tape), "fail_fast")
    # Replayed under best_effort, s1's failure stops nobody: once it ended, the calls
    # held are all that runs, and each fails its worker rather than waiting forever.
    replayed = await ran(cassette(failing_s1(), replay=tape), "best_effort")
    error = replayed.subtasks["s2"].error
    assert error is not None
    assert error.type == "CassetteMismatch"
    assert "(worker 's2')" in error.message
    assert "its call of turn 1 was under way when the recorded run cancelled" in error.message


@tool(approval=True)
def pay(amount: int) -> str:
    """Pays an amount."""
    return f"paid {amount}"


def asking() -> tuple[FunctionModel, Approver]:
    """s2 asks to pay, which nobody decides; s1's endpoint is down once it asked."""
    asked = asyncio.Event()

    async def answer(request: ModelRequest) -> object:
        if (request.conversation or "").endswith("/s1"):
            await asked.wait()
            raise ModelError("endpoint down")
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            return f"done: {last.content}"
        return call("pay", {"amount": 5})

    async def undecided(request: ApprovalRequest) -> Decision:
        asked.set()
        await asyncio.Event().wait()
        raise AssertionError("the run stops it")

    return FunctionModel(answer), undecided


async def paid(
    tape: Path, failure: Literal["fail_fast", "best_effort"], *, record: bool
) -> RunResult:
    model, approver = asking()
    models = cassette(model, record=tape) if record else cassette(model, replay=tape)
    payer = Role(name="payer", tools=("pay",))
    policy = Policy(failure=failure)
    executor = Executor([payer], models, tools=[pay], approver=approver, policy=policy)
    with pytest.raises(RunFailed) as caught:
        await executor.run("pay", subtasks=[("payer", "one"), ("payer", "two")])
    partial = caught.value.partial
    assert partial is not None
    return partial


async def test_a_worker_stopped_asking_its_approver_ends_cancelled_replayed(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "asked.cassette.jsonl"
    recorded = await paid(tape, "fail_fast", record=True)
    assert ended(recorded)["s2"] == ("cancelled", "RunFailed")
    (kept,) = Cassette(tape).decisions
    assert (kept.worker, kept.cancelled) == ("s2", True)

    assert ended(await paid(tape, "fail_fast", record=False)) == ended(recorded)
    # Replayed otherwise, nothing stops it: the ask fails its worker, naming it.
    error = (await paid(tape, "best_effort", record=False)).subtasks["s2"].error
    assert error is not None
    assert "a decision on a call of tool 'pay' (worker 's2')" in error.message
    assert "its ask of the approver on call" in error.message


async def test_a_run_interrupted_from_outside_keeps_no_call_cancelled(tmp_path: Path) -> None:
    # Its later life (resumed) makes the call again: replayed in one go, that life's
    # answer answers it, as no call of the first life stands held before it.
    tape = tmp_path / "interrupted.cassette.jsonl"
    paying = asyncio.Event()

    async def answer(request: ModelRequest) -> object:
        if (request.conversation or "").endswith("/s2"):
            await asyncio.Event().wait()  # under way as the run is interrupted
        return call("pay", {"amount": 5})

    async def undecided(request: ApprovalRequest) -> Decision:
        paying.set()
        await asyncio.Event().wait()
        raise AssertionError("the run is interrupted first")

    payer = Role(name="payer", tools=("pay",))
    models = cassette(FunctionModel(answer), record=tape)
    executor = Executor([payer], models, tools=[pay], approver=undecided)
    running = asyncio.ensure_future(
        executor.run("pay", subtasks=[("payer", "one"), ("payer", "two")])
    )
    await paying.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    kept = Cassette(tape)
    assert len(kept.calls) == 1  # s1's, answered
    assert not [line for line in (*kept.calls, *kept.decisions) if line.cancelled]


class SlowOnTwo:
    """Embeddings that never answer for a text of ``two`` (the run stops them)."""

    name = "embed-small"

    def __init__(self) -> None:
        self.asked = asyncio.Event()

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if any("two" in text for text in texts):
            self.asked.set()
            await asyncio.Event().wait()
        return [[1.0, float(len(text)), 0.5] for text in texts]


async def recalling(tape: Path, folder: Path, *, record: bool) -> RunResult:
    embeddings = SlowOnTwo()

    async def answer(request: ModelRequest) -> str:
        if (request.conversation or "").endswith("/s1"):
            await embeddings.asked.wait()  # s2 recalls, under way
            raise ModelError("endpoint down")
        return "ok"

    memory = SQLiteMemory(folder / "memory.db", embeddings=embeddings)
    await memory.add("a note about one")
    models = cassette(FunctionModel(answer), **{"record" if record else "replay": tape})
    role = Role(name="writer", memory=RoleMemory(recall=1, remember=False))
    executor = Executor([role], models, memory=memory, policy=Policy(failure="fail_fast"))
    with pytest.raises(RunFailed) as caught:
        await executor.run("notes", subtasks=[("writer", "one"), ("writer", "two")])
    partial = caught.value.partial
    assert partial is not None
    return partial


async def test_a_worker_stopped_as_its_memory_embedded_ends_cancelled_replayed(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "recalled.cassette.jsonl"
    (tmp_path / "recorded").mkdir()
    (tmp_path / "replayed").mkdir()
    recorded = await recalling(tape, tmp_path / "recorded", record=True)
    assert [e.texts for e in Cassette(tape).embedded if e.cancelled] == [("two",)]
    replayed = await recalling(tape, tmp_path / "replayed", record=False)
    assert (
        ended(replayed)
        == ended(recorded)
        == {
            "s1": ("failed", "ModelError"),
            "s2": ("cancelled", "RunFailed"),
        }
    )


async def test_a_call_held_as_cancelled_is_answered_as_a_later_life_answered_it(
    tmp_path: Path,
) -> None:
    # A run stopped (over its budget, say), then resumed with more, asks again the calls
    # its stop cancelled: a replay of that life, which nothing stops, is answered so.
    tape = tmp_path / "lives.cassette.jsonl"
    await ran(cassette(failing_s1(), record=tape), "fail_fast")

    async def answering(request: ModelRequest) -> object:
        if (request.conversation or "").endswith("/s1"):
            raise ModelError("endpoint down")
        return "answered"

    async def best_effort(models: Model) -> RunResult:
        policy = Policy(failure="best_effort")
        executor = Executor([Role(name="writer")], models, policy=policy, aggregator="concat")
        return await executor.run("notes", subtasks=[("writer", n) for n in ("one", "two")])

    await best_effort(cassette(FunctionModel(answering), record=CassetteWriter(tape, append=True)))
    replayed = await best_effort(cassette(failing_s1(), replay=tape))
    assert ended(replayed) == {"s1": ("failed", "ModelError"), "s2": ("ok", None)}
    assert replayed.subtasks["s2"].output == "answered"
