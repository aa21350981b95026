"""Repeats of the previous turn's calls: only one of a call that ended ``ok`` is
skipped (its result is above); a call that failed, timed out, asked to be retried or
was refused may be made again, and runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio

from runtime.errors import ModelRetry
from runtime.messages import ToolCall
from runtime.testing import call
from runtime.tools import Tool, ToolRegistry, tool
from runtime.tools.approval_gate import ApprovalGate
from runtime.tools.approvals import ApprovalRequest, ApprovalRule, Decision
from runtime.tools.dispatch import Dispatcher, DispatchPolicy
from tests.support.dispatching import layered


def dispatcher(*tools: Tool[Any, Any], **options: Any) -> Dispatcher:
    return layered(ToolRegistry(tools), **options)


def lookup_failing(times: int, failure: BaseException) -> tuple[Tool[Any, Any], list[str]]:
    """A ``lookup(city)`` tool whose first ``times`` runs raise ``failure``, and the
    list of the cities it ran for."""
    runs: list[str] = []

    @tool
    async def lookup(city: str) -> str:
        runs.append(city)
        if len(runs) <= times:
            raise failure
        return f"{city} is sunny"

    return lookup, runs


async def test_a_repeat_of_a_call_that_raised_runs_again() -> None:
    lookup, runs = lookup_failing(1, ConnectionError("transient"))
    d = dispatcher(lookup)
    first = [call("lookup", {"city": "Oslo"}, id="t1")]
    (failed,) = await d.dispatch(first, turn=1)

    (again,) = await d.dispatch([call("lookup", {"city": "Oslo"}, id="t2")], previous=first)

    assert failed.status == "error"
    assert (again.status, again.content) == ("ok", "Oslo is sunny")
    assert runs == ["Oslo", "Oslo"]


async def test_a_repeat_of_a_call_that_asked_to_be_retried_runs_again() -> None:
    lookup, runs = lookup_failing(1, ModelRetry("the service is busy; call again"))
    d = dispatcher(lookup)
    first = [call("lookup", {"city": "Oslo"}, id="t1")]
    (hinted,) = await d.dispatch(first, turn=1)

    (again,) = await d.dispatch([call("lookup", {"city": "Oslo"}, id="t2")], previous=first)

    assert (hinted.status, hinted.content) == ("error", "Error: the service is busy; call again")
    assert again.status == "ok"
    assert runs == ["Oslo", "Oslo"]


async def test_a_repeat_of_a_call_that_timed_out_runs_again() -> None:
    runs: list[str] = []

    @tool(timeout=0.05)
    async def lookup(city: str) -> str:
        runs.append(city)
        if len(runs) == 1:
            await anyio.sleep(10)  # past its time limit: cancelled
        return f"{city} is sunny"

    d = dispatcher(lookup)
    first = [call("lookup", {"city": "Oslo"}, id="t1")]
    (late,) = await d.dispatch(first, turn=1)

    (again,) = await d.dispatch([call("lookup", {"city": "Oslo"}, id="t2")], previous=first)

    assert late.status == "timeout"
    assert again.status == "ok"
    assert runs == ["Oslo", "Oslo"]


class RefuseOnce:
    """An argument guard that refuses the first call it checks, and no other."""

    def __init__(self) -> None:
        self.checked = 0

    async def check(
        self, calls: Sequence[tuple[ToolCall, Tool[Any, Any], dict[str, Any]]], turn: int
    ) -> list[str | None]:
        verdicts: list[str | None] = []
        for _ in calls:
            self.checked += 1
            verdicts.append("Error: not now." if self.checked == 1 else None)
        return verdicts


async def test_a_repeat_of_a_refused_call_runs_again() -> None:
    lookup, runs = lookup_failing(0, RuntimeError("never raised"))
    d = dispatcher(lookup, guard=RefuseOnce())
    first = [call("lookup", {"city": "Oslo"}, id="t1")]
    (refused,) = await d.dispatch(first, turn=1)

    (again,) = await d.dispatch([call("lookup", {"city": "Oslo"}, id="t2")], previous=first)

    assert (refused.status, refused.content) == ("error", "Error: not now.")
    assert again.status == "ok"
    assert runs == ["Oslo"]


async def test_a_repeat_of_a_call_that_failed_with_a_persons_edits_runs_again() -> None:
    # The model asked for cy; a person edited that to dee, and the call failed. The
    # model's call, as it gave it, is what its repeat is compared with.
    sent: list[str] = []

    @tool(side_effects=True)
    async def send(to: str) -> str:
        sent.append(to)
        if to == "dee":
            raise ConnectionError("dee is away")
        return f"sent to {to}"

    async def approver(request: ApprovalRequest) -> Decision:
        return Decision.approved({"to": "dee"} if not sent else None)

    gate = ApprovalGate(ApprovalRule(tools=frozenset({"send"})), approver=approver)
    d = dispatcher(send, approvals=gate)
    first = [call("send", {"to": "cy"}, id="t1")]
    (failed,) = await d.dispatch(first, turn=1)

    (again,) = await d.dispatch([call("send", {"to": "cy"}, id="t2")], previous=first)

    assert failed.status == "error"
    assert (again.status, again.content) == ("ok", "sent to cy")
    assert sent == ["dee", "cy"]


async def test_a_call_made_twice_in_a_turn_that_ended_ok_once_is_a_repeat_next_turn() -> None:
    # The two calls of the first turn are the same: one failed, the other ended ok, so
    # a result is above and the repeat is skipped.
    lookup, runs = lookup_failing(1, ConnectionError("transient"))
    d = dispatcher(lookup)
    first = [call("lookup", {"city": "Oslo"}, id=f"t1{n}") for n in "ab"]
    statuses = sorted(r.status for r in await d.dispatch(first, turn=1))

    (again,) = await d.dispatch([call("lookup", {"city": "Oslo"}, id="t2")], previous=first)

    assert statuses == ["error", "ok"]
    assert again.status == "skipped"
    assert runs == ["Oslo", "Oslo"]


async def test_a_repeat_of_a_skipped_repeat_is_still_skipped() -> None:
    lookup, runs = lookup_failing(0, RuntimeError("never raised"))
    d = dispatcher(lookup)
    previous: list[ToolCall] = []
    statuses = []
    for turn in (1, 2, 3):
        batch = [call("lookup", {"city": "Oslo"}, id=f"t{turn}")]
        (result,) = await d.dispatch(batch, turn=turn, previous=previous)
        statuses.append(result.status)
        previous = batch

    assert statuses == ["ok", "skipped", "skipped"]
    assert runs == ["Oslo"]


async def test_repeats_of_ok_calls_run_when_skipping_is_off() -> None:
    lookup, runs = lookup_failing(0, RuntimeError("never raised"))
    d = dispatcher(lookup, policy=DispatchPolicy(skip_repeats=False))
    first = [call("lookup", {"city": "Oslo"}, id="t1")]
    await d.dispatch(first, turn=1)

    (again,) = await d.dispatch([call("lookup", {"city": "Oslo"}, id="t2")], previous=first)

    assert again.status == "ok"
    assert runs == ["Oslo", "Oslo"]


async def test_calls_of_a_turn_this_dispatcher_did_not_run_are_no_repeats() -> None:
    # A resumed state's previous turn: how its calls ended is not known here (it may
    # have failed), so a call like one of them runs.
    lookup, runs = lookup_failing(0, RuntimeError("never raised"))
    d = dispatcher(lookup)
    resumed = (call("lookup", {"city": "Oslo"}, id="t1"),)

    (result,) = await d.dispatch([call("lookup", {"city": "Oslo"}, id="t2")], previous=resumed)

    assert result.status == "ok"
    assert runs == ["Oslo"]
