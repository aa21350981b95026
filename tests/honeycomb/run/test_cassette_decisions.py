"""Decisions on a cassette: a recorded run's calls that waited for a person are
decided, replayed, as they were when recorded (approved or denied, edited, by whom),
with no person asked, whether its approver decided them or a person did in its run
store; a call the cassette holds no decision on fails its worker, naming the call and
its tool."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from honeycomb import Decision, Executor, Role, RunResult, tool
from honeycomb.errors import CassetteMismatch, RunFailed
from honeycomb.models import Cassette, Model, cassette
from honeycomb.testing import FunctionModel, call
from runtime import ApprovalDecided, ApprovalRequest, Event, ModelRequest, ToolMessage
from runtime.tools.approval_gate import UNDECIDED_BY
from runtime.tools.approvals import NOBODY_BY, WITHDRAWN_BY, Approver, LeftWaiting

pytestmark = pytest.mark.timeout(60)


@tool(approval=True)
def pay(amount: int) -> str:
    """Pays an amount."""
    return f"paid {amount}"


PAYER = Role(name="payer", tools=("pay",))
PLAN = [("payer", "100"), ("payer", "7")]


def paying() -> FunctionModel:
    """Pays the amount its instruction names, then says what came of it."""

    def answer(request: ModelRequest) -> object:
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            return f"done: {last.content}"
        return call("pay", {"amount": int((last.content or "").rsplit(maxsplit=1)[-1])})

    return FunctionModel(answer)


class Person:
    """Halves what s1 pays, refuses what s2 pays; keeps who it was asked about."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, request: ApprovalRequest) -> Decision:
        self.asked.append(request.worker or "")
        if request.worker == "s1":
            return Decision.approved({"amount": request.arguments["amount"] // 2}, by="ann")
        return Decision.denied("too small to bother", by="bob")


def decided(events: list[Event]) -> list[tuple[str | None, bool, str, str | None, bool]]:
    return sorted(
        (e.worker, e.approved, e.by, e.reason, e.edited)
        for e in events
        if isinstance(e, ApprovalDecided)
    )


async def run(
    models: Model, person: Approver | None = None, **options: Any
) -> tuple[RunResult, list[Event]]:
    events: list[Event] = []
    executor = Executor(
        [PAYER], models, tools=[pay], aggregator="concat", approver=person, **options
    )
    result = await executor.run("pay", subtasks=PLAN, on_event=[events.append])
    return result, events


def answers(result: RunResult) -> dict[str, str]:
    return {name: str(sub.output) for name, sub in result.subtasks.items()}


async def test_a_replayed_run_is_decided_as_recorded_and_asks_no_person(tmp_path: Path) -> None:
    tape = tmp_path / "paid.cassette.jsonl"
    person = Person()
    recorded, recorded_events = await run(cassette(paying(), record=tape), person)
    assert sorted(person.asked) == ["s1", "s2"]
    assert answers(recorded) == {
        "s1": 'done: (A person approved this call with edited arguments: {"amount": 50})\npaid 50',
        "s2": "done: denied: too small to bother",
    }
    assert len(Cassette(tape).decisions) == 2

    again = Person()  # the person at the terminal of a replay
    replayed, replayed_events = await run(cassette(paying(), replay=tape), again)
    assert again.asked == []
    assert replayed.status == "ok"
    assert answers(replayed) == answers(recorded)
    assert decided(replayed_events) == decided(recorded_events)
    assert decided(replayed_events) == [
        ("s1", True, "ann", None, True),
        ("s2", False, "bob", "too small to bother", False),
    ]
    assert replayed.usage == recorded.usage


async def test_decisions_a_person_made_in_the_run_store_are_replayed_without_waiting(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "waited.cassette.jsonl"
    store = tmp_path / "runs.db"
    models = cassette(paying(), record=tape)
    executor = Executor([PAYER], models, tools=[pay], aggregator="concat", store=store)
    waiting = await executor.run("pay", subtasks=PLAN)
    assert waiting.status == "waiting"
    for pending in await executor.pending(waiting.run_id):
        approve = pending.worker == "s1"
        await executor.decide(
            waiting.run_id,
            pending.call_id,
            worker=pending.worker,
            approve=approve,
            reason=None if approve else "not today",
            by="carol",
        )
    recorded = await executor.resume(waiting.run_id)
    assert recorded.status == "ok"

    replayed, events = await run(cassette(paying(), replay=tape), store=tmp_path / "other.db")
    assert replayed.status == "ok"  # it did not wait
    assert (
        answers(replayed)
        == answers(recorded)
        == {
            "s1": "done: paid 100",
            "s2": "done: denied: not today",
        }
    )
    assert decided(events) == [
        ("s1", True, "carol", None, False),
        ("s2", False, "carol", "not today", False),
    ]


async def test_a_call_the_cassette_holds_no_decision_on_fails_naming_the_call_and_tool(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "paid.cassette.jsonl"
    await run(cassette(paying(), record=tape), Person())
    kept = [line for line in tape.read_text().splitlines() if '"by":"bob"' not in line]
    tape.write_text("\n".join(kept) + "\n")  # s2's decision, as if never recorded

    replayed, _ = await run(cassette(paying(), replay=tape), Person())
    assert replayed.status == "partial"
    failure = replayed.subtasks["s2"].error
    assert failure is not None
    assert failure.type == CassetteMismatch.__name__
    assert re.sub(r"call_\d+", "call_N", failure.message) == (
        f"{tape}: a decision on a call of tool 'pay' (worker 's2') that the cassette did not "
        "record: call 'call_N' of turn 1 asked pay {\"amount\":7}; it holds no decision on "
        "a call of worker 's2' (its workers: 's1'); record it again if the change is meant"
    )


async def test_a_call_the_cassette_holds_no_decision_on_is_left_waiting_for_nobody(
    tmp_path: Path,
) -> None:
    # The call was kept in the run store as its approver (the cassette) was asked, and
    # its worker failed: the run ended partial with the call still listed as waiting
    # for a person, whose approval would be taken up by nobody (an eval denies only
    # the calls of runs that end waiting), or made by a resumed run.
    tape = tmp_path / "paid.cassette.jsonl"
    await run(cassette(paying(), record=tape), Person())
    kept = [line for line in tape.read_text().splitlines() if '"by":"bob"' not in line]
    tape.write_text("\n".join(kept) + "\n")  # s2's decision, as if never recorded

    models = cassette(paying(), replay=tape)
    executor = Executor([PAYER], models, tools=[pay], aggregator="concat", store=tmp_path / "r.db")
    replayed = await executor.run("pay", subtasks=PLAN)
    assert replayed.status == "partial"
    assert await executor.pending(replayed.run_id) == []
    assert executor.store is not None
    entries = {e.pending.worker: e for e in await executor.store.approvals_of(replayed.run_id)}
    withdrawn = entries["s2"]
    assert withdrawn.decision is not None
    assert not withdrawn.decision.approve
    assert withdrawn.decided_by == WITHDRAWN_BY
    assert withdrawn.decision.reason == (
        "not run: its worker failed as it was asked about (CassetteMismatch)"
    )


async def test_a_run_that_ended_waiting_replays_waiting(tmp_path: Path) -> None:
    """With no approver, a run's calls wait in its store and the run ends waiting; an
    eval then denies them after the run. Replayed, the cassette (the approver) found no
    decision on them and failed their workers: the run ended partial, an eval's case
    that passed as waiting failed. The cassette keeps them as left waiting, and the
    replay leaves them so: its run ends waiting too, the same calls waiting."""
    tape = tmp_path / "waited.cassette.jsonl"

    async def waiting(models: Model, store: Path) -> tuple[RunResult, list[tuple[str, str]]]:
        executor = Executor([PAYER], models, tools=[pay], aggregator="concat", store=store)
        result = await executor.run("pay", subtasks=PLAN)
        pending = await executor.pending(result.run_id)
        return result, sorted((p.worker, p.tool) for p in pending)

    recorded, recorded_pending = await waiting(cassette(paying(), record=tape), tmp_path / "a.db")
    assert recorded.status == "waiting"
    assert recorded_pending == [("s1", "pay"), ("s2", "pay")]
    kept = sorted((d.worker, d.waited, d.approve) for d in Cassette(tape).decisions)
    assert kept == [("s1", True, False), ("s2", True, False)]
    replayed, replayed_pending = await waiting(cassette(paying(), replay=tape), tmp_path / "b.db")
    assert replayed.status == "waiting"
    assert replayed_pending == recorded_pending
    assert replayed.usage == recorded.usage


async def test_a_run_that_ended_waiting_replayed_with_no_store_says_it_needs_one(
    tmp_path: Path,
) -> None:
    # With no store to wait in, its calls were denied ('no approver is attached and the
    # run has no store to wait in'), and each worker then asked what was never recorded:
    # a CassetteMismatch that said to record it again, though nothing had changed.
    tape = tmp_path / "waited.cassette.jsonl"
    executor = Executor(
        [PAYER], cassette(paying(), record=tape), tools=[pay], store=tmp_path / "a.db"
    )
    assert (await executor.run("pay", subtasks=PLAN[:1])).status == "waiting"
    replaying = Executor([PAYER], cassette(paying(), replay=tape), tools=[pay])
    with pytest.raises(RunFailed) as failed:
        await replaying.run("pay", subtasks=PLAN[:1])
    said = (
        f"(s1: CassetteError: {tape}: worker 's1' could not wait as recorded: the recorded "
        "run left call 'CALL' of tool 'pay' waiting in its run store, and this replay has "
        "none to wait in: replay it with a run store (not --no-store))"
    )
    assert re.sub(r"'call_\d+'", "'CALL'", str(failed.value)).endswith(said)


async def left_waiting(request: ApprovalRequest) -> Decision:
    raise LeftWaiting("the input ended")


@pytest.mark.parametrize("person", [None, left_waiting], ids=["no approver", "decides nothing"])
async def test_a_call_denied_for_it_cannot_wait_is_replayed_as_recorded(
    tmp_path: Path, person: Approver | None
) -> None:
    """A run with no store whose calls nobody decided (no approver, or one that decided
    nothing) denied them, told no ``approval.decided``, so the cassette kept no
    decision, and its replay failed each worker with a CassetteMismatch that said to
    record it again, though nothing had changed. The denial is a decision, told and
    kept as any other."""
    tape = tmp_path / "denied.cassette.jsonl"
    recorded, told = await run(cassette(paying(), record=tape), person)
    assert recorded.status == "ok"
    assert "the run has no store to wait in" in answers(recorded)["s1"]
    by = NOBODY_BY if person is None else UNDECIDED_BY
    assert decided(told) == [(w, False, by, answers(recorded)[w][len("done: denied: "):], False)
                             for w in ("s1", "s2")]  # fmt: skip
    replayed, _ = await run(cassette(paying(), replay=tape))
    assert answers(replayed) == answers(recorded)
