"""Two deciders of one call: the run's approver, asked about it, and whoever else can
record a decision in the approval log (a person on a page of the run store). The first
decision settles the call; the approver's question is withdrawn, told by whom."""

from __future__ import annotations

import asyncio
import time

import anyio

from runtime.tools.approval_gate import ApprovalGate, settled_by
from runtime.tools.approvals import (
    ApprovalEntry,
    ApprovalRequest,
    ApprovalRule,
    Decision,
    MemoryApprovalLog,
)
from tests.support.layers import prepared, send

ASKING = ApprovalRule(tools=frozenset({"send"}))


async def test_a_decision_recorded_first_settles_a_call_the_approver_asks_about() -> None:
    log = MemoryApprovalLog()
    asked = asyncio.Event()
    withdrawn: list[ApprovalEntry | None] = []

    async def person(request: ApprovalRequest) -> Decision:
        asked.set()
        try:
            await asyncio.Event().wait()  # reads on, and never answers
        except asyncio.CancelledError as exc:
            withdrawn.append(settled_by(exc))
            raise
        return Decision.approved()

    gate = ApprovalGate(ASKING, approver=person, log=log, worker="w")
    call = prepared(send, 1, to="ann")
    with anyio.fail_after(10):  # (without the race, it waits for the approver for ever)
        async with asyncio.TaskGroup() as group:
            deciding = group.create_task(gate.decide([(call.call, send, call.kwargs)], 1))
            await asked.wait()
            (waits,) = log.entries.values()  # kept as it is asked: others see it waiting
            assert waits.decision is None
            denied = ApprovalEntry(
                pending=waits.pending,
                decision=Decision.denied("not today"),
                decided_at=time.time(),
                decided_by="bo, on the page",
            )
            await log.record(denied)
    (verdict,) = deciding.result()
    assert verdict is not None
    assert verdict.refusal == "denied: not today"
    assert withdrawn == [denied]
    assert log.entries[1, "c1"] == denied


async def test_the_approvers_decision_stands_when_it_comes_first() -> None:
    log = MemoryApprovalLog()

    async def person(request: ApprovalRequest) -> Decision:
        return Decision.approved(by="ann")

    gate = ApprovalGate(ASKING, approver=person, log=log, worker="w")
    call = prepared(send, 1, to="ann")
    (verdict,) = await gate.decide([(call.call, send, call.kwargs)], 1)
    assert verdict is not None
    assert verdict.refusal is None
    kept = log.entries[1, "c1"]
    assert kept.decision == Decision.approved(by="ann")
    assert kept.decided_by == "ann"
