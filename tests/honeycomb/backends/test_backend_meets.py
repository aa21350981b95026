"""Where workers on Ray meet approvals, guards, budgets, streaming, agents and hives
called as tools: each scenario on both backends (``backend``: the local one, and two
actors of the session's Ray), which must keep the same promises."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import anyio
import pytest

from honeycomb import (
    ApprovalRequest,
    BudgetExceeded,
    Budgets,
    Decision,
    Executor,
    GuardCheck,
    Guards,
    Policy,
    Role,
    RunFailed,
    RunResult,
    Tool,
    add_secret,
)
from honeycomb.backends import RayBackend
from honeycomb.events import Event, RunStarted, TextDelta, ToolCallFinished, WorkerFinished
from honeycomb.testing import FunctionModel
from honeycomb.tracing import SpanRecorder, build_timeline
from runtime import AssistantMessage, ModelRequest, ModelResponse, UserMessage
from runtime.concurrency import TimedOut, within
from runtime.model import TextSink
from runtime.secrets import isolated
from runtime.tools.approval_gate import settled_by
from runtime.tools.approvals import ApprovalEntry
from tests.support.ray_tools import scripted

# One test process for every test that uses Ray (``ray_session``, tests/conftest.py).
pytestmark = pytest.mark.xdist_group("ray")

TOOLS = "tests.support.ray_tools"
WORKER = Role(name="r", tools=tuple(f"{TOOLS}:{n}" for n in ("note", "echo", "guarded_note")))
SECRET = "hunter2-but-longer"


def script(*turns: list[tuple[str, dict[str, Any]]]) -> str:
    """A subtask for :func:`scripted`: its calls, turn by turn."""
    return json.dumps({"turns": [list(t) for t in turns]})


def sub_hive() -> Executor:
    """A hive of one worker, as a tool of another's roles (it plans its one subtask)."""
    return Executor(
        [WORKER], FunctionModel(scripted), aggregator="concat", planner=lambda t: [("r", t)]
    )


class Asked:
    """An approver that gives every call ``decision``, keeping what it was asked."""

    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        self.requests: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> Decision:
        self.requests.append(request)
        return self.decision


async def test_an_approver_never_reads_a_secret_a_remote_workers_call_holds(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    # The approval gate masks the request a person reads; in an actor, which knows none
    # of the driver's secrets, it masked nothing, and the approver read the password.
    approver = Asked(Decision.denied("not with a password in it"))

    notes = tmp_path / "notes"
    ex = Executor(
        [WORKER], FunctionModel(scripted), aggregator="concat", backend=backend, approver=approver
    )
    calls = script([("guarded_note", {"path": str(notes), "text": f"the key is {SECRET}"})])
    with isolated():
        add_secret(SECRET, "password")
        result = await ex.run("t", subtasks=[("r", calls)])
    (request,) = approver.requests
    assert SECRET not in repr(request)
    assert request.arguments["text"].startswith("the key is ")
    assert "not with a password in it" in result.subtasks["s1"].text
    assert not notes.exists()


class Moved:
    """Approves each call, moved to another file: its other arguments as shown."""

    def __init__(self, to: Path) -> None:
        self.to = to

    async def __call__(self, request: ApprovalRequest) -> Decision:
        return Decision.approved({**request.arguments, "path": str(self.to)})


async def test_an_edit_that_leaves_a_remote_calls_secret_as_shown_runs_with_it(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    # The person sees the text masked, and edits only the path. In an actor, which knows
    # none of the driver's secrets, the mask left as shown was taken for an edit of
    # the secret: "the edited arguments approved were not run: argument 'text' holds a
    # secret ... in a value the edit changed".
    notes, moved = tmp_path / "notes", tmp_path / "moved"
    ex = Executor(
        [WORKER], FunctionModel(scripted), aggregator="concat", backend=backend,
        approver=Moved(moved),
    )  # fmt: skip
    calls = script([("guarded_note", {"path": str(notes), "text": f"the key is {SECRET}"})])
    with isolated():
        add_secret(SECRET, "password")
        result = await ex.run("t", subtasks=[("r", calls)])
    assert "not run" not in result.subtasks["s1"].text
    assert moved.read_text() == f"the key is {SECRET}\n"
    assert not notes.exists()


async def test_a_stored_edit_that_leaves_a_calls_secret_as_shown_runs_with_it_when_resumed(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    # As decided by honeycomb approve --edit or the web page, from what the store keeps:
    # the text masked. Resumed in an actor, the mask left as shown was taken for an
    # edit of the secret, and the call was refused.
    notes, moved = tmp_path / "notes", tmp_path / "moved"

    def executor() -> Executor:
        return Executor(
            [WORKER], FunctionModel(scripted), aggregator="concat", backend=backend,
            store=tmp_path / "runs.db",
        )  # fmt: skip

    calls = script([("guarded_note", {"path": str(notes), "text": f"the key is {SECRET}"})])
    with isolated():
        add_secret(SECRET, "password")
        waiting = await executor().run("t", subtasks=[("r", calls)], run_id="p")
        [pending] = waiting.pending
        assert pending.arguments["text"] == "the key is [password hidden]"
        edited = {**pending.arguments, "path": str(moved)}
        await executor().decide("p", pending.call_id, approve=True, arguments=edited)
        done = await executor().resume("p")
    assert "not run" not in done.subtasks["s1"].text
    assert moved.read_text() == f"the key is {SECRET}\n"


class Waits:
    """An approver that never answers (a person away from the terminal): ``asked`` is
    set once it is asked; its question is withdrawn once the call is decided elsewhere,
    and ``withdrawn`` holds what the withdrawal said settled it."""

    def __init__(self) -> None:
        self.asked = anyio.Event()
        self.withdrawn: list[ApprovalEntry | None] = []

    async def __call__(self, request: ApprovalRequest) -> Decision:
        self.asked.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError as exc:
            self.withdrawn.append(settled_by(exc))
            raise
        raise AssertionError("never answered")


async def test_an_edit_made_elsewhere_as_the_approver_asks_runs_with_the_calls_secret(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    # The run's approver asks about the call, and a person decides it on the page of
    # honeycomb serve (the store), moving it to another file, the text as shown: masked.
    # In an actor the decision read from the store came with the mask left as shown, the
    # actor took it for an edit of the secret, and the call was refused.
    notes, moved, db = tmp_path / "notes", tmp_path / "moved", tmp_path / "runs.db"

    def executor(approver: Waits | None = None) -> Executor:
        return Executor(
            [WORKER], FunctionModel(scripted), aggregator="concat", backend=backend,
            store=db, approver=approver,
        )  # fmt: skip

    calls = script([("guarded_note", {"path": str(notes), "text": f"the key is {SECRET}"})])
    approver = Waits()
    with isolated(), anyio.fail_after(60):
        add_secret(SECRET, "password")
        async with asyncio.TaskGroup() as group:
            running = group.create_task(
                executor(approver).run("t", subtasks=[("r", calls)], run_id="p")
            )
            await approver.asked.wait()
            [pending] = await executor().pending("p")
            assert pending.arguments["text"] == "the key is [password hidden]"
            edited = {**pending.arguments, "path": str(moved)}
            await executor().decide(
                "p", pending.call_id, worker=pending.worker, approve=True, arguments=edited
            )
    assert "not run" not in running.result().subtasks["s1"].text
    assert moved.read_text() == f"the key is {SECRET}\n"
    assert not notes.exists()
    # The question withdrawn says what settled it, wherever the worker ran (from an
    # actor, the driver withdrew it saying nothing: the terminal could not say who).
    [entry] = approver.withdrawn
    assert entry is not None
    assert entry.decision is not None
    assert entry.decision.approve
    assert entry.pending.call_id == pending.call_id


class Retyped:
    """Approves each call with its text edited to hold the password, typed in."""

    async def __call__(self, request: ApprovalRequest) -> Decision:
        return Decision.approved({**request.arguments, "text": f"now {SECRET}"})


async def test_an_edit_that_types_a_secret_into_a_remote_call_is_refused(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    ex = Executor(
        [WORKER], FunctionModel(scripted), aggregator="concat", backend=backend,
        approver=Retyped(),
    )  # fmt: skip
    calls = script([("guarded_note", {"path": str(notes), "text": "plain"})])
    with isolated():
        add_secret(SECRET, "password")
        result = await ex.run("t", subtasks=[("r", calls)])
    assert "argument 'text' holds a secret" in result.subtasks["s1"].text
    assert not notes.exists()


def leaky(check: GuardCheck) -> str | None:
    return "it mentions a password" if "password" in check.text.lower() else None


def writer(request: ModelRequest) -> AssistantMessage | str:
    """The lead's script; a nested writer that gives the password away at first, and
    once its guard refused that, does not."""
    told = [m.content or "" for m in request.messages if isinstance(m, UserMessage)]
    if told[0].startswith("{"):
        return scripted(request)
    return "I cannot share that." if len(told) > 1 else "The password is hunter2."


async def test_a_nested_workers_refused_answer_never_reaches_the_stream(
    backend: RayBackend | None,
) -> None:
    lead = Role(name="lead", tools=("agent:w",))
    guarded = Role(name="w", guards=Guards(output=(leaky,)))
    ex = Executor([lead, guarded], FunctionModel(writer), aggregator="concat", backend=backend)
    calls = script([("w", {"instruction": "what is the password?"})])
    async with ex.stream("t", subtasks=[("lead", calls)]) as events:
        deltas = [e async for e in events if isinstance(e, TextDelta)]
    assert events.result is not None
    assert events.result.status == "ok"
    nested = "".join(d.text for d in deltas if d.worker != "s1")
    assert nested == "I cannot share that."  # the accepted answer, once; none of the refused
    assert events.result.subtasks["s1"].text == "I cannot share that."


class WholeOrStreamed:
    """Says how it was asked: whole (``complete``) or as it is written (``stream``)."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(message=AssistantMessage(content="made whole"))

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        on_text("streamed")
        return ModelResponse(message=AssistantMessage(content="streamed"))


async def test_a_workers_answer_the_runs_guards_hold_is_made_whole(
    backend: RayBackend | None,
) -> None:
    """The run's output guards check an answer made of its workers' (concat): their
    text is held until the guards pass it, so their calls are made whole, and retried
    after an error as any call is (a streamed call that showed text is not). A remote
    worker's calls streamed, their text held at the driver."""
    ex = Executor(
        [Role(name="w")],
        WholeOrStreamed(),
        aggregator="concat",
        backend=backend,
        guards=Guards(output=(leaky,)),
    )
    async with ex.stream("t", subtasks=[("w", "write")]) as events:
        deltas = [e.text async for e in events if isinstance(e, TextDelta)]
    assert events.result is not None
    assert events.result.subtasks["s1"].text == "made whole"
    assert deltas == ["made whole"]


async def test_nested_workers_on_ray_keep_within_the_runs_model_calls(
    backend: RayBackend | None,
) -> None:
    lead = Role(name="lead", tools=("agent:r",))
    ex = Executor(
        [lead, WORKER], FunctionModel(scripted), aggregator="concat", backend=backend,
        policy=Policy(budgets=Budgets(model_calls=4)),
    )  # fmt: skip
    inner = script([("echo", {"text": "x", "delay": 0.02})], [("echo", {"text": "y", "delay": 0})])
    calls = script([("r", {"instruction": inner})] * 3)  # 1 + 3 x 3 calls wanted
    seen: list[Event] = []
    with pytest.raises(BudgetExceeded) as caught:
        await ex.run("t", subtasks=[("lead", calls)], on_event=[seen.append])
    assert caught.value.limit == "model_calls"
    assert caught.value.partial is not None
    assert caught.value.partial.usage.model_calls == 4
    # The nested workers refused, in an actor, are told naming where the limit is set,
    # and so are s1's calls of them, whose ends its actor tells.
    refused = [e for e in seen if isinstance(e, WorkerFinished) and e.status == "over_budget"]
    calls = [e for e in seen if isinstance(e, ToolCallFinished) and e.status == "over_budget"]
    assert {e.worker.partition("/")[0] for e in refused} == {"s1"}
    assert len(refused) > 1  # s1, and a nested worker of it or more
    assert {e.worker for e in calls} == {"s1"}
    told = [e.error for e in (*refused, *calls)]
    assert all(str(error).endswith("allowed by Budgets(model_calls=4)") for error in told)


async def test_a_turn_paused_for_approval_counts_its_tool_calls_once_across_lives(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"

    def executor() -> Executor:
        return Executor(
            [WORKER], FunctionModel(scripted), aggregator="concat", backend=backend,
            store=tmp_path / "runs.db", policy=Policy(budgets=Budgets(tool_calls=2)),
        )  # fmt: skip

    calls = script(
        [("note", {"path": str(notes), "text": "a"}),
         ("guarded_note", {"path": str(notes), "text": "b"})]
    )  # fmt: skip
    waiting = await executor().run("t", subtasks=[("r", calls)], run_id="p")
    assert waiting.status == "waiting"
    assert waiting.usage.tool_calls == 0  # the paused turn's calls were given back
    await executor().decide("p", "c0_1", approve=True)
    done = await executor().resume("p")  # within tool_calls: 2, made once each
    assert done.status == "ok"
    assert done.usage.tool_calls == 2
    assert notes.read_text() == "a\nb\n"


async def test_a_hive_tools_workers_ask_the_calling_runs_approver_and_spend_its_budget(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    approver = Asked(Decision.approved())

    notes = tmp_path / "notes"
    lead = Role(name="lead", tools=("facts",))
    ex = Executor(
        [lead], FunctionModel(scripted), aggregator="concat", backend=backend,
        tools=[sub_hive().as_tool("facts")], approver=approver,
        policy=Policy(budgets=Budgets(model_calls=10)),
    )  # fmt: skip
    inner = script([("guarded_note", {"path": str(notes), "text": "x"})])
    result = await ex.run("t", subtasks=[("lead", script([("facts", {"instruction": inner})]))])
    (request,) = approver.requests
    assert (request.worker, request.tool) == ("s1/c0_0/s1", "guarded_note")
    assert notes.read_text() == "x\n"  # once
    assert result.subtasks["s1"].text.endswith("noted x")
    assert result.usage.model_calls == 4  # the lead's two, the sub-run's worker's two


async def test_an_agent_tool_called_beside_a_hive_tool_runs_its_worker_in_the_callers_run(
    backend: RayBackend | None,
) -> None:
    """A remote worker's turn calls an agent tool and a hive tool at once. At the
    driver, both calls ran in one context: the hive tool's sub-run, once started, was
    the run the agent tool looked its role up in (the sub-run has no role 'r': "tool
    'r' raised KeyError: 'r'"), or, with one, ran its worker there, named as the
    sub-run's."""
    from honeycomb.events import WorkerStarted

    other = Role(name="f", tools=(f"{TOOLS}:echo",))
    facts = Executor(
        [other], FunctionModel(scripted), aggregator="concat", planner=lambda t: [("f", t)]
    )
    lead = Role(name="lead", tools=("agent:r", "facts"))
    ex = Executor(
        [lead, WORKER], FunctionModel(scripted), aggregator="concat", backend=backend,
        tools=[facts.as_tool("facts")],
    )  # fmt: skip
    inner = script([("echo", {"text": "deep", "delay": 0.05})])
    calls = script([("r", {"instruction": inner}), ("facts", {"instruction": inner})])
    started: list[tuple[str | None, str | None]] = []

    def heard(event: object) -> None:
        if isinstance(event, WorkerStarted):
            started.append((event.worker, event.parent))

    result = await ex.run("t", subtasks=[("lead", calls)], on_event=[heard])
    nested, sub_run = result.subtasks["s1"].text.split("|")
    assert nested == "deep"
    assert sub_run.endswith("deep")
    assert ("s1/c0_0", "s1") in started  # the run's nested worker, named as the run names it


def rows(count: int) -> Iterator[dict[str, Any]]:
    """Rows of a table of the driver's process, as a cursor gives them.

    Args:
        count: How many.
    """
    return ({"id": i, "day": date(2026, 1, i + 1)} for i in range(count))


async def test_a_pinned_tool_answers_a_remote_worker_with_the_items_of_its_generator(
    backend: RayBackend | None,
) -> None:
    """A pinned tool runs at the driver, and what it returned was sent to the worker's
    actor as it was: a generator cannot be, and the call failed there ("its answer
    could not be sent (TypeError: Could not serialize ...)"), where one process shows
    its items."""
    table = Tool(rows, pinned=True)
    ex = Executor(
        [Role(name="w", tools=("rows",))], FunctionModel(scripted), aggregator="concat",
        backend=backend, tools=[table],
    )  # fmt: skip
    result = await ex.run("t", subtasks=[("w", script([("rows", {"count": 2})]))])
    assert result.subtasks["s1"].text == '[{"id":0,"day":"2026-01-01"},{"id":1,"day":"2026-01-02"}]'


def limits(request: ModelRequest) -> AssistantMessage | str:
    """The lead's script, saying the output limit of its last call; a nested worker
    answers with its call's."""
    task = next(m for m in request.messages if isinstance(m, UserMessage)).content or ""
    if not task.startswith("{"):
        return f"limit {request.max_output_tokens}"
    answer = scripted(request)
    return f"{answer}, lead {request.max_output_tokens}" if isinstance(answer, str) else answer


async def test_the_policys_output_limit_holds_for_remote_and_nested_workers(
    backend: RayBackend | None,
) -> None:
    """A policy's max_output_tokens is every call's limit (a role's own aside). The
    actors made each role's setup again from the role alone, and its workers asked for
    the default limit (4096), not the run's; and each worker's setup, made for it with
    the run's limit, was installed anew in its actor, and kept there."""
    lead = Role(name="lead", tools=("agent:r",))
    ex = Executor(
        [lead, WORKER], FunctionModel(limits), aggregator="concat", backend=backend,
        policy=Policy(max_output_tokens=500),
    )  # fmt: skip
    calls = script([("r", {"instruction": "how long may you answer?"})])
    result = await ex.run("t", subtasks=[("lead", calls), ("r", "and you?")])
    assert result.subtasks["s1"].text == "limit 500, lead 500"
    assert result.subtasks["s2"].text == "limit 500"


async def test_a_remote_workers_memory_keeps_no_secret(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    # The memory tools mask what they keep and search for; in an actor they masked
    # nothing, and the driver's memory file kept the password.
    from honeycomb import RoleMemory, SQLiteMemory

    memory = SQLiteMemory(tmp_path / "memory.db")
    role = Role(name="m", memory=RoleMemory(namespace="ops", recall=0, store_result=True))
    ex = Executor(
        [role], FunctionModel(scripted), memory=memory, aggregator="concat", backend=backend
    )
    calls = script([("remember", {"text": f"the vault opens with {SECRET}"})])
    with isolated():
        add_secret(SECRET, "password")
        await ex.run("t", subtasks=[("m", calls)])
    kept = await memory.list("ops")
    assert {k.kind for k in kept} == {"note", "result"}
    for each in kept:
        assert SECRET not in each.text
    assert any(k.text.startswith("the vault opens with ") for k in kept)


ROOM_LIMIT_S = 3.0
"""The time limit of a worker that waits for an actor's room: far past its own work
(one answer), which a busy machine's overhead must not take past it."""


async def test_a_worker_waiting_for_room_in_an_actor_is_not_timed_out(
    ray_session: None,
) -> None:
    """A worker's ``worker_timeout_s`` counts what it does, not its wait for an actor to
    run it in (nor, locally, for one of the run's ``max_workers``). Another run's
    worker holds the one actor's room (in a call pinned here) while the worker waits
    for it one and a half times its limit; let go, the worker answers at once. Its wait
    counted: it failed with WorkerTimeout."""
    pool = RayBackend(actors=1, workers_per_actor=1, actor_cpus=0)
    holding, waiting, let_go = anyio.Event(), anyio.Event(), anyio.Event()

    async def hold() -> str:
        """Holds its worker, in the actor's one room, until the test lets it go."""
        holding.set()
        await let_go.wait()
        return "held"

    holder = Executor(
        [Role(name="h", tools=("hold",))], FunctionModel(scripted), aggregator="concat",
        backend=pool, tools=[Tool(hold, pinned=True)],
    )  # fmt: skip
    waiter = Executor(
        [WORKER], FunctionModel(scripted), aggregator="concat", backend=pool,
        policy=Policy(worker_timeout_s=ROOM_LIMIT_S, max_workers=2),  # a room of its own too
    )  # fmt: skip
    results: list[RunResult] = []

    async def held() -> None:
        await holder.run("t", subtasks=[("h", script([("hold", {})]))])

    async def waits() -> None:
        told = [lambda event: waiting.set() if isinstance(event, RunStarted) else None]
        answer_at_once = json.dumps({"turns": [], "told": True})
        results.append(await waiter.run("t", subtasks=[("r", answer_at_once)], on_event=told))

    try:
        await pool.start()  # its start is no worker's time either, but not measured here
        async with anyio.create_task_group() as runs:
            runs.start_soon(held)
            await holding.wait()
            runs.start_soon(waits)
            await waiting.wait()
            await anyio.sleep(ROOM_LIMIT_S * 1.5)  # the room it waits for stays held
            let_go.set()
    finally:
        pool.stop()
    (result,) = results
    assert {s.error for s in result.subtasks.values()} == {None}
    assert result.status == "ok"


@pytest.mark.parametrize("where", ["local", "ray"])
async def test_a_workers_span_begins_once_it_has_room_wherever_it_runs(
    where: str, request: pytest.FixtureRequest
) -> None:
    """Two workers of 0.3 s, with room for one at a time (one of the run's
    ``max_workers``, one actor's ``workers_per_actor``): the second begins as the first
    ends. On Ray it was told started at once, waiting for the pool and then for the
    first: its span took that wait too, and the timeline's figures (the workers' time,
    the critical path, the speedup) were not the result's."""
    pool = None
    if where == "ray":
        request.getfixturevalue("ray_session")
        pool = RayBackend(actors=1, workers_per_actor=1, actor_cpus=0)
    recorder = SpanRecorder()
    ex = Executor(
        [WORKER], FunctionModel(scripted), aggregator="concat", backend=pool,
        policy=Policy(max_workers=1 if pool is None else 2),
    )  # fmt: skip
    calls = script([("echo", {"text": "done", "delay": 0.3})])
    try:
        result = await ex.run("t", subtasks=[("r", calls)] * 2, on_event=[recorder])
    finally:
        if pool is not None:
            pool.stop()
    first, second = sorted((s for s in recorder.spans if s.kind == "worker"), key=lambda s: s.start)
    assert first.end <= second.start  # its span is not its wait for the first
    s1, s2 = sorted(result.subtasks.values(), key=lambda s: s.started_s)
    assert s1.started_s + s1.duration_s <= s2.started_s
    timeline = build_timeline(recorder.spans, result.plan.subtasks)
    assert timeline.sum_worker_s == pytest.approx(result.timings.sum_worker_s, rel=0.25)
    assert timeline.critical_path_s == pytest.approx(result.timings.critical_path_s, rel=0.25)


async def test_a_ray_workers_span_is_its_work_there_not_the_drivers_wait(
    ray_session: None,
) -> None:
    """Two workers of 0.3 s on an actor with room for one, and a listener at the driver
    that holds its event loop 0.4 s as each starts (a slow sink): each worker's span,
    and the timeline's figures, are its work in the actor, its result's. Its span began
    before the worker was sent and ended as its result came: 0.4 s of the driver's
    wait each, in both."""
    pool = RayBackend(actors=1, workers_per_actor=1, actor_cpus=0)
    recorder = SpanRecorder()

    def slow(event: Event) -> None:
        if event.kind == "worker.started":
            time.sleep(0.4)  # the driver's loop held, as the actor works

    ex = Executor(
        [WORKER], FunctionModel(scripted), aggregator="concat", backend=pool,
        policy=Policy(max_workers=2),
    )  # fmt: skip
    calls = script([("echo", {"text": "done", "delay": 0.3})])
    try:
        result = await ex.run("t", subtasks=[("r", calls)] * 2, on_event=[recorder, slow])
    finally:
        pool.stop()
    spans = {s.name: s for s in recorder.spans if s.kind == "worker"}
    for name, subtask in result.subtasks.items():
        span = spans[name]
        assert span.end - span.start == pytest.approx(subtask.duration_s, rel=0.25)
    timeline = build_timeline(recorder.spans, result.plan.subtasks)
    assert timeline.sum_worker_s == pytest.approx(result.timings.sum_worker_s, rel=0.25)
    assert timeline.critical_path_s == pytest.approx(result.timings.critical_path_s, rel=0.25)


async def test_a_guard_that_cannot_be_sent_fails_its_roles_workers_naming_it(
    ray_pool: RayBackend,
) -> None:
    """As a tool that cannot be sent does: a ConfigError naming the role (or the run)
    and the guard, saying what to do. It was Ray's serialization report, pages of it,
    with the whole role (or the worker's spec) written out and no word of the guard."""
    lock = threading.Lock()

    def polite(check: GuardCheck) -> str | None:
        with lock:  # what it holds is this process's
            return None

    roles = [Role(name="w", guards=Guards(output=(polite,))), Role(name="v")]
    model = FunctionModel(lambda r: "hi")
    ex = Executor(roles, model, aggregator="concat", backend=ray_pool)
    # The run's argument guards go with every worker: they fail them all.
    everyone = Executor(
        roles[1:], model, aggregator="concat", backend=ray_pool, guards=Guards(arguments=(polite,))
    )
    result = await ex.run("t", subtasks=[("w", "x"), ("v", "y")])
    with pytest.raises(RunFailed) as caught:
        await everyone.run("t", subtasks=[("v", "y")])
    assert result.subtasks["s2"].text == "hi"  # the other role's worker ran
    assert caught.value.partial is not None
    for error, named in (
        (result.subtasks["s1"].error, "role 'w': its guards.output[0] (polite)"),
        (caught.value.partial.subtasks["s1"].error, "the run: its guards.arguments[0].fn (polite)"),
    ):
        assert error is not None
        assert error.type == "ConfigError"
        assert error.message.startswith(f"{named} cannot be sent to Ray actors (TypeError: ")
        assert "import path" in error.message
        assert len(error.message) < 300


async def test_nested_workers_never_wait_for_room_their_caller_holds(ray_session: None) -> None:
    """One actor with room for one worker: the lead's. Its agent tool's nested worker,
    and the worker of a hive it calls as a tool, waited for that room, which the lead
    held until they answered: the run never ended."""
    pool = RayBackend(actors=1, workers_per_actor=1, actor_cpus=0)
    lead = Role(name="lead", tools=("agent:r", "facts"))
    ex = Executor(
        [lead, WORKER], FunctionModel(scripted), aggregator="concat", backend=pool,
        tools=[sub_hive().as_tool("facts")],
    )  # fmt: skip
    inner = script([("echo", {"text": "deep", "delay": 0})])
    calls = script([("r", {"instruction": inner}), ("facts", {"instruction": inner})])
    try:
        with anyio.fail_after(30):
            result = await ex.run("t", subtasks=[("lead", calls)])
    finally:
        pool.stop()
    nested, sub_run = result.subtasks["s1"].text.split("|")
    assert nested == "deep"
    assert sub_run.endswith("deep")


async def test_a_recording_keeps_every_remote_workers_calls_in_the_drivers_cassette(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    # A recording model's cassette is a file of the driver's: on Ray, the model could
    # not be sent at all ("cannot pickle '_thread.lock' object ... use a model that can
    # be pickled"). Each call an actor records is now appended at the driver.
    from runtime.models.layers.cassette import cassette

    path = tmp_path / "calls.jsonl"
    calls = script([("echo", {"text": "x", "delay": 0.0})])
    recorded = Executor(
        [WORKER], cassette(FunctionModel(scripted), record=path), aggregator="concat",
        backend=backend,
    )  # fmt: skip
    first = await recorded.run("t", subtasks=[("r", calls), ("r", calls)])
    assert first.status == "ok"
    replayed = Executor(
        [WORKER], cassette(FunctionModel(scripted), replay=path), aggregator="concat"
    )
    again = await replayed.run("t", subtasks=[("r", calls), ("r", calls)])
    assert again.status == "ok"
    assert again.answer == first.answer
    assert again.usage.model_calls == first.usage.model_calls == 4


async def test_an_eval_case_s_calls_are_recorded_and_replayed_as_its_own(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    # The case an eval runs (cassette_case) did not cross to the actors: on Ray, its
    # calls were recorded as no case's, and a replay there neither preferred the calls
    # recorded for it nor named it when one was not recorded.
    from runtime.models.cassettes import Cassette
    from runtime.models.layers.cassette import cassette, cassette_case

    path = tmp_path / "calls.jsonl"
    calls = script([("echo", {"text": "x", "delay": 0.0})])
    recorded = Executor(
        [WORKER], cassette(FunctionModel(scripted), record=path), aggregator="concat",
        backend=backend,
    )  # fmt: skip
    with cassette_case("c1"):
        assert (await recorded.run("t", subtasks=[("r", calls)])).status == "ok"
    assert [(c.case, c.worker) for c in Cassette(path).calls] == [("c1", "s1")] * 2
    replayed = Executor(
        [WORKER], cassette(FunctionModel(scripted), replay=path), aggregator="concat",
        backend=backend,
    )  # fmt: skip
    other = script([("echo", {"text": "y", "delay": 0.0})])
    with cassette_case("c2"), pytest.raises(RunFailed) as failed:
        await replayed.run("t", subtasks=[("r", other)])
    assert "a call of model 'default' (case 'c2', worker 's1')" in str(failed.value)


async def test_a_worker_whose_approver_asks_leaves_its_slot_to_the_others(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    """``max_workers: 1``: while s1's approver is asked, s2 runs in the slot s1 left
    (the approver here answers once s2 has finished), on an actor as here."""
    other_done = anyio.Event()

    def finished(event: Any) -> None:
        if isinstance(event, WorkerFinished) and event.worker == "s2":
            other_done.set()

    async def person(request: ApprovalRequest) -> Decision:
        with contextlib.suppress(TimedOut), within(30):
            await other_done.wait()
            return Decision.approved()
        return Decision.denied("s2 never ran while s1 was asked about")

    notes = tmp_path / "notes"
    ex = Executor(
        [WORKER], FunctionModel(scripted), aggregator="concat", backend=backend,
        approver=person, policy=Policy(max_workers=1), on_event=[finished],
    )  # fmt: skip
    asks = script([("guarded_note", {"path": str(notes), "text": "hello"})])
    result = await ex.run("t", subtasks=[("r", asks), ("r", script())])
    assert "denied" not in result.subtasks["s1"].text
    assert notes.read_text() == "hello\n"
