"""Approvals in one worker: approve, deny, edit (validated again), timeout, and a call
that waits when no approver is attached."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from honeycomb import ConfigErrors, Executor
from runtime import ToolMessage, tool
from runtime.limits import Budget, Limits
from runtime.testing import ScriptedModel, call
from runtime.tools.approvals import ApprovalEntry, ApprovalRequest, Decision
from workers import Approvals, LoopState, Role, Worker
from workers.services import MemoryStore, Services

sent: list[dict[str, object]] = []


@tool(side_effects=True)
def send(to: str, amount: int) -> str:
    """Send money."""
    sent.append({"to": to, "amount": amount})
    return f"sent {amount} to {to}"


@tool(approval=True)
def peek(key: str) -> str:
    """Read a secret."""
    return f"secret-{key}"


def asking_role(**approvals: object) -> Role:
    return Role(name="payer", tools=("send",), approvals=Approvals.model_validate(approvals))


def observation(result_messages: tuple[object, ...]) -> ToolMessage:
    found = [m for m in result_messages if isinstance(m, ToolMessage)]
    assert len(found) == 1
    return found[0]


async def test_an_approved_call_runs_and_the_approver_is_told_who_asks_and_why() -> None:
    sent.clear()
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> Decision:
        asked.append(request)
        return Decision.approved()

    model = ScriptedModel([call("send", {"to": "ann", "amount": 5}), "done"])
    worker = Worker(
        asking_role(tools=["send"]), model, tools=[send], services=Services(approver=approver)
    )
    result = await worker.run("pay ann")
    assert result.ok
    assert sent == [{"to": "ann", "amount": 5}]
    (request,) = asked
    assert (request.worker, request.role, request.tool) == ("payer", "payer", "send")
    assert request.arguments == {"to": "ann", "amount": 5}
    assert request.why == "role 'payer' asks for approval of 'send'"


@pytest.mark.parametrize("decided", ["approved", "denied"])
async def test_an_approved_call_does_not_run_once_the_run_spent_its_budget_while_deciding(
    decided: str,
) -> None:
    """The turn was reserved with the one model call left to read its result; while a
    person decided, another worker of the run spent it. The payment was sent, its
    result never read, and the worker stopped over budget; now it stops before the call
    runs. A denial runs nothing: its turn goes on to the model call the budget refuses."""
    sent.clear()
    budget = Budget(Limits(model_calls=2))

    async def approver(request: ApprovalRequest) -> Decision:
        budget.reserve_model_call()  # another worker's, made while a person decided
        return Decision.approved() if decided == "approved" else Decision.denied("no")

    model = ScriptedModel([call("send", {"to": "ann", "amount": 5}), "done"])
    services = Services(approver=approver, budget=budget)
    worker = Worker(asking_role(tools=["send"]), model, tools=[send], services=services)
    result = await worker.run("pay ann")
    assert result.status == "over_budget"
    assert sent == []
    assert len(model.requests) == 1


async def test_a_denied_call_is_an_error_observation_and_the_loop_goes_on() -> None:
    sent.clear()

    async def approver(request: ApprovalRequest) -> Decision:
        return Decision.denied("too much")

    model = ScriptedModel([call("send", {"to": "bob", "amount": 900}), "I could not pay"])
    worker = Worker(
        asking_role(default="ask"), model, tools=[send], services=Services(approver=approver)
    )
    result = await worker.run("pay bob")
    assert result.ok
    assert result.text == "I could not pay"
    assert sent == []
    seen = observation(result.transcript.messages)
    assert (seen.status, seen.content) == ("error", "denied: too much")


async def test_edited_arguments_run_instead_of_the_models_and_are_validated_again() -> None:
    sent.clear()
    answers = iter(
        [
            Decision.approved({"to": "ann", "amount": "lots"}),
            Decision.approved({"to": "ann", "amount": 3}),
        ]
    )

    async def approver(request: ApprovalRequest) -> Decision:
        return next(answers)

    model = ScriptedModel(
        [
            call("send", {"to": "ann", "amount": 50}),
            call("send", {"to": "ann", "amount": 40}),
            "paid",
        ]
    )
    worker = Worker(
        asking_role(tools=["send"]), model, tools=[send], services=Services(approver=approver)
    )
    result = await worker.run("pay ann")
    first, second = [m for m in result.transcript.messages if isinstance(m, ToolMessage)]
    assert first.status == "error"
    assert "edited arguments approved failed validation" in first.content
    assert "'amount'" in first.content
    assert second.status == "ok"
    assert json.dumps({"amount": 3, "to": "ann"}) in second.content
    assert second.content.endswith("sent 3 to ann")
    assert sent == [{"to": "ann", "amount": 3}]


async def test_an_approver_that_does_not_answer_in_time_is_a_denial() -> None:
    async def slow(request: ApprovalRequest) -> Decision:
        await anyio.sleep(30)
        return Decision.approved()

    model = ScriptedModel([call("peek", {"key": "k"}), "no luck"])
    worker = Worker(
        Role(name="reader"),
        model,
        tools=[peek],
        services=Services(approver=slow, approval_timeout_s=0.05),
    )
    with anyio.fail_after(5):
        result = await worker.run("read k")
    seen = observation(result.transcript.messages)
    assert (seen.status, seen.content) == ("error", "denied: no decision within 0.05s")


async def test_a_failing_approver_denies_the_call_without_crashing_the_worker() -> None:
    async def broken(request: ApprovalRequest) -> Decision:
        raise RuntimeError("chat is down")

    model = ScriptedModel([call("peek", {"key": "k"}), "no luck"])
    result = await Worker(
        Role(name="reader"), model, tools=[peek], services=Services(approver=broken)
    ).run("t")
    assert result.ok
    seen = observation(result.transcript.messages)
    assert seen.content == "denied: the approver failed (RuntimeError: chat is down)"


async def test_without_an_approver_the_worker_waits_and_continues_once_decided() -> None:
    sent.clear()
    store = MemoryStore()
    log = store.approvals
    model = ScriptedModel([call("send", {"to": "cy", "amount": 7}, id="c1"), "paid cy"])
    worker = Worker(
        asking_role(tools=["send"]), model, tools=[send], services=Services(store=store)
    )
    waiting = await worker.run("pay cy")
    assert waiting.status == "waiting"
    assert sent == []
    (pending,) = waiting.pending
    assert (pending.call_id, pending.tool, pending.arguments) == (
        "c1",
        "send",
        {"to": "cy", "amount": 7},
    )
    assert pending.asked_at > 0
    assert pending.deadline is None
    entry = log.recorded(pending.turn, "c1")
    assert entry is not None
    assert entry.decision is None
    await log.record(ApprovalEntry(pending=pending, decision=Decision.approved()))
    messages = waiting.transcript.messages[2:]  # after the system prompt and the task
    state = LoopState(task="pay cy", messages=messages, turn=waiting.turns)
    done = await worker.run("pay cy", resume=state)
    assert done.ok
    assert done.text == "paid cy"
    assert sent == [{"to": "cy", "amount": 7}]


async def test_without_an_approver_or_a_log_a_call_needing_approval_is_denied() -> None:
    model = ScriptedModel([call("peek", {"key": "k"}), "ok"])
    result = await Worker(Role(name="reader"), model, tools=[peek]).run("t")
    seen = observation(result.transcript.messages)
    assert seen.content == ("denied: no approver is attached and the run has no store to wait in")


async def test_a_recorded_decision_stands_when_the_rule_no_longer_asks() -> None:
    """A call asked about in an earlier life keeps its decision: a turn whose tools no
    longer need approval still goes through the gate for it, and only for it."""
    sent.clear()
    store = MemoryStore()
    log = store.approvals
    model = ScriptedModel([call("send", {"to": "di", "amount": 3}, id="c1"), "tried"])
    asking = Worker(
        asking_role(tools=["send"]), model, tools=[send], services=Services(store=store)
    )
    waiting = await asking.run("pay di")
    (pending,) = waiting.pending
    await log.record(ApprovalEntry(pending=pending, decision=Decision.denied("not di")))
    messages = waiting.transcript.messages[2:]
    state = LoopState(task="pay di", messages=messages, turn=waiting.turns)
    # The same worker's role, now asking for nothing.
    lenient = Worker(asking_role(), model, tools=[send], services=Services(store=store))
    done = await lenient.run("pay di", resume=state)
    assert done.ok
    assert sent == []
    assert observation(done.transcript.messages).content == "denied: not di"


@tool(
    side_effects=True,
    describe=lambda a: f"Send {a['amount']} to {a['to']}, who cannot send it back.",
)
def wire(to: str, amount: int) -> str:
    """Wire money."""
    return f"wired {amount} to {to}"


@tool(side_effects=True, describe=lambda a: f"Wire {a['currency']}")  # no such argument
def wire_badly(to: str, amount: int) -> str:
    """Wire money."""
    return f"wired {amount} to {to}"


async def test_a_tools_describe_says_what_the_call_will_do_to_the_person_asked() -> None:
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> Decision:
        asked.append(request)
        return Decision.denied("not today")

    role = Role(name="payer", tools=("wire", "wire_badly"), approvals=Approvals(default="ask"))
    model = ScriptedModel(
        [
            call("wire", {"to": "ann", "amount": 5}),
            call("wire_badly", {"to": "bo", "amount": 1}),
            "ok",
        ]
    )
    await Worker(role, model, tools=[wire, wire_badly], services=Services(approver=approver)).run(
        "pay"
    )
    told, failed = (request.summary for request in asked)
    assert told == "Send 5 to ann, who cannot send it back."
    assert failed == "(wire_badly's describe failed: KeyError: 'currency')"  # still asked
    store = MemoryStore()
    model = ScriptedModel([call("wire", {"to": "cy", "amount": 7}), "ok"])
    waiting = await Worker(
        role, model, tools=[wire, wire_badly], services=Services(store=store)
    ).run("pay cy")
    (pending,) = waiting.pending
    assert pending.summary == "Send 7 to cy, who cannot send it back."


async def test_an_executors_pending_calls_say_what_they_will_do(tmp_path: Path) -> None:
    """The store keeps a waiting call's arguments, not its tool's summary:
    ``Executor.pending`` read them alone, and said nothing of what a call would do
    (the web page and ``honeycomb approve`` said it)."""
    role = Role(name="payer", tools=("wire",), approvals=Approvals(default="ask"))
    model = ScriptedModel([call("wire", {"to": "di", "amount": 3}), "ok"])
    executor = Executor([role], model, tools=[wire], store=tmp_path / "runs.db")
    async with executor:
        waiting = await executor.run("pay di", subtasks=[("payer", "pay di")], run_id="w")
        assert waiting.status == "waiting"
        (pending,) = await executor.pending("w")
    assert pending.summary == "Send 3 to di, who cannot send it back."


def test_an_executor_refuses_a_role_whose_approvals_name_a_tool_it_does_not_use() -> None:
    role = Role(name="payer", tools=("send", "peek"), approvals=Approvals(tools=("sned",)))
    with pytest.raises(ConfigErrors) as caught:
        Executor([role], ScriptedModel([]), tools=[send, peek])
    (error,) = caught.value.errors
    assert str(error) == (
        "role 'payer': approvals names tool 'sned' (did you mean 'send'?), which the role "
        "does not use; its tools: peek, send"
    )
