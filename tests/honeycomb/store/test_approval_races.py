"""A decision is final and atomic, in either store: of several processes deciding one
call at once, approving and denying, the first wins and every other is told who
decided what, and when; the store keeps the winner's decision, and the run continues
with it."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from honeycomb import Decision
from honeycomb.run.record import RunRecord
from honeycomb.store import RunStore
from honeycomb.web import create_app
from honeycomb.web.approvals import StoreApprovals
from runtime.tools.approvals import ApprovalEntry
from tests.support.approvals import TASK, decide_with_others, executor, payer_saw, plan
from tests.support.processes import forked
from tests.support.stores import Where

DECIDERS = 6


async def test_of_six_processes_deciding_one_call_at_once_exactly_one_wins(
    store: Where, tmp_path: Path
) -> None:
    db, effects = store, tmp_path / "runs.effects"
    first = executor(db, effects)
    waiting = await first.run(TASK, subtasks=plan(1), run_id="r1")
    assert waiting.status == "waiting"
    first.store.close()  # type: ignore[union-attr]

    context = forked()  # processes of their own, each with its connection to the store
    ready, told = context.Barrier(DECIDERS), context.Queue()
    deciders = [
        context.Process(
            target=decide_with_others,
            args=(str(db), str(effects), i % 2 == 0, f"decider-{i}", ready, told),
        )
        for i in range(DECIDERS)
    ]
    for process in deciders:
        process.start()
    answers = dict(told.get(timeout=120) for _ in deciders)
    for process in deciders:
        process.join(timeout=60)
        assert process.exitcode == 0

    winners = [by for by, answer in answers.items() if answer == "decided"]
    assert len(winners) == 1, answers
    (winner,) = winners
    approved = int(winner.rsplit("-", 1)[1]) % 2 == 0
    verb = "approved" if approved else "denied"
    for by, answer in answers.items():
        if by != winner:
            assert answer.startswith("AlreadyDecided: "), answer
            assert f"it was decided already ({verb} by {winner} at " in answer, answer
    (entry,) = first.store.approvals("r1")  # type: ignore[union-attr]
    assert entry.decision is not None
    assert (entry.decision.approve, entry.decided_by) == (approved, winner)
    if not approved:
        assert entry.decision.reason == f"no, says {winner}"

    done = await executor(db, effects).resume("r1")
    expected = "ok: paid 120 to ann" if approved else f"error: denied: no, says {winner}"
    assert payer_saw(done) == f"payer saw: {expected}"


async def test_a_decision_recorded_first_stands_over_the_one_a_worker_records_after(
    store: Where, tmp_path: Path
) -> None:
    """An approver's (or a time limit's) decision, recorded by the worker, never
    replaces a person's recorded a moment before: the worker is given the one that
    stands, and acts on it."""
    db, effects = tmp_path / "runs.db", tmp_path / "runs.effects"
    first = executor(db, effects)
    await first.run(TASK, subtasks=plan(1), run_id="r1")
    await first.decide("r1", "pay_1", approve=False, reason="not ann", by="ann")
    (asked,) = first.store.approvals("r1")  # type: ignore[union-attr]

    record = RunRecord(first.store, "r1")  # type: ignore[arg-type]
    await record.take()
    worker = record.worker("payer")
    mine = ApprovalEntry(
        pending=asked.pending, decision=Decision.approved(), decided_at=time.time(),
        decided_by="the approver finance",
    )  # fmt: skip
    stands = await worker.record_approval(mine)
    await record.release()
    assert (stands.decision, stands.decided_by) == (Decision.denied("not ann"), "ann")
    assert first.store.approvals("r1") == [stands]  # type: ignore[union-attr]


async def test_the_page_of_honeycomb_serve_says_who_decided_first(tmp_path: Path) -> None:
    db, effects = tmp_path / "runs.db", tmp_path / "runs.effects"
    first = executor(db, effects)
    await first.run(TASK, subtasks=plan(1), run_id="r1")
    await first.decide("r1", "pay_1", approve=True, by="ann")

    store = RunStore(db)
    app = create_app(store, token="t" * 32, approvals=StoreApprovals(store))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as page:
        late = await page.post(
            "/runs/r1/calls/pay_1/decision",
            data={"decision": "deny", "reason": "no"},
            headers={"authorization": "Bearer " + "t" * 32},
        )
    assert late.status_code == 409
    assert "it was decided already (approved by ann at " in late.text
