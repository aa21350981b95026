"""Evals where they meet approvals: a call an eval's run leaves waiting for a person is
denied by the eval as the run ends, or is cut off, so nothing lists it as waiting and
no decision resumes the run into its side effect after the eval."""

from __future__ import annotations

import asyncio
import html
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from honeycomb import Executor, Role, ToolMessage, tool
from honeycomb.evals import Case, evaluate, junit, runner
from honeycomb.evals.html import report_page
from honeycomb.evals.undecided import DECIDED_BY, REASON, deny_undecided
from honeycomb.run.decide import decide
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel, call
from runtime import ModelRequest
from runtime.errors import AlreadyDecided, ApprovalError
from tests.support.model_requests import Answer
from tests.support.stores import Where


def _payer(store: RunStore, paid: list[str], *more: Role, **options: Any) -> Executor:
    """A payer whose one payment asks a person, and after any answer says so; a
    ``holder`` among ``more`` calls ``hold``."""

    @tool(side_effects=True, approval=True)
    def pay(to: str) -> str:
        """Pay someone."""
        paid.append(to)
        return f"paid {to}"

    def answer(request: ModelRequest) -> Answer:
        if str(request.messages[0].content).startswith("You are the holder worker"):
            return call("hold", {})
        told = [m.content for m in request.messages if isinstance(m, ToolMessage)]
        return f"told: {told[-1]}" if told else call("pay", {"to": "bob"})

    return Executor(
        [Role(name="payer", tools=("pay",)), *more],
        FunctionModel(answer),
        tools=[pay, *options.pop("tools", [])],
        aggregator="concat",
        store=store,
        **options,
    )


async def test_a_call_an_evals_run_leaves_waiting_is_denied_and_never_runs(
    tmp_path: Path,
) -> None:
    paid: list[str] = []
    store = RunStore(tmp_path / "runs.db")
    executor = _payer(store, paid, planner=lambda task: [("payer", task)])
    async with executor:
        report = await evaluate(executor, [Case(id="pay", task="Pay bob.")])
        (attempt,) = report.cases[0].attempts
        assert attempt.status == "waiting"  # the report says how it ended
        run_id = attempt.run_id
        assert await executor.pending(run_id) == []  # listed as waiting nowhere
        (entry,) = await store.approvals_of(run_id)
        assert entry.decision is not None
        assert not entry.decision.approve
        assert (entry.decision.reason, entry.decided_by) == (REASON, DECIDED_BY)
        with pytest.raises(AlreadyDecided):  # a person's approval is refused
            await executor.decide(run_id, entry.pending.call_id, approve=True)
        resumed = await executor.resume(run_id)  # resumed anyway: the call never runs
    assert paid == []
    assert f"denied: {REASON}" in resumed.answer_text


async def test_a_call_waiting_in_a_run_cut_off_mid_eval_is_denied(tmp_path: Path) -> None:
    paid: list[str] = []
    store = RunStore(tmp_path / "runs.db")
    asked = asyncio.Event()

    @tool
    async def hold() -> str:
        """Wait until the payer's call waits, then forever."""
        # No event says a call waits: the store, where it is recorded, is looked at.
        while not [e for r in store.runs() for e in await store.approvals_of(r.run_id)]:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        asked.set()
        await asyncio.Event().wait()
        return "never"

    executor = _payer(
        store,
        paid,
        Role(name="holder", tools=("hold",)),
        tools=[hold],
        planner=lambda task: [("payer", "Pay bob."), ("holder", "Hold on.")],
    )
    async with executor:
        eval_task = asyncio.create_task(evaluate(executor, [Case(id="pay", task="Pay bob.")]))
        await asyncio.wait_for(asked.wait(), 30)
        eval_task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await eval_task
        (run,) = store.runs()
        assert run.status == "interrupted"
        (entry,) = await store.approvals_of(run.run_id)
    assert entry.decision is not None
    assert not entry.decision.approve
    assert entry.decided_by == DECIDED_BY
    assert paid == []


async def test_a_call_of_an_evals_run_is_decided_by_nobody_while_the_eval_goes(
    tmp_path: Path,
) -> None:
    """Executor.decide approved a call an eval's run waited on while its other worker
    went on: the run took the approval up and paid, and the case's verdict was a
    person's. The decision is refused; the eval denies the call as the run ends."""
    paid: list[str] = []
    store = RunStore(tmp_path / "runs.db")
    asked, go_on = asyncio.Event(), asyncio.Event()

    @tool
    async def hold() -> str:
        """Hold on."""
        await go_on.wait()
        return "held"

    executor = _payer(
        store,
        paid,
        Role(name="holder", tools=("hold",)),
        tools=[hold],
        planner=lambda task: [("payer", "Pay bob."), ("holder", "Hold on.")],
        on_event=[lambda event: asked.set() if event.kind == "approval.requested" else None],
    )
    async with executor:
        going = asyncio.create_task(evaluate(executor, [Case(id="pay", task="Pay bob.")]))
        await asyncio.wait_for(asked.wait(), 30)
        await store.flush()
        (run,) = store.runs()
        assert run.run_id.startswith("eval:")
        (entry,) = await store.approvals_of(run.run_id)
        with pytest.raises(ApprovalError, match="nobody decides on an eval's calls"):
            await executor.decide(run.run_id, entry.pending.call_id, approve=True)
        go_on.set()
        report = await going
    assert report.cases[0].attempts[0].status == "waiting"
    (entry,) = await store.approvals_of(run.run_id)
    assert entry.decided_by == DECIDED_BY
    assert paid == []


async def test_a_case_left_waiting_says_so_first_and_names_the_call_that_waits(
    tmp_path: Path,
) -> None:
    store = RunStore(tmp_path / "runs.db")
    executor = _payer(store, [], planner=lambda task: [("payer", task)])
    case = Case(id="pay", task="Pay bob.", checks=[lambda answer, run: "paid" in answer])
    async with executor:
        report = await evaluate(executor, [case])
    (attempt,) = report.cases[0].attempts
    waits = (
        "pay by payer (s1) waits for a person's approval, which nobody gives in an eval: "
        'pay {"to": "bob"}'
    )
    assert (attempt.status, attempt.error) == ("waiting", waits)
    # Not its check's verdict on an answer it never had: how its run ended, and why.
    said = f"the run ended waiting, with no answer: {waits}"
    assert report.cases[0].why == said
    (failure,) = ET.fromstring(junit(report).encode()).iter("failure")
    assert failure.attrib["message"] == said
    assert html.escape(said) in report_page(report)  # the page, as serve shows it


async def test_an_eval_cancelled_as_it_denies_a_runs_waiting_calls_denies_them_still(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = RunStore(tmp_path / "runs.db")
    denying, go_on = asyncio.Event(), asyncio.Event()

    async def slow_deny(kept: RunStore, run_id: str) -> int:
        denying.set()  # the run ended waiting: Ctrl-C comes now
        await go_on.wait()
        return await deny_undecided(kept, run_id)

    monkeypatch.setattr(runner, "deny_undecided", slow_deny)
    executor = _payer(store, [], planner=lambda task: [("payer", task)])
    async with executor:
        eval_task = asyncio.create_task(evaluate(executor, [Case(id="pay", task="Pay bob.")]))
        await asyncio.wait_for(denying.wait(), 30)
        eval_task.cancel()  # its wait for go_on is cancelled, whatever comes after
        go_on.set()
        with pytest.raises(asyncio.CancelledError):
            await eval_task
        (run,) = store.runs()
        (entry,) = await store.approvals_of(run.run_id)
    assert entry.decision is not None  # not left for a person to approve after the eval
    assert entry.decided_by == DECIDED_BY


async def test_a_users_run_whose_id_begins_eval_is_a_run_like_any_other(tmp_path: Path) -> None:
    """A run a user named ``eval:...`` was taken for an eval's by its id: nobody could
    decide its calls. An eval's runs are kept as the eval's in the store instead."""
    paid: list[str] = []
    store = RunStore(tmp_path / "runs.db")
    executor = _payer(store, paid, planner=lambda task: [("payer", task)])
    async with executor:
        waiting = await executor.run("Pay bob.", run_id="eval:ev-mine:0123456789ab")
        (call_waiting,) = await executor.pending(waiting.run_id)
        await executor.decide(waiting.run_id, call_waiting.call_id, approve=True, by="ann")
        done = await executor.resume(waiting.run_id)
    assert (done.status, paid) == ("ok", ["bob"])


async def _killed_eval(store: RunStore, paid: list[str], monkeypatch: pytest.MonkeyPatch) -> str:
    """The run of an eval whose process stopped as its call waited, before the eval
    denied it (as ``kill -9`` leaves it): its id. The eval goes on with its id
    ``ev-killed``; its hold holds the first time alone."""
    asked, held = asyncio.Event(), asyncio.Event()

    @tool
    async def hold() -> str:
        """Hold on."""
        if not held.is_set():
            held.set()
            await asyncio.Event().wait()
        return "held"

    async def killed(kept: RunStore, run_id: str) -> int:
        return 0  # the process was gone before it denied anything

    executor = _payer(
        store,
        paid,
        Role(name="holder", tools=("hold",)),
        tools=[hold],
        planner=lambda task: [("payer", "Pay bob."), ("holder", "Hold on.")],
        on_event=[lambda event: asked.set() if event.kind == "approval.requested" else None],
    )
    with monkeypatch.context() as patched:
        patched.setattr(runner, "deny_undecided", killed)
        async with executor:
            case = Case(id="pay", task="Pay bob.")
            going = asyncio.create_task(evaluate(executor, [case], eval_id="ev-killed"))
            await asyncio.wait_for(asked.wait(), 30)
            going.cancel()
            with pytest.raises(asyncio.CancelledError):
                await going
    (run,) = store.runs()
    assert run.status == "interrupted"
    return run.run_id


async def test_a_call_an_eval_killed_left_waiting_is_denied_by_a_person_never_approved(
    store: Where, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An eval killed as its run's call waited left the call undecidable for ever: a
    denial was refused as one of a running eval's. Once no process carries the run on,
    a person may deny it; an approval is refused, saying what may be done."""
    runs = RunStore(store)  # either store
    run_id = await _killed_eval(runs, [], monkeypatch)
    (entry,) = await runs.approvals_of(run_id)
    call_id = entry.pending.call_id
    with pytest.raises(ApprovalError) as refused:
        await decide(runs, run_id, call_id, approve=True)
    assert "nobody approves an eval's calls; its eval no longer carries the run on" in str(
        refused.value
    )
    assert f"honeycomb approve {run_id} {call_id} --deny" in str(refused.value)
    assert "--eval-id ev-killed), which denies it" in str(refused.value)
    await decide(runs, run_id, call_id, approve=False, by="ann")
    (entry,) = await runs.approvals_of(run_id)
    assert entry.decision is not None
    assert (entry.decision.approve, entry.decided_by) == (False, "ann")
    runs.close()


async def test_an_eval_gone_on_with_denies_what_its_killed_runs_left_waiting(
    store: Where, monkeypatch: pytest.MonkeyPatch
) -> None:
    paid: list[str] = []
    runs = RunStore(store)  # either store
    run_id = await _killed_eval(runs, paid, monkeypatch)
    executor = _payer(runs, paid, planner=lambda task: [("payer", task)])
    async with executor:
        report = await evaluate(executor, [Case(id="pay", task="Pay bob.")], eval_id="ev-killed")
    assert report.cases[0].attempts[0].run_id != run_id  # made anew
    (entry,) = await runs.approvals_of(run_id)
    assert entry.decision is not None
    assert (entry.decision.approve, entry.decided_by) == (False, DECIDED_BY)
    assert paid == []
    runs.close()
