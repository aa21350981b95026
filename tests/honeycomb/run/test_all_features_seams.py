"""Many features of one run at once (parallel workers, a nested agent and a hive called
as a tool, approvals, guards, budgets, a run store, tracing, streaming, secrets), at
the seams where three or more of them meet. Each test checks every promise it touches."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from honeycomb import (
    Approvals,
    Compaction,
    Executor,
    GuardCheck,
    Guards,
    Policy,
    Role,
    RoleMemory,
    RunFailed,
    SQLiteMemory,
    ToolContext,
    add_secret,
    tool,
)
from honeycomb.events import TextDelta
from honeycomb.run.events import WorkerFinished
from honeycomb.run.policy import Budgets
from honeycomb.testing import FunctionModel
from honeycomb.trace.timeline import build_timeline
from runtime import AssistantMessage, BudgetExceeded, Event, ModelRequest, ToolCallFinished
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


REFUSED = "REFUSED-ANSWER-4471"
"""What the leads' output guard refuses: their first answer holds it."""


def all_on(db: Path, effects: list[str], hold: asyncio.Event | None) -> Executor:
    """Every feature at once: a plan of two leads and a courier after them; each lead
    calls a researcher (a nested agent), a hive as a tool and a lookup, one of whose
    calls the run's argument guard refuses; its first answer is refused by its output
    guard; it keeps its context within a budget and its answer in memory; the courier's
    call waits for a person; the lookup returns a secret; the run has budgets, a store
    and a trace. With ``hold``, the researchers wait for it in their second turn."""

    @tool
    async def lookup(topic: str) -> str:
        """Look a topic up."""
        return f"on {topic}: the key is {SECRET}; " + "bees hum " * 80

    @tool(side_effects=True, approval=True)
    async def send(to: str, body: str, context: ToolContext) -> str:
        """Send a message."""
        effects.append(f"{to}:{context.idempotency_key}")
        return f"sent to {to}"

    def refuse(check: GuardCheck) -> str | None:
        return "refused" if REFUSED in check.text or "forbidden" in check.text else None

    async def answer(request: ModelRequest) -> Answer:
        role, seen = role_of(request), observations(request)
        last = str(request.messages[-1].content or "")
        if role == "planner" and "checker" in last and "lead" not in last:
            return json.dumps({"subtasks": [{"id": "s1", "role": "checker", "instruction": "c"}]})
        if role == "planner":
            plan = [
                {"id": "s1", "role": "lead", "instruction": "part 1"},
                {"id": "s2", "role": "lead", "instruction": "part 2"},
                {"id": "s3", "role": "courier", "instruction": "send", "depends_on": ["s1", "s2"]},
            ]
            return json.dumps({"subtasks": plan})
        if role == "lead" and not seen:
            calls = (
                call("researcher", {"instruction": "dig"}),
                call("facts", {"instruction": "check"}),
                call("lookup", {"topic": "bees"}),
                call("lookup", {"topic": "forbidden bees"}),
            )
            return AssistantMessage(tool_calls=calls)
        if role == "lead":
            return "lead: accepted" if "not accepted" in last else f"lead {REFUSED}"
        if role == "researcher" and not seen:
            return AssistantMessage(tool_calls=(call("lookup", {"topic": "nested"}),))
        if role == "researcher" and hold is not None:
            await hold.wait()
        if role == "courier" and not seen:
            return AssistantMessage(tool_calls=(call("send", {"to": "ops", "body": "report"}),))
        return f"{role} done, key {SECRET}"

    model = FunctionModel(answer)
    desk = Executor([Role(name="planner"), Role(name="checker"), Role(name="aggregator")], model)
    lead = Role(
        name="lead",
        tools=("agent:researcher", "facts", "lookup"),
        guards=Guards(output=(refuse,)),
        compaction=Compaction(budget_tokens=1500),
        memory=RoleMemory(namespace="n", store_result=True),
    )
    roles = [
        Role(name="planner"), lead, Role(name="researcher", tools=("lookup",)),
        Role(name="courier", tools=("send",)), Role(name="aggregator"),
    ]  # fmt: skip
    budgets = Budgets(model_calls=40, total_tokens=100_000, tool_calls=20, wall_time_s=30)
    return Executor(
        roles, model, tools=[lookup, send, desk.as_tool("facts")], store=db,
        guards=Guards(arguments=(refuse,)), memory=SQLiteMemory(db.parent / "memory.db"),
        policy=Policy(budgets=budgets),
    )  # fmt: skip


def stored_bytes(folder: Path) -> bytes:
    """What the run store and the memory files in ``folder`` hold, byte for byte."""
    return b"".join(path.read_bytes() for path in folder.glob("*.db*"))


async def test_every_feature_at_once_cancelled_resumed_decided_and_resumed_keeps_every_promise(
    tmp_path: Path,
) -> None:
    """The run is cancelled while its nested researchers work, resumed (it ends waiting
    for the courier's call), decided, and resumed through a stream. It sends once;
    what its result, its trace and its store count agree; its budget is never
    exceeded; no event, delta or stored byte holds the secret, and no delta the
    answer the guard refused."""
    add_secret(SECRET, "password")
    db, effects, hold = tmp_path / "runs.db", list[str](), asyncio.Event()
    seen: list[Event] = []
    working = asyncio.Event()

    def on_event(event: Event) -> None:
        seen.append(event)
        if isinstance(event, ToolCallFinished) and "/" in (event.worker or ""):
            working.set()  # a researcher's lookup answered: it waits in its second turn

    first = asyncio.create_task(
        all_on(db, effects, hold).run("study", run_id="r1", on_event=[on_event], text_deltas=True)
    )
    async with asyncio.timeout(LIMIT_S):
        await working.wait()
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        again = all_on(db, effects, None)
        waiting = await again.run("study", run_id="r1", on_event=[on_event], text_deltas=True)
        assert waiting.status == "waiting"
        (asked,) = waiting.pending
        assert (asked.worker, asked.tool) == ("s3", "send")
        await again.decide("r1", asked.call_id, approve=True)
        async with all_on(db, effects, None).stream("study", run_id="r1") as events:
            async for event in events:
                seen.append(event)
    result = events.result
    assert result is not None
    assert result.status == "ok"
    assert len(effects) == 1
    spans = again.store.spans("r1")  # type: ignore[union-attr]
    traced = build_timeline(spans)
    kept = again.store.find("r1")  # type: ignore[union-attr]
    assert kept is not None
    usage = result.usage
    assert (traced.model_calls, traced.tool_calls) == (usage.model_calls, usage.tool_calls)
    assert (kept.model_calls, kept.tool_calls) == (usage.model_calls, usage.tool_calls)
    assert (traced.input_tokens, traced.output_tokens) == (usage.input_tokens, usage.output_tokens)
    assert usage.model_calls <= 40
    assert usage.tool_calls <= 20
    assert len(traced.lives) == 3
    deltas = "".join(e.text for e in seen if isinstance(e, TextDelta))
    assert "lead: accepted" in deltas
    assert REFUSED not in deltas
    assert all(SECRET not in repr(e) for e in seen)
    assert SECRET not in result.model_dump_json()
    assert SECRET.encode() not in stored_bytes(tmp_path)


@tool(side_effects=True, approval=True)
async def pay_ann() -> str:
    """Pay ann (a tool of this module: Ray's actors import it by its path)."""
    return "paid ann"


@pytest.mark.xdist_group("ray")  # the session's Ray, in one test process
async def test_on_ray_a_worker_waiting_for_its_approver_is_not_past_its_time(
    request: pytest.FixtureRequest,
) -> None:
    """As in one process: the clerk's worker runs in a Ray actor, its approver at the
    driver; the person answers once the idler has run past the limit, and the call
    runs (before, the driver's worker clock counted the person's time)."""
    pytest.importorskip("ray")
    request.getfixturevalue("ray_session")
    from honeycomb.backends import RayBackend

    async def answer(request: ModelRequest) -> Answer:
        role, seen = role_of(request), observations(request)
        if role == "idler":
            await asyncio.Event().wait()
        if not seen:
            return AssistantMessage(tool_calls=(call("pay_ann"),))
        return f"clerk: {seen[-1].content}"

    idler_out = asyncio.Event()

    def on_event(event: Event) -> None:
        if isinstance(event, WorkerFinished) and event.worker == "s2":
            idler_out.set()

    async def person(request: ApprovalRequest) -> Decision:
        await idler_out.wait()
        return Decision.approved()

    pool = RayBackend(actors=2, actor_cpus=0)
    try:
        executor = Executor(
            [Role(name="clerk", tools=("pay_ann",)), Role(name="idler")], FunctionModel(answer),
            tools=[pay_ann], approver=person, aggregator="concat", backend=pool,
            policy=Policy(worker_timeout_s=3.0),  # room for an actor to take the role up
        )  # fmt: skip
        async with asyncio.timeout(LIMIT_S * 2):
            result = await executor.run(
                "t", subtasks=[("clerk", "pay"), ("idler", "idle")], on_event=[on_event]
            )
    finally:
        pool.stop()
    assert result.subtasks["s2"].error is not None
    assert result.subtasks["s2"].error.type == "WorkerTimeout"
    assert result.subtasks["s1"].status == "ok", result.subtasks["s1"].error
    assert result.subtasks["s1"].text == "clerk: paid ann"


@pytest.mark.parametrize(
    ("stuck", "named"),
    [("checker", "s1/call_1/s1"), ("helper", "s1/call_1/s1/call_2")],
    ids=["a sub-run's worker", "its nested worker"],
)
async def test_a_wall_time_that_cuts_a_hive_tools_call_off_names_it_as_the_callers_run_does(
    stuck: str, named: str
) -> None:
    """A lead calls a hive as a tool; the sub-run's checker (or the helper it runs as an
    ``agent:`` tool) is in its model call when the run's wall time runs out. The budget
    names the call it cut off as the calling run and its trace name that worker
    (``CALLER/CALL/WORKER``), as its approver is told of it: before, it said
    ``s1 turn 1``, which is the lead's own name in the calling run."""
    started: list[str] = []

    async def answer(request: ModelRequest) -> Answer:
        role, seen = role_of(request), observations(request)
        started.append(role)
        if role == stuck:
            await asyncio.Event().wait()  # until the wall time cuts it off
        if role == "planner":  # the desk's: one checker
            plan = [{"id": "s1", "role": "checker", "instruction": "check the claim"}]
            return json.dumps({"subtasks": plan})
        if role == "checker" and not seen:
            return AssistantMessage(
                tool_calls=(call("helper", {"instruction": "look"}, id="call_2"),)
            )
        if role == "lead" and not seen:
            return AssistantMessage(
                tool_calls=(call("desk", {"instruction": "bees"}, id="call_1"),)
            )
        return "done"

    model = FunctionModel(answer)
    desk = Executor(
        [Role(name="planner"), Role(name="checker", tools=("agent:helper",)), Role(name="helper")],
        model,
        aggregator="concat",
    )
    executor = Executor(
        [Role(name="lead", tools=("desk",))],
        model,
        tools=[desk.as_tool("desk")],
        aggregator="concat",
        policy=Policy(budgets=Budgets(wall_time_s=1.0)),
    )
    with pytest.raises(BudgetExceeded) as caught:
        async with asyncio.timeout(LIMIT_S):
            await executor.run("t", subtasks=[("lead", "study bees")])
    assert started[-1] == stuck  # its call was under way as the time ran out
    assert [(c.who, c.kind, c.turn) for c in caught.value.in_flight] == [(named, "turn", 1)]
    assert f"cut off in flight: {named} turn 1 (" in str(caught.value)
