"""A tool call is judged once: a resumed run does not ask the argument guards again
about a call its record shows they passed (one asked about, one the journal knows),
so a judge's tokens are not spent twice on it, nor a call a person approved refused
by a verdict that changed its mind."""

from __future__ import annotations

from pathlib import Path

import anyio

from honeycomb import (
    Approvals,
    Executor,
    GuardCheck,
    Guards,
    ModelRequest,
    Role,
    tool,
)
from honeycomb.testing import FunctionModel, ScriptedModel, call

PAY = {"to": "bob", "amount": 40}


class Bank:
    """A judge role's verdicts and the payments made, counted."""

    def __init__(self) -> None:
        self.verdicts: list[str] = []
        self.paid: list[tuple[str, int]] = []
        self.paying = anyio.Event()
        self.hang = False

    def answer(self, request: ModelRequest) -> object:
        if "You are a guard" in (request.messages[0].content or ""):  # the judge's call
            self.verdicts.append(request.messages[-1].content or "")
            return "PASS"
        if not any(m.role == "tool" for m in request.messages):
            return call("pay", PAY, id="pay_1")
        return "Paid."

    def executor(self, db: Path) -> Executor:
        bank = self

        @tool(side_effects=True)
        async def pay(to: str, amount: int) -> str:
            """Pay someone."""
            bank.paid.append((to, amount))
            bank.paying.set()
            if bank.hang:  # the process is stopped here, mid-effect
                await anyio.sleep_forever()
            return f"paid {amount} to {to}"

        payer = Role(
            name="payer",
            tools=("pay",),
            approvals=Approvals(tools=("pay",)),
            guards=Guards(arguments=("auditor",)),
        )
        roles = [payer, Role(name="auditor", instructions="Judge the payment.")]
        return Executor(roles, FunctionModel(self.answer), tools=[pay], store=db)


async def test_an_approved_call_is_not_judged_again_as_its_run_resumes(tmp_path: Path) -> None:
    bank = Bank()
    waiting = await bank.executor(tmp_path / "runs.db").run(
        "Pay bob", subtasks=[("payer", "Pay bob 40.")], run_id="r1"
    )
    assert waiting.status == "waiting"
    assert len(bank.verdicts) == 1  # judged before the person was asked
    await bank.executor(tmp_path / "runs.db").decide("r1", "pay_1", approve=True)
    done = await bank.executor(tmp_path / "runs.db").resume("r1")
    assert done.status == "ok"
    assert bank.paid == [("bob", 40)]
    assert len(bank.verdicts) == 1  # its verdict stands: the judge is not asked again
    # The run's model calls: the worker's two turns, the one verdict.
    assert done.usage.model_calls == 3


async def test_edited_arguments_that_ran_are_not_judged_again_as_the_run_resumes(
    tmp_path: Path,
) -> None:
    bank = Bank()
    db = tmp_path / "runs.db"
    await bank.executor(db).run("Pay bob", subtasks=[("payer", "Pay bob 40.")], run_id="r1")
    edit = {"to": "bob", "amount": 30}
    await bank.executor(db).decide("r1", "pay_1", approve=True, arguments=edit)
    bank.hang = True
    async with anyio.create_task_group() as tg:  # stopped as the payment is made
        tg.start_soon(bank.executor(db).resume, "r1")
        await bank.paying.wait()
        tg.cancel_scope.cancel()
    assert bank.paid == [("bob", 30)]
    assert len(bank.verdicts) == 2  # the model's arguments, then the person's edit
    bank.hang = False
    done = await bank.executor(db).resume("r1")
    assert bank.paid == [("bob", 30)]  # not paid twice
    assert len(bank.verdicts) == 2  # nor the edit judged again: it ran once it passed
    observation = done.subtasks["s1"].worker.transcript.messages[3]
    assert observation.status == "unknown"


def refuses_once_passed(check: GuardCheck) -> str | None:
    """A guard whose verdict on a call changed once it had passed it."""
    refuses_once_passed.seen += 1  # type: ignore[attr-defined]
    return None if refuses_once_passed.seen == 1 else "changed its mind"  # type: ignore[attr-defined]


async def test_a_call_a_person_approved_is_not_refused_by_a_guard_asked_again(
    tmp_path: Path,
) -> None:
    refuses_once_passed.seen = 0  # type: ignore[attr-defined]
    paid: list[int] = []

    @tool(side_effects=True)
    async def pay(to: str, amount: int) -> str:
        """Pay someone."""
        paid.append(amount)
        return f"paid {amount} to {to}"

    def executor() -> Executor:
        payer = Role(
            name="payer",
            tools=("pay",),
            approvals=Approvals(tools=("pay",)),
            guards=Guards(arguments=(refuses_once_passed,)),
        )
        model = ScriptedModel([call("pay", PAY, id="pay_1"), "Paid."])
        return Executor([payer], model, tools=[pay], store=tmp_path / "runs.db")

    await executor().run("Pay bob", subtasks=[("payer", "Pay bob 40.")], run_id="r1")
    await executor().decide("r1", "pay_1", approve=True)
    done = await executor().resume("r1")
    assert paid == [40]
    assert refuses_once_passed.seen == 1  # type: ignore[attr-defined]
    assert done.subtasks["s1"].worker.transcript.messages[3].content == "paid 40 to bob"


def refuses_the_wire_once(check: GuardCheck) -> str | None:
    """A guard that refuses the first wire it is shown, and would pass it if asked again."""
    if check.tool != "wire":
        return None
    refuses_the_wire_once.seen += 1  # type: ignore[attr-defined]
    return "wires are not allowed" if refuses_the_wire_once.seen == 1 else None  # type: ignore[attr-defined]


async def test_a_call_refused_beside_one_that_waited_is_not_run_as_the_run_resumes(
    tmp_path: Path,
) -> None:
    refuses_the_wire_once.seen = 0  # type: ignore[attr-defined]
    ran: list[str] = []

    @tool(side_effects=True)
    async def pay(to: str) -> str:
        """Pay someone."""
        ran.append(f"pay {to}")
        return "paid"

    @tool
    async def wire(to: str) -> str:
        """Wire money abroad."""
        ran.append(f"wire {to}")
        return "wired"

    def answer(request: ModelRequest) -> object:
        if not any(m.role == "tool" for m in request.messages):
            return [call("wire", {"to": "eve"}, id="w1"), call("pay", {"to": "bob"}, id="p1")]
        return "Done."

    def executor() -> Executor:
        payer = Role(
            name="payer",
            tools=("pay", "wire"),
            approvals=Approvals(tools=("pay",)),
            guards=Guards(arguments=(refuses_the_wire_once,)),
        )
        model = FunctionModel(answer)
        return Executor([payer], model, tools=[pay, wire], store=tmp_path / "runs.db")

    waiting = await executor().run("Pay", subtasks=[("payer", "Pay bob.")], run_id="r1")
    assert waiting.status == "waiting"
    await executor().decide("r1", "p1", approve=True)
    done = await executor().resume("r1")
    assert done.status == "ok"
    assert ran == ["pay bob"]  # the refused wire did not run on a verdict asked again
    assert refuses_the_wire_once.seen == 1  # type: ignore[attr-defined]
    refused, paid = done.subtasks["s1"].worker.transcript.messages[3:5]
    assert refused.status == "error"
    assert "wires are not allowed" in refused.content
    assert paid.content == "paid"


async def test_a_call_refused_beside_one_that_waited_is_not_asked_about_as_the_run_resumes(
    tmp_path: Path,
) -> None:
    """Two payments of one turn, both needing approval: the guard refused one, the
    other waited for a person. Resumed once that one was approved, the refused payment
    was asked about (its tool needs approval), and the run waited again, a person
    shown a call no decision could let run."""
    paid: list[int] = []

    @tool(side_effects=True)
    async def pay(to: str, amount: int) -> str:
        """Pay someone."""
        paid.append(amount)
        return f"paid {amount} to {to}"

    def at_most_100(check: GuardCheck) -> str | None:
        return None if (check.arguments or {}).get("amount", 0) <= 100 else "over 100"

    def executor() -> Executor:
        payer = Role(
            name="payer",
            tools=("pay",),
            approvals=Approvals(tools=("pay",)),
            guards=Guards(arguments=(at_most_100,)),
        )
        both = [call("pay", PAY, id="p1"), call("pay", {"to": "eve", "amount": 500}, id="p2")]
        return Executor(
            [payer], ScriptedModel([both, "Paid bob."]), tools=[pay], store=tmp_path / "runs.db"
        )

    waiting = await executor().run("Pay", subtasks=[("payer", "Pay them.")], run_id="r1")
    assert [p.call_id for p in waiting.pending] == ["p1"]  # the refused one is asked nothing
    await executor().decide("r1", "p1", approve=True)
    done = await executor().resume("r1")
    assert done.status == "ok"
    assert paid == [40]
    refused = done.subtasks["s1"].worker.transcript.messages[4]
    assert refused.status == "error"
    assert "over 100" in refused.content


class _BossAndPayer:
    """A boss that calls a payer as a tool (a person approves the call, when
    ``boss_asks``), the payer's payment approved by a person; the boss's argument guard
    passes its first ``passes`` calls, then changes its mind."""

    def __init__(self, db: Path, passes: int, *, boss_asks: bool = False) -> None:
        self.db, self.passes, self.boss_asks = db, passes, boss_asks
        self.judged: list[str] = []  # the tool of each call the boss's guard judged
        self.paid: list[int] = []

    def changes_its_mind(self, check: GuardCheck) -> str | None:
        self.judged.append(check.tool)
        return None if len(self.judged) <= self.passes else "changed its mind"

    def answer(self, request: ModelRequest) -> object:
        answered = any(m.role == "tool" for m in request.messages)
        if "You lead." in (request.messages[0].content or ""):
            return "Done." if answered else call("payer", {"instruction": "Pay bob."}, id="a1")
        return "Paid." if answered else call("pay", PAY, id="pay_1")

    def executor(self) -> Executor:
        paid = self.paid

        @tool(side_effects=True)
        async def pay(to: str, amount: int) -> str:
            """Pay someone."""
            paid.append(amount)
            return f"paid {amount} to {to}"

        boss = Role(
            name="boss",
            instructions="You lead.",
            tools=("agent:payer",),
            approvals=Approvals(tools=("payer",) if self.boss_asks else ()),
            guards=Guards(arguments=(self.changes_its_mind,)),
        )
        payer = Role(
            name="payer",
            instructions="You pay.",
            tools=("pay",),
            approvals=Approvals(tools=("pay",)),
        )
        return Executor([boss, payer], FunctionModel(self.answer), tools=[pay], store=self.db)


async def test_a_passed_agent_call_whose_nested_call_waited_is_not_judged_again(
    tmp_path: Path,
) -> None:
    """A boss's call to a worker as a tool passed its guard; the nested worker's payment
    waited for a person, who approved it. Resumed, the boss's call was judged again,
    refused, and the approved payment never ran (the judge paid twice)."""
    hive = _BossAndPayer(tmp_path / "runs.db", passes=1)
    waiting = await hive.executor().run("Pay", subtasks=[("boss", "Pay bob.")], run_id="r1")
    assert waiting.status == "waiting"
    (pending,) = waiting.pending
    await hive.executor().decide("r1", pending.call_id, approve=True, worker=pending.worker)
    done = await hive.executor().resume("r1")
    assert done.status == "ok"
    assert hive.paid == [40]  # the approved payment ran
    assert hive.judged == ["payer"]  # the boss's call kept its verdict: judged once
    assert done.subtasks["s1"].worker.transcript.messages[3].content.endswith("Paid.")


async def test_an_edited_agent_call_whose_nested_call_waited_is_not_judged_again(
    tmp_path: Path,
) -> None:
    """A person approved a boss's call to a worker as a tool with its instruction
    edited; the edit passed the boss's guard, and the nested worker's payment waited
    for a person, who approved it. Resumed, the edit was judged again (its verdict was
    kept nowhere), refused by a judge that changed its mind, and the approved payment
    never ran."""
    hive = _BossAndPayer(tmp_path / "runs.db", passes=2, boss_asks=True)
    waiting = await hive.executor().run("Pay", subtasks=[("boss", "Pay bob.")], run_id="r1")
    (boss_call,) = waiting.pending
    edit = {"instruction": "Pay bob, and say so."}
    await hive.executor().decide("r1", boss_call.call_id, approve=True, arguments=edit)
    waiting = await hive.executor().resume("r1")
    assert waiting.status == "waiting"
    (nested,) = waiting.pending
    assert nested.worker != "s1"  # the nested worker's payment
    await hive.executor().decide("r1", nested.call_id, approve=True, worker=nested.worker)
    done = await hive.executor().resume("r1")
    assert done.status == "ok"
    assert hive.paid == [40]  # the approved payment ran
    assert len(hive.judged) == 2  # the model's call, then the edit: each judged once
