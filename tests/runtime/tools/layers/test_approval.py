"""The approval layer alone, with a fake next layer."""

from __future__ import annotations

import pytest

from runtime.tools.approvals import (
    ApprovalGate,
    ApprovalNeeded,
    ApprovalRequest,
    ApprovalRule,
    Decision,
    MemoryApprovalLog,
)
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
