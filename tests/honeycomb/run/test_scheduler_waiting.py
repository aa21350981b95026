"""Subtasks after one that waits for a person's decision wait too, however far down
the chain they are, and run on resume once it is decided; and a worker whose approver
asks a person leaves its slot to the others meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from honeycomb import (
    ApprovalRequest,
    Approvals,
    AssistantMessage,
    Decision,
    Executor,
    ModelRequest,
    Policy,
    Role,
    RunFailed,
    Subtask,
    ToolMessage,
    tool,
)
from honeycomb.testing import FunctionModel, call
from runtime.concurrency import TimedOut, within
from tests.support.approvals import TASK, executor, plan


class AtOnce:
    """Who works at once, and the most that ever did."""

    def __init__(self) -> None:
        self.running: set[str] = set()
        self.most = 0

    async def working(self, who: str, seconds: float) -> None:
        """``who`` works for ``seconds``: its own latency, so two workers' work would meet."""
        self.running.add(who)
        self.most = max(self.most, len(self.running))
        await asyncio.sleep(seconds)
        self.running.discard(who)


def approving_once(
    asked: asyncio.Event, done: asyncio.Event
) -> Callable[[ApprovalRequest], Awaitable[Decision]]:
    """A person who, asked (``asked`` is set), approves once ``done`` is set, which must
    happen while they read (within 5 s): else they deny the call, saying so."""

    async def person(request: ApprovalRequest) -> Decision:
        asked.set()
        with contextlib.suppress(TimedOut), within(5):
            await done.wait()
            return Decision.approved()
        return Decision.denied("s2 never ran while the clerk's call was asked about")

    return person


@tool(side_effects=True)
async def pay(to: str) -> str:
    """Pay someone."""
    return f"paid {to}"


async def test_a_chain_after_a_waiting_subtask_waits_and_runs_on_resume(tmp_path: Path) -> None:
    db, effects = tmp_path / "runs.db", tmp_path / "effects.txt"
    subtasks = [
        *plan(1),
        Subtask(id="after", role="reader", instruction="read", depends_on=("payer",)),
        Subtask(id="last", role="reader", instruction="read", depends_on=("after",)),
    ]
    with anyio.fail_after(5):  # 'last' waited for 'after', which never ended: a deadlock
        waiting = await executor(db, effects).run(TASK, subtasks=subtasks, run_id="r1")
    assert waiting.status == "waiting"
    assert {k: s.status for k, s in waiting.subtasks.items()} == {
        "payer": "waiting", "r0": "ok", "after": "waiting", "last": "waiting",
    }  # fmt: skip
    await executor(db, effects).decide("r1", "pay_1", approve=True)
    with anyio.fail_after(5):
        done = await executor(db, effects).resume("r1")
    assert {k: s.status for k, s in done.subtasks.items()} == {
        "payer": "ok", "r0": "ok", "after": "ok", "last": "ok",
    }  # fmt: skip


async def test_a_worker_whose_approver_asks_a_person_leaves_its_slot_to_the_others() -> None:
    """``max_workers: 1``: while s1's approver waited for a person, s1 held the run's
    only slot, and s2 and s3 waited with it (the person's answer here needs theirs
    first: it never came). Now they run meanwhile, one at a time still, and s1 takes a
    slot again once the person has decided."""
    others_done = asyncio.Event()
    answered: list[str] = []
    running: list[str] = []
    most = 0

    async def answer(request: ModelRequest) -> AssistantMessage | str:
        nonlocal most
        worker = (request.conversation or "").rsplit("/", 1)[-1]
        running.append(worker)
        most = max(most, len(running))
        await asyncio.sleep(0.05)  # a call's own latency: calls of two workers would meet
        running.remove(worker)
        if worker == "s1" and not any(isinstance(m, ToolMessage) for m in request.messages):
            return AssistantMessage(tool_calls=(call("pay", {"to": "ann"}, id="c1"),))
        answered.append(worker)
        if {"s2", "s3"} <= set(answered):
            others_done.set()
        return f"{worker} done"

    async def person(request: ApprovalRequest) -> Decision:
        with contextlib.suppress(TimedOut), within(5):
            await others_done.wait()
            return Decision.approved()
        return Decision.denied("the others never ran while s1 was asked about")

    @tool(side_effects=True)
    async def pay(to: str) -> str:
        """Pay someone."""
        return f"paid {to}"

    role = Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",)))
    one_slot = Executor(
        [role], FunctionModel(answer), tools=[pay], approver=person, aggregator="concat",
        policy=Policy(max_workers=1),
    )  # fmt: skip
    three = [Subtask(id=name, role="payer", instruction="x") for name in ("s1", "s2", "s3")]
    done = await one_slot.run("pay", subtasks=three)
    seen = [m.content for m in done.subtasks["s1"].worker.transcript.messages if m.role == "tool"]
    assert seen == ["paid ann"]
    assert answered == ["s2", "s3", "s1"]
    assert most == 1  # never two workers at once


async def test_a_worker_leaves_its_slot_only_once_none_of_its_nested_workers_works() -> None:
    """``max_workers: 1``: s1 calls a clerk, whose call waits for a person, and a
    researcher at once. s1 left its slot as the clerk's approver asked, while its
    researcher still worked, so s2 ran beside the researcher: two workers at once.
    Now s1 keeps the slot until nothing of it works but the wait, s2 runs then, and
    the clerk takes a slot again once the person has decided."""
    asked, s2_done = asyncio.Event(), asyncio.Event()
    at_once = AtOnce()

    @tool(side_effects=True)
    async def pay(to: str) -> str:
        """Pay someone."""
        await at_once.working("clerk", 0.01)
        return f"paid {to}"

    @tool
    async def look(topic: str) -> str:
        """Look something up."""
        await asked.wait()  # the clerk's call is being asked about meanwhile
        await at_once.working("researcher", 0.1)
        return f"{topic}: found"

    def seen(request: ModelRequest) -> list[str]:
        return [str(m.content) for m in request.messages if isinstance(m, ToolMessage)]

    async def answer(request: ModelRequest) -> AssistantMessage | str:
        me, told = str(request.messages[0].content), seen(request)
        if me.startswith("You are the clerk"):
            if told:
                return "clerk: " + told[0]
            return AssistantMessage(tool_calls=(call("pay", {"to": "ann"}, id="p1"),))
        if me.startswith("You are the researcher"):
            if told:
                return "researcher: " + told[0]
            return AssistantMessage(tool_calls=(call("look", {"topic": "bees"}, id="l1"),))
        if "s2" in (request.conversation or ""):
            await at_once.working("s2", 0.05)
            s2_done.set()
            return "s2 done"
        if told:
            return " | ".join(told)
        return AssistantMessage(
            tool_calls=(
                call("clerk", {"instruction": "pay ann"}, id="c1"),
                call("researcher", {"instruction": "bees"}, id="c2"),
            )
        )

    roles = [
        Role(name="lead", tools=("agent:clerk", "agent:researcher")),
        Role(name="clerk", tools=("pay",), approvals=Approvals(tools=("pay",))),
        Role(name="researcher", tools=("look",)),
    ]
    one_slot = Executor(
        roles, FunctionModel(answer), tools=[pay, look], approver=approving_once(asked, s2_done),
        aggregator="concat", policy=Policy(max_workers=1),
    )  # fmt: skip
    two = [Subtask(id=name, role="lead", instruction="x") for name in ("s1", "s2")]
    with within(10):
        done = await one_slot.run("pay", subtasks=two)
    assert done.subtasks["s1"].text == "clerk: paid ann | researcher: bees: found"
    assert done.subtasks["s2"].text == "s2 done"
    assert at_once.most == 1  # never two workers at once


async def test_a_workers_own_call_beside_its_nested_workers_keeps_its_slot() -> None:
    """``max_workers: 1``: s1 calls a clerk, whose call waits for a person, and its own
    tool ``look`` at once. s1 left its slot as the clerk's approver asked, while ``look``
    still worked for it, so s2 ran beside it: two workers' work at once. Now the call
    works in s1's room as a nested worker would: s2 runs once it is done."""
    asked, s2_done = asyncio.Event(), asyncio.Event()
    at_once = AtOnce()

    @tool
    async def look(topic: str) -> str:
        """Look something up."""
        await asked.wait()  # the clerk's call is being asked about meanwhile
        await at_once.working("s1", 0.1)
        return f"{topic}: found"

    async def answer(request: ModelRequest) -> AssistantMessage | str:
        me = str(request.messages[0].content)
        told = [str(m.content) for m in request.messages if isinstance(m, ToolMessage)]
        if me.startswith("You are the clerk"):
            if told:
                return "clerk: " + told[0]
            return AssistantMessage(tool_calls=(call("pay", {"to": "ann"}, id="p1"),))
        if "s2" in (request.conversation or ""):
            await at_once.working("s2", 0.05)
            s2_done.set()
            return "s2 done"
        if told:
            return " | ".join(told)
        return AssistantMessage(
            tool_calls=(
                call("clerk", {"instruction": "pay ann"}, id="c1"),
                call("look", {"topic": "bees"}, id="l1"),
            )
        )

    roles = [
        Role(name="lead", tools=("agent:clerk", "look")),
        Role(name="clerk", tools=("pay",), approvals=Approvals(tools=("pay",))),
    ]
    one_slot = Executor(
        roles, FunctionModel(answer), tools=[pay, look], approver=approving_once(asked, s2_done),
        aggregator="concat", policy=Policy(max_workers=1),
    )  # fmt: skip
    two = [Subtask(id=name, role="lead", instruction="x") for name in ("s1", "s2")]
    with within(10):
        done = await one_slot.run("pay", subtasks=two)
    assert done.subtasks["s1"].text == "clerk: paid ann | bees: found"
    assert done.subtasks["s2"].text == "s2 done"
    assert at_once.most == 1  # never two workers' work at once


async def test_a_workers_time_limit_counts_a_nested_workers_work_beside_a_wait() -> None:
    """``worker_timeout_s: 0.3``: s1's clerk waits for a person while its researcher
    works 0.6s. s1's clock stopped as the clerk was asked about, though the researcher
    went on working for it, so s1 worked twice its limit and ended ok. Now its clock
    stops only while nothing of it works but the wait: it is cut off at its limit."""
    asked, looked = asyncio.Event(), asyncio.Event()

    @tool(side_effects=True)
    async def pay(to: str) -> str:
        """Pay someone."""
        return f"paid {to}"

    @tool
    async def look(topic: str) -> str:
        """Look something up."""
        await asked.wait()
        await asyncio.sleep(0.6)  # its work, while the person reads
        looked.set()
        return f"{topic}: found"

    def answer(request: ModelRequest) -> AssistantMessage | str:
        me = str(request.messages[0].content)
        told = [str(m.content) for m in request.messages if isinstance(m, ToolMessage)]
        if told:
            return " | ".join(told)
        if me.startswith("You are the clerk"):
            return AssistantMessage(tool_calls=(call("pay", {"to": "ann"}, id="p1"),))
        if me.startswith("You are the researcher"):
            return AssistantMessage(tool_calls=(call("look", {"topic": "bees"}, id="l1"),))
        return AssistantMessage(
            tool_calls=(
                call("clerk", {"instruction": "pay ann"}, id="c1"),
                call("researcher", {"instruction": "bees"}, id="c2"),
            )
        )

    async def person(request: ApprovalRequest) -> Decision:
        asked.set()
        with contextlib.suppress(TimedOut), within(5):
            await looked.wait()  # the person decides once the researcher is done
        return Decision.approved()

    roles = [
        Role(name="lead", tools=("agent:clerk", "agent:researcher")),
        Role(name="clerk", tools=("pay",), approvals=Approvals(tools=("pay",))),
        Role(name="researcher", tools=("look",)),
    ]
    timed = Executor(
        roles, FunctionModel(answer), tools=[pay, look], approver=person,
        aggregator="concat", policy=Policy(worker_timeout_s=0.3),
    )  # fmt: skip
    one = [Subtask(id="s1", role="lead", instruction="x")]
    with within(10), pytest.raises(RunFailed, match=r"s1: WorkerTimeout: .* past 0\.3s"):
        await timed.run("pay", subtasks=one)


async def test_a_turns_calls_are_asked_about_one_after_another_out_of_the_slot() -> None:
    """``max_workers: 1``: s1's turn makes two calls that need approval. Between the
    person's answer on the first and the question on the second, s1 took a slot again,
    so the second question waited for s2, which had taken the slot, to end."""
    told: list[str] = []
    s2_works = asyncio.Event()

    async def answer(request: ModelRequest) -> AssistantMessage | str:
        worker = (request.conversation or "").rsplit("/", 1)[-1]
        if worker == "s2":
            s2_works.set()
            await asyncio.sleep(0.2)  # its work, once it has the slot
            told.append("s2 done")
            return "s2 done"
        if any(isinstance(m, ToolMessage) for m in request.messages):
            return "s1 done"
        return AssistantMessage(
            tool_calls=(call("pay", {"to": "ann"}, id="c1"), call("pay", {"to": "bob"}, id="c2"))
        )

    async def person(request: ApprovalRequest) -> Decision:
        told.append(f"asked {request.call_id}")
        with contextlib.suppress(TimedOut), within(5):
            await s2_works.wait()  # the person reads: s2 takes the slot meanwhile
        return Decision.approved()

    @tool(side_effects=True)
    async def pay(to: str) -> str:
        """Pay someone."""
        return f"paid {to}"

    role = Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",)))
    one_slot = Executor(
        [role], FunctionModel(answer), tools=[pay], approver=person, aggregator="concat",
        policy=Policy(max_workers=1),
    )  # fmt: skip
    two = [Subtask(id=name, role="payer", instruction="x") for name in ("s1", "s2")]
    with within(10):
        done = await one_slot.run("pay", subtasks=two)
    assert done.status == "ok"
    assert told == ["asked c1", "asked c2", "s2 done"]
