"""A call of a hive called as a tool that needs approval, in a run with no approver:
it cannot wait (the sub-run keeps no store), and its denial says so, and what to
attach, whether the calling run keeps a store or not."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from honeycomb import (
    ApprovalRequest,
    Approver,
    Decision,
    Event,
    Executor,
    Policy,
    Role,
    Subtask,
    tool,
)
from honeycomb.events import ApprovalDecided, ApprovalRequested
from honeycomb.run.agents import CANNOT_WAIT
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from runtime import AssistantMessage, ModelRequest
from runtime.concurrency import TimedOut, within
from runtime.testing import call
from runtime.tools.approvals import CALLER_BY, NOBODY_BY
from tests.support.model_requests import Answer, observations

ONE = [{"id": "s1", "role": "lead", "instruction": "pay the team"}]


def _calling(
    paid: list[str],
    store: Path | None,
    approver: Approver | None = None,
    events: list[Event] | None = None,
) -> Executor:
    """A lead that calls the hive ``payroll``, whose clerk's ``pay`` needs approval
    (``approver``: the lead's run's; ``events``: gets the sub-run's)."""

    @tool(approval=True)
    def pay(to: str) -> str:
        """Pay someone."""
        paid.append(to)
        return f"paid {to}"

    def clerk(request: ModelRequest) -> Answer:
        seen = observations(request)
        if seen:
            return f"clerk: {seen[0].content}"
        return AssistantMessage(tool_calls=(call("pay", {"to": "bob"}),))

    def lead(request: ModelRequest) -> Answer:
        seen = observations(request)
        if not seen:
            return AssistantMessage(tool_calls=(call("payroll", {"instruction": "pay bob"}),))
        return "lead: " + seen[0].content

    payroll = Executor(
        [Role(name="clerk", tools=("pay",))], FunctionModel(clerk), tools=[pay],
        aggregator="concat", planner=lambda task: [("clerk", task)],
        on_event=[] if events is None else [events.append],
    )  # fmt: skip
    return Executor(
        [Role(name="lead", tools=("payroll",))], FunctionModel(lead),
        tools=[payroll.as_tool("payroll")], aggregator="concat", store=store,
        approver=approver,
    )  # fmt: skip


async def test_a_sub_hives_call_in_a_run_with_a_store_is_denied_for_the_true_reason(
    db: Path,
) -> None:
    paid: list[str] = []
    result = await _calling(paid, db).run("t", subtasks=ONE, run_id="r1")
    assert result.status == "ok"
    said = result.subtasks["s1"].text
    assert said == f"lead: ## s1 (clerk)\nclerk: denied: {CANNOT_WAIT}"
    assert "no store to wait in" not in said  # the calling run has one
    assert "a hive called as a tool cannot wait for a decision" in said
    assert "Attach an approver to the calling run (Executor(approver=...)" in said
    assert paid == []
    assert await RunStore(db).approvals_of("r1") == []  # nothing waits that never will


async def test_a_sub_hives_call_in_a_run_without_a_store_is_denied_so_too() -> None:
    paid: list[str] = []
    result = await _calling(paid, None).run("t", subtasks=ONE)
    assert result.subtasks["s1"].text == f"lead: ## s1 (clerk)\nclerk: denied: {CANNOT_WAIT}"
    assert paid == []


async def test_a_sub_hives_call_is_told_decided_by_whoever_decided_it() -> None:
    """The sub-run of a hive with no approver of its own: its calls' decisions were
    told as made by "the run's approver", which the sub-run does not have: the calling
    run's approver decided them, or, with none, nobody could."""

    async def approves(request: ApprovalRequest) -> Decision:
        return Decision.approved()

    async def ann(request: ApprovalRequest) -> Decision:
        return Decision.approved(by="ann")

    bys, asked = [], []
    for approver in (approves, ann, None):
        events: list[Event] = []
        await _calling([], None, approver, events).run("t", subtasks=ONE)
        (decided,) = [e for e in events if isinstance(e, ApprovalDecided)]
        bys.append(decided.by)
        asked.append([e.asked for e in events if isinstance(e, ApprovalRequested)])
    assert bys == [CALLER_BY, "ann", NOBODY_BY]
    # With nobody to decide, nobody is said to be asked: a listener was told that an
    # approver was, and the worker left its slot (and stopped its clock) meanwhile.
    assert asked == [["approver"], ["approver"], []]


async def test_a_sub_hives_worker_keeps_its_callers_slot_while_a_sibling_waits() -> None:
    """``max_workers: 1``: the sub-run of a hive s1 calls runs a clerk, whose call waits
    for a person, and a researcher. s1's slot was left as the clerk was asked about,
    while the researcher still worked, so s2 ran beside it. Now s2 runs only once
    nothing of s1 works but the wait."""
    asked, s2_done = asyncio.Event(), asyncio.Event()
    running: set[str] = set()
    most = 0

    async def working(who: str) -> None:
        nonlocal most
        running.add(who)
        most = max(most, len(running))
        await asyncio.sleep(0.05)  # its own latency: the work of two workers would meet
        running.discard(who)

    @tool(approval=True)
    def pay(to: str) -> str:
        """Pay someone."""
        return f"paid {to}"

    async def answer(request: ModelRequest) -> Answer:
        me, seen = str(request.messages[0].content), observations(request)
        if me.startswith("You are the clerk"):
            if seen:
                return f"clerk: {seen[0].content}"
            return AssistantMessage(tool_calls=(call("pay", {"to": "bob"}),))
        if me.startswith("You are the researcher"):
            await asked.wait()  # it works while the clerk's call is asked about
            await working("researcher")
            return "researcher: found"
        if me.startswith("You are the other"):
            await working("s2")
            s2_done.set()
            return "s2 done"
        if seen:
            return "lead: " + seen[0].content
        return AssistantMessage(tool_calls=(call("team", {"instruction": "pay bob"}),))

    async def person(request: ApprovalRequest) -> Decision:
        asked.set()
        with contextlib.suppress(TimedOut), within(5):
            await s2_done.wait()
            return Decision.approved()
        return Decision.denied("s2 never ran while the clerk's call was asked about")

    team = Executor(
        [Role(name="clerk", tools=("pay",)), Role(name="researcher")], FunctionModel(answer),
        tools=[pay], aggregator="concat",
        planner=lambda task: [("clerk", task), ("researcher", task)],
    )  # fmt: skip
    calling = Executor(
        [Role(name="lead", tools=("team",)), Role(name="other")], FunctionModel(answer),
        tools=[team.as_tool("team")], aggregator="concat", approver=person,
        policy=Policy(max_workers=1),
    )  # fmt: skip
    plan = [
        Subtask(id="s1", role="lead", instruction="pay the team"),
        Subtask(id="s2", role="other", instruction="other work"),
    ]
    with within(10):
        result = await calling.run("t", subtasks=plan)
    assert result.subtasks["s1"].text.startswith("lead: ## s1 (clerk)\nclerk: paid bob")
    assert result.subtasks["s2"].text == "s2 done"
    assert most == 1  # never two workers at once
