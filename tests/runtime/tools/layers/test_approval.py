"""The approval layer alone, with a fake next layer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from runtime.events import ApprovalDecided, ApprovalRequested, Event, Tracer
from runtime.messages import ToolCall
from runtime.tools.approval_gate import ApprovalGate
from runtime.tools.approvals import (
    ApprovalEntry,
    ApprovalNeeded,
    ApprovalRequest,
    ApprovalRule,
    Decision,
    MemoryApprovalLog,
)
from runtime.tools.define import Tool
from runtime.tools.layers import Approving, Outcome, Prepared
from tests.support.layers import Next, look, prepared, send

ASKING = ApprovalRule(tools=frozenset({"send"}))


async def decide(request: ApprovalRequest) -> Decision:
    if request.arguments["to"] == "bo":
        return Decision.denied("not bo")
    if request.arguments["to"] == "cy":
        return Decision.approved({"to": "dee"})
    return Decision.approved()


async def test_denied_calls_are_refused_and_edited_ones_run_with_their_edits() -> None:
    inner = Next()
    layer = Approving(inner, ApprovalGate(ASKING, approver=decide))
    calls = [prepared(send, 0, to="bo"), prepared(send, 1, to="cy"), prepared(look, 2, key="k")]
    denied, edited, free = await layer.admit(calls)
    assert denied == Outcome(status="error", content="denied: not bo", error="denied: not bo")
    assert isinstance(edited, Prepared)
    assert edited.kwargs == {"to": "dee"}
    assert free == calls[2]
    assert inner.admitted == [[edited, free]]
    outcome = await layer(edited)  # its observation says it ran with edits
    assert outcome.content.startswith("(A person approved this call with edited arguments: ")
    assert outcome.content.endswith("ran c1")
    assert await layer(free) == Outcome(status="ok", content="ran c2")


class NoDee:
    """An argument guard: no message to dee."""

    def __init__(self) -> None:
        self.checked: list[dict[str, Any]] = []

    async def check(
        self, calls: Sequence[tuple[ToolCall, Tool[Any, Any], dict[str, Any]]], turn: int
    ) -> list[str | None]:
        self.checked += [kwargs for _, _, kwargs in calls]
        return ["Error: refused (no dee)" if kw.get("to") == "dee" else None for _, _, kw in calls]


async def test_arguments_a_person_edited_pass_the_argument_guards_again() -> None:
    """The guards saw the model's arguments (cy) before the person was asked; the edit
    (to dee) is checked again, refused, and never reaches the layers below."""
    inner, guard = Next(), NoDee()
    layer = Approving(inner, ApprovalGate(ASKING, approver=decide), guard)
    calls = [prepared(send, 0, to="cy"), prepared(send, 1, to="ann"), prepared(look, 2, key="k")]
    edited, approved, free = await layer.admit(calls)
    assert isinstance(edited, Outcome)
    assert edited.status == "error"
    assert edited.content.startswith("(A person approved this call with edited arguments: ")
    assert edited.content.endswith("Error: refused (no dee)")
    assert inner.admitted == [[approved, free]]
    assert guard.checked == [{"to": "dee"}]  # the edit alone: the rest were checked before


async def test_a_turn_none_of_whose_calls_asks_goes_through_untouched() -> None:
    inner = Next()
    calls = [prepared(look, 0, key="a"), prepared(look, 1, key="b")]
    assert await Approving(inner, ApprovalGate(ASKING, approver=decide)).admit(calls) == calls
    assert inner.admitted == [calls]


async def test_a_call_with_no_decision_stops_the_turn_before_the_next_layer() -> None:
    inner = Next()
    layer = Approving(inner, ApprovalGate(ASKING, log=MemoryApprovalLog(), worker="w"))
    with pytest.raises(ApprovalNeeded) as stopped:
        await layer.admit([prepared(look, 0, key="a"), prepared(send, 1, to="ann")])
    assert [p.call_id for p in stopped.value.pending] == ["c1"]
    assert inner.admitted == []


async def test_a_call_is_told_waiting_once_and_decided_once_however_often_its_turn_runs() -> None:
    """A turn that pauses runs again (once its calls are decided, or as a nested
    worker's caller goes on): its gate tells each call's ``approval.requested`` and
    ``approval.decided`` once, not once a run of the turn."""
    heard: list[Event] = []
    log = MemoryApprovalLog()
    gate = ApprovalGate(ASKING, log=log, worker="w", tracer=Tracer(heard.append, log=False))
    layer = Approving(Next(), gate)
    calls = [prepared(send, 0, to="al")]
    for _ in range(2):  # paused, and paused again before anyone decides
        with pytest.raises(ApprovalNeeded):
            await layer.admit(calls)
    (entry,) = log.entries.values()
    await log.record(
        ApprovalEntry(pending=entry.pending, decision=Decision.approved(), decided_by="ann")
    )
    for _ in range(2):
        await layer.admit(calls)
    assert [type(e) for e in heard] == [ApprovalRequested, ApprovalDecided]
    requested, decided = heard
    assert isinstance(requested, ApprovalRequested)
    assert (requested.worker, requested.call_id, requested.asked) == ("w", "c0", "store")
    assert isinstance(decided, ApprovalDecided)
    assert (decided.approved, decided.by) == (True, "ann")
