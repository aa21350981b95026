"""Many features of one run at once (parallel workers, a nested agent and a hive called
as a tool, approvals, guards, budgets, a run store, tracing, streaming, secrets), at
the seams where three or more of them meet. Each test checks every promise it touches."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from honeycomb import Approvals, Executor, Policy, Role, RunFailed, ToolContext, tool
from honeycomb.run.events import WorkerFinished
from honeycomb.testing import FunctionModel
from honeycomb.trace.timeline import build_timeline
from runtime import AssistantMessage, Event, ModelRequest, ToolCallFinished
from runtime.testing import call
from runtime.tools.approvals import ApprovalRequest, Approver, Decision
from tests.support.model_requests import Answer, observations, role_of

LIMIT_S = 30.0
"""No test here waits longer than this for its run: a hang fails the test."""

SECRET = "vault-pass-4471-zz"


def lead_and_desk(sent: list[str]) -> tuple[Executor, FunctionModel]:
    """A hive of fact checkers (``desk``) whose checker files each check it makes (a
    call that needs approval, of its own role's tool), and the model that answers both
    the checkers and the leads that call the hive as a tool."""

    @tool(side_effects=True)
    async def file_check(claim: str, context: ToolContext) -> str:
        """File a checked claim."""
        sent.append(claim)
        return f"filed {claim}"

    def answer(request: ModelRequest) -> Answer:
        role, seen = role_of(request), observations(request)
        if role == "planner":  # the desk's planner: one checker
            plan = [{"id": "s1", "role": "checker", "instruction": "check the claim"}]
            return json.dumps({"subtasks": plan})
        if role == "checker":
            if not seen:
                return AssistantMessage(tool_calls=(call("file_check", {"claim": "bees"}),))
            return f"checked: {seen[-1].content}"
        if role == "lead":
            if not seen:
                return AssistantMessage(tool_calls=(call("desk", {"instruction": "bees"}),))
            return f"lead: {seen[-1].content}"
        return "merged"

    model = FunctionModel(answer)
    checker = Role(
        name="checker", tools=("file_check",), approvals=Approvals(tools=("file_check",))
    )
    desk = Executor(
        [Role(name="planner"), checker, Role(name="aggregator")], model, tools=[file_check]
    )
    return desk, model


async def test_a_hive_tools_call_is_asked_about_under_the_name_its_callers_run_gives_it(
    tmp_path: Path,
) -> None:
    """Two leads run at once, each calling a hive as a tool whose worker's call needs
    approval; the calling run's approver decides for it. It is told of each call as
    the calling run names it, as its trace does (``CALLER/CALL/WORKER``, in the calling
    run), so a person tells the two apart and finds each in the trace: before, both
    were ``s1`` of runs named after the call, as if the first lead had made both."""
    sent: list[str] = []
    desk, model = lead_and_desk(sent)
    asked: list[ApprovalRequest] = []

    async def person(request: ApprovalRequest) -> Decision:
        asked.append(request)
        return Decision.approved()

    executor = Executor(
        [Role(name="lead", tools=("desk",))],
        model,
        tools=[desk.as_tool("desk")],
        approver=person,
        aggregator="concat",
        store=tmp_path / "runs.db",
    )
    plan = [("lead", "study bees"), ("lead", "study wasps")]
    async with asyncio.timeout(LIMIT_S):
        result = await executor.run("study", subtasks=plan, run_id="r1")
    assert result.status == "ok"
    assert sent == ["bees", "bees"]
    assert {r.run_id for r in asked} == {"r1"}
    workers = sorted(str(r.worker) for r in asked)
    assert [w.split("/")[0] for w in workers] == ["s1", "s2"]  # the leads that called it
    assert all(w.endswith("/s1") and w.count("/") == 2 for w in workers)
    spans = executor.store.spans("r1")  # type: ignore[union-attr]
    filed = sorted(str(s.worker) for s in spans if s.kind == "tool_call" and s.name == "file_check")
    assert filed == workers
    assert build_timeline(spans).tool_calls == result.usage.tool_calls == 4


def clerk_and_idler(hold: asyncio.Event, paid: list[str], approver: Approver) -> Executor:
    """A clerk who pays (a call that needs approval, which ``approver`` decides), then
    answers with what its call said (or, told to ``pay and wait``, first waits until
    ``hold`` is set); and an idler whose model never answers in time. Each worker has
    0.3 s of its own time."""

    @tool(side_effects=True, approval=True)
    async def pay(to: str) -> str:
        """Pay someone."""
        paid.append(to)
        return f"paid {to}"

    async def answer(request: ModelRequest) -> Answer:
        role, seen = role_of(request), observations(request)
        task = str(request.messages[1].content)
        if role == "idler" or (seen and task == "pay and wait"):
            await hold.wait()
        if not seen:
            return AssistantMessage(tool_calls=(call("pay", {"to": "ann"}),))
        return f"clerk: {seen[-1].content}"

    return Executor(
        [Role(name="clerk", tools=("pay",)), Role(name="idler")], FunctionModel(answer),
        tools=[pay], approver=approver, aggregator="concat", policy=Policy(worker_timeout_s=0.3),
    )  # fmt: skip


async def test_a_worker_waiting_for_its_approver_is_not_past_its_time_while_a_person_decides() -> (
    None
):
    """A worker's time limit counts its work, not a person's time deciding on its
    call (up to the call's approval_timeout_s): the person answers once a sibling that
    works has run past the same limit, and the call runs. Before, the worker was
    failed with WorkerTimeout while its question was still on the terminal."""
    hold, paid = asyncio.Event(), list[str]()
    idler_out = asyncio.Event()

    def on_event(event: Event) -> None:
        if isinstance(event, WorkerFinished) and event.worker == "s2":
            idler_out.set()

    async def person(request: ApprovalRequest) -> Decision:
        await idler_out.wait()  # the limit has passed for a worker that worked
        return Decision.approved()

    executor = clerk_and_idler(hold, paid, person)
    async with asyncio.timeout(LIMIT_S):
        result = await executor.run(
            "t", subtasks=[("clerk", "pay"), ("idler", "idle")], on_event=[on_event]
        )
    hold.set()
    assert result.subtasks["s2"].error is not None
    assert result.subtasks["s2"].error.type == "WorkerTimeout"
    assert result.subtasks["s1"].status == "ok", result.subtasks["s1"].error
    assert result.subtasks["s1"].text == "clerk: paid ann"
    assert paid == ["ann"]


async def test_a_worker_is_held_to_its_time_again_once_the_person_has_decided() -> None:
    """The clock stops only while the person decides: a worker that, once its call is
    approved, works past the limit is failed as any worker is."""
    hold, paid = asyncio.Event(), list[str]()

    async def person(request: ApprovalRequest) -> Decision:
        return Decision.approved()

    executor = clerk_and_idler(hold, paid, person)
    try:
        async with asyncio.timeout(LIMIT_S):
            with pytest.raises(RunFailed) as failed:
                await executor.run("t", subtasks=[("clerk", "pay and wait")])
    finally:
        hold.set()
    assert paid == ["ann"]
    assert failed.value.partial is not None
    error = failed.value.partial.subtasks["s1"].error
    assert error is not None
    assert error.type == "WorkerTimeout"


async def test_an_agent_tools_call_is_not_past_its_time_while_a_person_decides_inside() -> None:
    """The time limit of a call that runs a nested worker (the caller's tool_timeout)
    counts the nested worker's work, not a person's time deciding on its calls: the
    person answers once a call beside it that works has run past the same limit, and
    the nested worker's call runs. Before, the person's time cut the agent tool's call
    off (a timeout observation) under the unanswered question."""
    hold, published = asyncio.Event(), list[str]()
    idle_out = asyncio.Event()

    @tool(side_effects=True, approval=True)
    async def publish(text: str) -> str:
        """Publish a text."""
        published.append(text)
        return f"published {text}"

    @tool
    async def idle() -> str:
        """Wait."""
        await hold.wait()
        return "idled"

    def answer(request: ModelRequest) -> Answer:
        role, seen = role_of(request), observations(request)
        if role == "lead" and not seen:
            calls = (call("writer", {"instruction": "publish bees"}), call("idle"))
            return AssistantMessage(tool_calls=calls)
        if role == "lead":
            return " | ".join(f"{m.name} {m.status}: {m.content}" for m in seen)
        if not seen:
            return AssistantMessage(tool_calls=(call("publish", {"text": "bees"}),))
        return f"writer: {seen[-1].content}"

    def on_event(event: Event) -> None:
        if isinstance(event, ToolCallFinished) and event.tool == "idle":
            idle_out.set()

    async def person(request: ApprovalRequest) -> Decision:
        await idle_out.wait()  # the limit has passed for a call that worked
        return Decision.approved()

    roles = [
        Role(name="lead", tools=("agent:writer", "idle"), tool_timeout=0.3),
        Role(name="writer", tools=("publish",)),
    ]
    executor = Executor(
        roles, FunctionModel(answer), tools=[publish, idle], approver=person,
        aggregator="concat",
    )  # fmt: skip
    try:
        async with asyncio.timeout(LIMIT_S):
            result = await executor.run("t", subtasks=[("lead", "go")], on_event=[on_event])
    finally:
        hold.set()
    assert published == ["bees"]
    assert result.subtasks["s1"].text.startswith("writer ok: writer: published bees | idle timeout")
