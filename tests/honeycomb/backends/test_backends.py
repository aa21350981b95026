"""The semantics that must hold wherever workers run: the same tests on the local
backend and on Ray (a real local Ray, started once for the session; the actors are
other processes, so the tools write what they see to files the tests read)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import pickle
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from honeycomb import (
    BudgetExceeded,
    Budgets,
    ConfigError,
    Decision,
    Executor,
    GuardCheck,
    Guards,
    Policy,
    Role,
    RunFailed,
    Tool,
    ToolContext,
)
from honeycomb.backends import RayBackend
from honeycomb.backends import _join as ray_join
from honeycomb.backends._standins import DriverLimiter
from honeycomb.backends.ray import recipe
from honeycomb.cli.main import main as cli
from honeycomb.errors import ModelHTTPError
from honeycomb.events import GuardChecked
from honeycomb.run.conversation import CONVERSATION_HEADER
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from honeycomb.tracing import SpanRecorder, configure_logging
from runtime import (
    AssistantMessage,
    ModelRequest,
    ModelResponse,
    RetryingModel,
    RetryPolicy,
    UserMessage,
)
from runtime.secrets import add_secret
from runtime.tools import idempotency_key
from tests.support.ray_head import SETTINGS, answering
from tests.support.ray_tools import scripted
from tests.support.stores import query

ray = pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")  # Ray brings its own

from tests.support.listening import listeners, wide  # noqa: E402 (it needs psutil)

# One test process for the file, and for every test that uses Ray: each process would
# start a Ray of its own (``ray_session``, tests/conftest.py).
pytestmark = pytest.mark.xdist_group("ray")

TOOLS = "tests.support.ray_tools"
ROLE = Role(
    name="r",
    tools=tuple(
        f"{TOOLS}:{name}"
        for name in ("ledger", "note", "intent_seen", "wait", "echo", "pid", "key")
    ),
)


def script(*turns: list[tuple[str, dict[str, Any]]], log: Path | None = None) -> str:
    """A subtask for :func:`scripted`: its calls, turn by turn."""
    return json.dumps({"turns": [list(t) for t in turns], "log": str(log) if log else None})


def executor(backend: RayBackend | None, **options: Any) -> Executor:
    return Executor(
        [ROLE], FunctionModel(scripted), aggregator="concat", backend=backend, **options
    )


async def test_observations_in_order(backend: RayBackend | None) -> None:
    calls = [("echo", {"text": str(i), "delay": 0.05 * (3 - i)}) for i in range(4)]
    result = await executor(backend).run("t", subtasks=[("r", script(calls)) for _ in range(3)])
    assert [s.worker.text for s in result.subtasks.values() if s.worker] == ["0|1|2|3"] * 3


async def test_a_worker_is_shown_the_sessions_conversation_wherever_it_runs(
    backend: RayBackend | None,
) -> None:
    role = Role(name="r", session="full")
    told = json.dumps({"turns": [], "told": True})
    ex = Executor(
        [role], FunctionModel(scripted), aggregator="concat", backend=backend,
        planner=lambda task: [("r", told)],
    )  # fmt: skip
    session = ex.session("s")
    await session.run("Weather in Rome?")
    second = await session.run("And in Oslo?")
    text = second.subtasks["s1"].text
    assert text.startswith(told)
    assert CONVERSATION_HEADER in text
    assert "Weather in Rome?" in text.partition(CONVERSATION_HEADER)[2]


async def test_exclusive_keys_never_overlap(backend: RayBackend | None, tmp_path: Path) -> None:
    path = tmp_path / "ledger"
    subtasks = [("r", script([("ledger", {"path": str(path), "entry": str(i)})])) for i in range(6)]
    result = await executor(backend).run("t", subtasks=subtasks)
    assert all(s.ok for s in result.subtasks.values())
    lines = path.read_text().split("\n")[:-1]
    assert len(lines) == 12
    # Each start is followed by its own end: no two calls were ever inside at once.
    for start, end in zip(lines[::2], lines[1::2], strict=True):
        assert start.split()[0] == "start"
        assert end.split()[0] == "end"
        assert start.split()[2] == end.split()[2]


async def test_budget_is_shared(backend: RayBackend | None, tmp_path: Path) -> None:
    log = tmp_path / "calls"
    two_turns = script([("echo", {"text": "x", "delay": 0.0})], log=log)
    policy = Policy(budgets=Budgets(model_calls=3))
    with pytest.raises(BudgetExceeded) as caught:
        await executor(backend, policy=policy).run("t", subtasks=[("r", two_turns)] * 4)
    assert caught.value.limit == "model_calls"
    # Reserved before each call: the models were called no more than the budget allows
    # (4 workers of 2 calls each would make 8). A call reserved as the run stopped may
    # be cancelled before it is made.
    assert 1 <= len(log.read_text().split("\n")[:-1]) <= 3


async def test_the_tool_calls_budget_is_shared(backend: RayBackend | None, tmp_path: Path) -> None:
    # Each actor's worker checked the run's tool_calls against its own calls alone: 8
    # workers of 2 calls each made 16 under tool_calls=3.
    notes = tmp_path / "notes"
    turns = [script([("note", {"path": str(notes), "text": f"{i}{c}"}) for c in "ab"])
             for i in range(8)]  # fmt: skip
    policy = Policy(budgets=Budgets(tool_calls=3))
    with pytest.raises(BudgetExceeded) as caught:
        await executor(backend, policy=policy).run("t", subtasks=[("r", t) for t in turns])
    assert caught.value.limit == "tool_calls"
    # Reserved a turn at a time, before any of its calls runs: one turn of two fits
    # (and may be cancelled as the run stops, before its calls run).
    assert len(_text(notes).splitlines()) <= 2


async def test_intent_is_durable_before_the_call(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    store = tmp_path / "runs.db"
    subtasks = [("r", script([("intent_seen", {"store": str(store)})]))]
    result = await executor(backend, store=store).run("t", subtasks=subtasks)
    assert result.subtasks["s1"].worker is not None
    assert result.subtasks["s1"].worker.text == "intent seen"


async def test_a_remote_calls_idempotency_key_is_its_runs(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    store = tmp_path / "runs.db"
    subtasks = [("r", script([("key", {})]))]
    result = await executor(backend, store=store).run("t", subtasks=subtasks, run_id="k1")
    stored = await RunStore(store).load("k1")
    assert stored is not None
    run = f"k1\0{stored.started_at!r}"  # its id, and when its first life started
    assert result.subtasks["s1"].text == idempotency_key(run, "s1", 1, "c0_0")


async def test_cancelling_run_cancels_remote_tools(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    paths = [tmp_path / f"waits{i}" for i in range(2)]
    subtasks = [("r", script([("wait", {"path": str(p), "seconds": 60})])) for p in paths]
    running = asyncio.create_task(executor(backend).run("t", subtasks=subtasks))
    await _until(lambda: all("waiting" in _text(p) for p in paths))
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    await _until(lambda: all("cancelled" in _text(p) for p in paths))


async def test_events_and_checkpoints_reach_the_driver(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    store = tmp_path / "runs.db"
    seen: list[Any] = []
    ex = executor(backend, store=store, on_event=[seen.append])
    calls = [
        ("echo", {"text": "a", "delay": 0.0}),
        ("note", {"path": str(tmp_path / "n"), "text": "b"}),
    ]
    await ex.run("t", subtasks=[("r", script(calls))] * 2, run_id="run1")
    kinds = [(e.kind, getattr(e, "worker", None)) for e in seen]
    for worker in ("s1", "s2"):
        assert ("model_call.started", worker) in kinds
        assert ("tool_call.finished", worker) in kinds
    stored = await RunStore(store).load("run1")
    assert stored is not None
    for saved in stored.workers.values():  # checkpointed: the calls and observations
        assert sum(len(json.loads(rows)) for _, rows in saved.messages) >= 3
    jsonl = tmp_path / "spans.jsonl"
    assert (
        await asyncio.to_thread(
            cli, ["trace", "run1", "--store", str(store), "--jsonl", str(jsonl)]
        )
        == 0
    )
    assert '"echo"' in jsonl.read_text()
    assert '"note"' in jsonl.read_text()


async def test_a_calls_span_lasts_as_long_as_the_call_wherever_it_ran(
    backend: RayBackend | None,
) -> None:
    """A tool that holds its actor's event loop a quarter of a second: the events of
    its call reached the driver together as it ended, which timed them as they came
    (its span lasted no time at all; in a CPU-heavy run, calls were short by seconds).
    They are timed as they happened there."""
    recorder = SpanRecorder()
    ex = Executor(
        [Role(name="h", tools=(f"{TOOLS}:held",))], FunctionModel(scripted),
        aggregator="concat", backend=backend,
    )  # fmt: skip
    await ex.run("t", subtasks=[("h", script([("held", {})]))], on_event=[recorder])
    (call,) = (s for s in recorder.spans if s.kind == "tool_call")
    (worker,) = (s for s in recorder.spans if s.kind == "worker")
    assert call.duration_s >= 0.24
    assert worker.start <= call.start <= call.end <= worker.end


def busy_first(request: ModelRequest) -> AssistantMessage | str:
    """:func:`scripted`, but for its first attempt, which fails (retryably) quoting a
    secret: its script's ``busy`` file says it was made, and ``secret`` what to quote."""
    task = next(m for m in request.messages if isinstance(m, UserMessage)).content
    script = json.loads(task.split("\n")[0])
    busy = Path(script["busy"])
    if not busy.exists():
        busy.touch()
        raise ModelHTTPError(503, f"busy, token {script['secret']}")
    return scripted(request)


AT_ONCE = RetryPolicy(attempts=2, initial_wait_s=0.01, max_wait_s=0.01, jitter_s=0.0)


async def test_honeycombs_log_entries_reach_the_drivers_log_wherever_the_worker_runs(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    """A worker's entries of Honeycomb's own (a retry of its model call, which no
    listener is told of; a tool that held the event loop past its time limit) are in
    the log of the process that runs the run, bound with the run, the worker and the
    turn, and the secrets it knows masked. From an actor they stayed in the actor's
    process (where structlog, not configured, logged nothing)."""
    out = io.StringIO()
    configure_logging(json=True, stream=out)
    ex = Executor(
        [Role(name="r", tools=(f"{TOOLS}:held",))],
        RetryingModel(FunctionModel(busy_first), AT_ONCE),
        aggregator="concat", backend=backend, log_events=False,
    )  # fmt: skip
    secret = "tok-" + secrets.token_hex(6)
    add_secret(secret, "token", owner=ex)
    task = json.dumps(
        {"turns": [[("held", {})]], "log": None, "busy": str(tmp_path / "busy"), "secret": secret}
    )
    await ex.run("t", subtasks=[("r", task)], run_id="logged")
    assert secret not in out.getvalue()
    entries = {e["event"]: e for e in map(json.loads, out.getvalue().splitlines())}
    retry, held = entries["model_call.retry"], entries["tool_call.held_loop"]
    assert (retry["run_id"], retry["worker"], retry["level"]) == ("logged", "s1", "warning")
    assert "busy, token [token hidden]" in retry["error"]
    assert (held["run_id"], held["worker"], held["turn"], held["tool"]) == (
        "logged",
        "s1",
        1,
        "held",
    )


async def test_a_killed_actor_s_worker_continues_elsewhere(
    ray_session: None, tmp_path: Path
) -> None:
    pool = RayBackend(actors=2, actor_cpus=0)
    try:
        notes, waits = tmp_path / "notes", tmp_path / "waits"
        calls = script(
            [("note", {"path": str(notes), "text": "once"})],
            [("wait", {"path": str(waits), "seconds": 60})],
        )
        # Two calls in all: the turn cut off is made again, and counted once (the calls
        # its actor reserved were counted twice, and the run went over this budget).
        policy = Policy(budgets=Budgets(tool_calls=2))
        ex = executor(pool, store=tmp_path / "runs.db", policy=policy)
        running = asyncio.create_task(ex.run("t", subtasks=[("r", calls)]))
        await _until(lambda: "waiting" in _text(waits))
        pid = int(_text(waits).split()[1])
        os.kill(pid, signal.SIGKILL)
        result = await asyncio.wait_for(running, 60)
    finally:
        pool.stop()
    assert result.usage.tool_calls == 2
    worker = result.subtasks["s1"].worker
    assert worker is not None
    assert worker.ok
    assert worker.text == "noted once|waited again"  # on from turn 1's checkpoint
    assert _text(notes) == "once\n"  # the side effect ran once
    assert int(_text(waits).split("\n")[1].split()[1]) != pid  # in another process


async def test_a_killed_actor_s_worker_is_lost_without_a_store(
    ray_session: None, tmp_path: Path
) -> None:
    pool = RayBackend(actors=1, actor_cpus=0)
    try:
        waits = tmp_path / "waits"
        calls = script([("wait", {"path": str(waits), "seconds": 60})])
        finished: list[Any] = []
        ex = executor(
            pool, on_event=[lambda e: finished.append(e) if e.kind == "worker.finished" else None]
        )
        running = asyncio.create_task(ex.run("t", subtasks=[("r", calls)]))
        await _until(lambda: "waiting" in _text(waits))
        os.kill(int(_text(waits).split()[1]), signal.SIGKILL)
        with pytest.raises(RunFailed):  # its only subtask failed
            await asyncio.wait_for(running, 60)
    finally:
        pool.stop()
    (event,) = finished
    assert event.status == "failed"
    assert event.error.startswith("WorkerLost: worker 's1' was lost with its Ray actor")
    assert "run store" in event.error


async def test_a_nested_worker_goes_on_when_its_callers_actor_dies(
    ray_session: None, tmp_path: Path
) -> None:
    """A lead's agent tool runs a nested worker (in the other actor) that makes a side
    effect, then waits; the lead's actor is killed meanwhile, and the lead goes on in
    another from its last checkpoint, calling the tool again. The nested worker was
    cancelled with its caller's actor and started anew: its side effect was made twice
    (its journal was its cut-off life's), and all its work again. Now it goes on at the
    driver, and the call made again is given its answer: in the trace, one call, its
    nested worker's span under it (it was under a call span of the dead life that no
    trace kept, as the call, started again, took its place)."""
    from honeycomb.trace.spans import SpanRecorder

    spans = SpanRecorder()
    pool = RayBackend(actors=2, actor_cpus=0)
    notes, waits = tmp_path / "notes", tmp_path / "waits"
    lead = Role(name="lead", tools=("agent:r",))
    ex = Executor(
        [lead, ROLE], FunctionModel(scripted), aggregator="concat", backend=pool,
        store=tmp_path / "runs.db",
    )  # fmt: skip
    inner = script(
        [("note", {"path": str(notes), "text": "once"})],
        [("wait", {"path": str(waits), "seconds": 3})],
    )
    try:
        running = asyncio.create_task(
            ex.run(
                "t",
                subtasks=[("lead", script([("r", {"instruction": inner})]))],
                on_event=[spans],
            )
        )
        await _until(lambda: "waiting" in _text(waits))
        nested = int(_text(waits).split()[1])
        (callers,) = [p for p in await pool.pids() if p != nested]
        os.kill(callers, signal.SIGKILL)
        result = await asyncio.wait_for(running, 60)
    finally:
        pool.stop()
    assert result.status == "ok"
    assert result.subtasks["s1"].text == "noted once|waited"
    assert _text(notes) == "once\n"  # the side effect, once
    assert _text(waits) == f"waiting {nested}\n"  # never cut off, never made again
    assert result.usage.model_calls == 5  # the lead's 2, the nested worker's 3: once each
    by_id = {span.span_id: span for span in spans.spans}
    (call,) = [s for s in spans.spans if s.kind == "tool_call" and s.worker == "s1"]
    (worker,) = [s for s in spans.spans if s.kind == "worker" and s.worker == "s1/c0_0"]
    assert (call.name, call.status) == ("r", "ok")
    assert worker.parent_id is not None
    assert by_id[worker.parent_id] is call


def passes(check: GuardCheck) -> str | None:
    """An argument guard that passes every call (its checks are counted by their events)."""
    return None


async def test_a_pinned_side_effect_goes_on_judged_once_when_its_callers_actor_dies(
    ray_session: None, tmp_path: Path
) -> None:
    """A side-effecting pinned tool (an MCP server's, say) runs at the driver, the call
    passed by its worker's argument guard; its caller's actor is killed while it runs.
    The call went on and made its effect, but the worker, gone on in another actor from
    its last checkpoint, was told its outcome was unknown (the journal sent along held
    its intent alone), and its answer was lost; and a pinned tool that takes no context
    was not known across lives at all. Then, with the verdicts journaled, the next life
    judged the call again (a judge's tokens spent twice, and a verdict that changed its
    mind would refuse a call whose effect went on). Now the next life makes the call
    again, judged once, and is given its answer: one effect."""
    started, release = asyncio.Event(), asyncio.Event()
    effects, log = tmp_path / "effects", tmp_path / "log"

    async def publish(text: str) -> str:
        """Publish a text.

        Args:
            text: What.
        """
        started.set()
        await release.wait()
        with effects.open("a", encoding="utf-8") as out:
            out.write(text + "\n")
        return f"published {text}"

    checks: list[GuardChecked] = []

    def checked(event: Any) -> None:
        if isinstance(event, GuardChecked) and event.guard_kind == "arguments":
            checks.append(event)

    pool = RayBackend(actors=2, actor_cpus=0)
    role = Role(name="p", tools=("publish",), guards=Guards(arguments=(passes,)))
    ex = Executor(
        [role], FunctionModel(scripted), aggregator="concat", backend=pool,
        tools=[Tool(publish, pinned=True, side_effects=True)], store=tmp_path / "runs.db",
    )  # fmt: skip
    try:
        calls = script([("publish", {"text": "x"})], log=log)
        running = asyncio.create_task(ex.run("t", subtasks=[("p", calls)], on_event=[checked]))
        await asyncio.wait_for(started.wait(), 60)
        caller = int(_text(log).split()[1])  # the model's process: the worker's actor
        os.kill(caller, signal.SIGKILL)
        while True:  # until the driver knows it died (a pid of live actors only)
            try:
                if caller not in await pool.pids():
                    break
            except ray.exceptions.RayActorError:
                pass
            await asyncio.sleep(0.02)
        release.set()
        result = await asyncio.wait_for(running, 60)
    finally:
        pool.stop()
    assert result.status == "ok"
    assert result.subtasks["s1"].text == "published x"
    assert _text(effects) == "x\n"  # once
    assert [(c.call_id, c.status) for c in checks] == [("c0_0", "ok")]  # judged once


def pay(path: str, amount: int) -> str:
    """Pay, once a person approves: a line in a ledger.

    Args:
        path: The ledger's file.
        amount: How much.
    """
    with open(path, "a", encoding="utf-8") as ledger:
        ledger.write(f"paid {amount}\n")
    return f"paid {amount}"


def payment(arguments: dict[str, Any]) -> str:
    """What a payment will do, as a person is asked about it (each time, a line in the
    ledger's ``.asked`` file: where the gate that asks is)."""
    with open(f"{arguments['path']}.asked", "a", encoding="utf-8") as asked:
        asked.write("asked\n")
    return f"pay {arguments['amount']}"


async def test_a_person_is_asked_once_about_a_call_whose_actor_dies_meanwhile(
    ray_session: None, tmp_path: Path
) -> None:
    """The run's approver (a person at a terminal) is asked about a remote worker's call;
    the worker's actor is killed meanwhile, and the worker goes on in another from its
    last checkpoint, where its gate asks about the call again. The person was asked
    again (the first question cut off, its answer lost); now the question stands, and
    its answer is the next life's, and the call is told waiting and decided once (the
    next life's gate told ``approval.requested`` again)."""
    asked: list[Any] = []
    heard: list[Any] = []
    decided = asyncio.Event()

    async def person(request: Any) -> Decision:
        asked.append(request)
        await decided.wait()
        return Decision.approved()

    pool = RayBackend(actors=1, actor_cpus=0)
    ledger = tmp_path / "ledger"
    gates = tmp_path / "ledger.asked"
    ex = Executor(
        [Role(name="p", tools=("pay",))], FunctionModel(scripted), aggregator="concat",
        backend=pool, store=tmp_path / "runs.db", approver=person,
        tools=[Tool(pay, side_effects=True, approval=True, describe=payment)],
    )  # fmt: skip
    try:
        calls = script([("pay", {"path": str(ledger), "amount": 5})])
        running = asyncio.create_task(ex.run("t", subtasks=[("p", calls)], on_event=[heard.append]))
        await _until(lambda: len(asked) == 1)
        (pid,) = await pool.pids()
        os.kill(pid, signal.SIGKILL)
        await _until(lambda: _text(gates).count("asked") == 2)  # its next life's gate
        decided.set()
        result = await asyncio.wait_for(running, 60)
    finally:
        pool.stop()
    assert result.status == "ok"
    assert result.subtasks["s1"].text == "paid 5"
    assert len(asked) == 1
    assert _text(ledger) == "paid 5\n"
    told = [e.kind for e in heard if e.kind.startswith("approval.")]
    assert told == ["approval.requested", "approval.decided"]


async def test_an_actor_that_died_between_runs_loses_no_worker_of_the_next(
    ray_session: None,
) -> None:
    """An actor killed while it ran no worker (its process killed, its node lost) is
    found dead before a worker is sent to it, and replaced: a run with no store, whose
    worker would be lost with a dead actor, has it run in the new one. It was sent to
    the dead one, and failed with WorkerLost ('with a run store it would have
    continued ...'), before it began."""
    pool = RayBackend(actors=1, actor_cpus=0)
    ex = executor(pool)
    calls = script([("pid", {})])
    try:
        before = await ex.run("t", subtasks=[("r", calls)])
        killed = int(before.subtasks["s1"].text)
        os.kill(killed, signal.SIGKILL)
        await asyncio.to_thread(psutil.Process(killed).wait, 30)  # gone before the next run
        after = await ex.run("t", subtasks=[("r", calls)])
    finally:
        pool.stop()
    assert after.status == "ok"
    assert after.subtasks["s1"].error is None
    assert int(after.subtasks["s1"].text) != killed  # in the actor made in its place


async def test_a_tool_that_kills_its_actor_fails_its_worker_after_a_bounded_number_of_deaths(
    ray_session: None, tmp_path: Path
) -> None:
    """A stored run's worker goes on in another actor when its actor dies, but not
    forever: a tool that ends its process each time fails its worker at the
    backend's ``max_actor_deaths``, naming its role and the tool (which its events
    said it was running: the tool runs a while before it ends its process, as one that
    runs out of memory does)."""
    pool = RayBackend(actors=1, actor_cpus=0, max_actor_deaths=2)
    lives = tmp_path / "lives"
    try:
        ex = Executor(
            [Role(name="k", tools=(f"{TOOLS}:crash",))], FunctionModel(scripted),
            aggregator="concat", backend=pool, store=tmp_path / "runs.db",
        )  # fmt: skip
        calls = script([("crash", {"path": str(lives), "after": 1.0})])
        with pytest.raises(RunFailed) as info:
            await asyncio.wait_for(ex.run("t", subtasks=[("k", calls)]), 90)
    finally:
        pool.stop()
    assert len(_text(lives).splitlines()) == 2  # two actors died, no third was tried
    error = info.value.partial.subtasks["s1"].error
    assert error is not None
    assert error.type == "WorkerLost"
    assert error.message.startswith(
        "worker 's1' of role 'k' was lost with its Ray actor 2 times, while it ran tool 'crash'"
    )
    assert "max_actor_deaths=2" in error.message


def test_a_private_ray_never_joins_a_running_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    given: dict[str, Any] = {}
    monkeypatch.setattr(ray_join, "_private", None)  # none starts: the session's is kept
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **options: given.update(options))
    monkeypatch.delenv("RAY_USAGE_STATS_ENABLED", raising=False)
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    RayBackend()._init()
    assert given["address"] == "local"  # never "auto", never RAY_ADDRESS
    assert os.environ["RAY_AUTH_MODE"] == "token"  # chosen, so Ray does not warn of it
    assert given["include_dashboard"] is False
    assert given["_node_ip_address"] == "127.0.0.1"
    assert os.environ["RAY_USAGE_STATS_ENABLED"] == "0"
    given.clear()
    # Named as a hive names it (and as the backend's repr says it), it was Ray's own
    # local Ray: on every interface, with the machine's CPUs, and no warden.
    RayBackend("local", num_cpus=1)._init()
    assert given["_node_ip_address"] == "127.0.0.1"
    assert given["num_cpus"] == 1
    given.clear()
    with answering(SETTINGS) as head:
        RayBackend(head)._init()
    assert given["address"] == head
    assert "_node_ip_address" not in given


async def test_actors_a_private_ray_cannot_place_are_refused_not_waited_for(
    ray_session: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # RayBackend(actors=3) on a private Ray of two CPUs (the default two actors on a
    # machine of one, say) waited for its third actor without end: Ray never places it.
    made: list[RayBackend] = []
    monkeypatch.setattr(RayBackend, "_new_actor", lambda self: made.append(self))
    with pytest.raises(ConfigError) as caught:  # the session's private Ray has two
        await RayBackend(actors=3).start()
    assert str(caught.value).startswith(
        "RayBackend(address='local', actors=3): its actors ask for 3 CPUs in all "
        "(actor_cpus=1 each), and the private Ray this process started has 2 (num_cpus): "
    )
    assert made == []  # no actor was made to wait for
    ray_join.check_room("pool", 4, 0.5)  # as many as it has: placed


async def test_a_pool_the_live_pools_leave_no_room_for_is_refused_not_waited_for(
    ray_session: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A second pool on the private Ray (a retry, a service's next run) was checked
    # against all its CPUs, not those the live pools left: it waited without end.
    holding = RayBackend(actors=1, actor_cpus=2)  # the session's private Ray has two
    await holding.start()
    made: list[RayBackend] = []
    monkeypatch.setattr(RayBackend, "_new_actor", lambda self: made.append(self))
    try:
        with pytest.raises(ConfigError) as caught:
            await RayBackend(actors=1).start()
    finally:
        holding.stop()
    assert str(caught.value).startswith(
        "RayBackend(address='local', actors=1): its actors ask for 1 CPUs in all "
        "(actor_cpus=1 each), and the private Ray this process started has 2 (num_cpus), "
        "2 of them held by live pools until they stop (RayBackend(address='local', "
        "actors=1) holds 2): "
    )
    assert made == []
    ray_join.check_room("pool", 2, 1)  # the stopped pool holds none: placed


@contextlib.contextmanager
def listening() -> Iterator[str]:
    """The ``host:port`` of a socket that listens on 127.0.0.1 while the block runs."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield f"127.0.0.1:{server.getsockname()[1]}"


@pytest.fixture
def tried(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The addresses Ray's own connect was asked to join (none, when refused before it),
    a head given half a second to answer."""
    joined: list[str] = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **options: joined.append(options["address"]))
    monkeypatch.setattr(ray_join, "REACH_S", 0.5)
    return joined


def test_a_head_that_does_not_answer_is_told_at_once(
    tried: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ray's driver waited for a GCS at an address where nothing answers some fourteen
    # minutes (twenty tries of forty seconds), the event loop held, its warnings on
    # standard error: honeycomb run --ray-address with a mistyped port hung there.
    with listening() as gone:
        pass  # closed: nothing answers there now
    started = time.monotonic()
    with pytest.raises(ConnectionError, match=f"nothing answers at {gone} within 0.5s"):
        RayBackend(gone)._init()
    assert time.monotonic() - started < 5
    assert tried == []

    # A host no name server knows was asked for again and again, the whole 10 s.
    def unknown(address: tuple[str, int], timeout: float) -> socket.socket:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "create_connection", unknown)  # as a name server says
    started = time.monotonic()
    with pytest.raises(ConnectionError, match=r"no machine is named 'no-such-head\.invalid'"):
        RayBackend("no-such-head.invalid:6379")._init()
    assert time.monotonic() - started < 0.5
    assert tried == []


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1:70000", "past 65535"),
        ("ray://ray:hunter2-pw@head:99999", "past 65535"),
        ("127.0.0.1:0", "which no server listens on"),
    ],
)
def test_a_heads_port_past_65535_or_0_is_refused_at_once(
    address: str, why: str, tried: list[str]
) -> None:
    # 127.0.0.1:70000 was tried for 10 s (as port 4464: the socket takes it modulo
    # 65536), then told as nothing answering there, Connection refused; so was port 0.
    started = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        RayBackend(address)._init()
    assert time.monotonic() - started < 1
    port = address.rpartition(":")[2]
    assert f"names port {port}, {why}: name the head's GCS" in str(caught.value)
    assert "hunter2-pw" not in str(caught.value)
    assert tried == []


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("localhost:6379 ", "holds a blank ('localhost:6379 '): write it without one"),
        ("127.0.0.1", "names no port: name the head's GCS port"),
        ("head:abc", "names port 'abc', which is no number: name the head's GCS port"),
        (":6379", "names no host: name the head's GCS port"),
        ("::1:6379", "names an IPv6 address without brackets: write the address in brackets"),
        ("[::1]", "names no port: name the head's GCS port"),
        ("http://head:6379", "is a URL (http://), which no Ray head answers at"),
    ],
)
def test_an_address_that_is_no_heads_is_refused_as_the_backend_is_made(
    address: str, why: str, tried: list[str]
) -> None:
    # A port with a blank after it (int() reads 6379) was waited for some fourteen
    # minutes by Ray's driver, the check that a head answers skipped; the others were
    # Ray's ValueErrors as the pool started (Invalid address format: 127.0.0.1).
    with pytest.raises(ConfigError) as caught:
        RayBackend(address)
    assert str(caught.value).startswith(f"the address of Ray's head, {address}, {why}")
    assert tried == []


def test_the_forms_of_a_heads_address_are_taken() -> None:
    for address in ("head:6379", "[::1]:6379", "ray://u:pw@head:10001", "auto"):
        assert RayBackend(address).address == address  # ("auto": Ray's, as it was)


def test_num_cpus_with_an_address_is_refused_as_the_backend_is_made(tried: list[str]) -> None:
    # It was dropped without a word: a cluster's CPUs are its own (a hive said so).
    with pytest.raises(ConfigError, match="num_cpus is for a local Ray started here; the cl"):
        RayBackend("head:6379", num_cpus=4)
    assert tried == []


@pytest.mark.parametrize(
    ("reply", "why"),
    [(b"", "it said nothing within 0.5s"), (b"HTTP/1.1 404 Not Found\r\n\r\n", "HTTP/1")],
)
def test_a_port_that_answers_but_is_no_ray_head_is_told_at_once(
    reply: bytes, why: str, tried: list[str]
) -> None:
    # Ray's driver, given a port where something else listens (a dashboard's, a server
    # that says nothing), waited for a GCS there as long as where nothing answers.
    started = time.monotonic()
    with answering(reply) as stranger, pytest.raises(ConnectionError) as caught:
        RayBackend(stranger)._init()
    assert f"{stranger} is not a Ray head" in str(caught.value)
    assert time.monotonic() - started < 5
    assert why in str(caught.value)
    assert tried == []


def test_a_key_given_empty_goes_to_the_actors_as_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """A hive model whose api_key comes out empty (${NAME:-}, NAME unset) has no key,
    and sends a placeholder, never OPENAI_API_KEY, to its base_url: on Ray it was
    refused as a key given ('drop api_key='), and the actor would have sent its own
    OPENAI_API_KEY in its place."""
    from honeycomb import OpenAIModel

    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-actors-own-key")
    empty = OpenAIModel("llama3.1", base_url="http://127.0.0.1:1/v1", api_key="")
    again = pickle.loads(recipe(empty, {}))  # as an actor makes it
    assert again._new_client().api_key == "unused"


def test_an_api_key_is_never_sent_to_the_actors() -> None:
    from honeycomb import OpenAIModel
    from honeycomb.models import Price, PricedModel

    keyed = OpenAIModel("gpt-4o-mini", api_key="sk-secret-123")
    # Under a price (as a hive's price: makes it), the endpoint was pickled whole,
    # its key with it.
    for model in (keyed, PricedModel(keyed, Price(input_per_mtok=1.0, output_per_mtok=2.0))):
        with pytest.raises(ConfigError, match="OPENAI_API_KEY") as caught:
            recipe(model, {})
        assert "sk-secret-123" not in str(caught.value)
        # What a hive says, told too: it said to drop api_key=, which no hive writes,
        # and what to write instead: the variable's name.
        assert "drop api_key= (a hive model's api_key: written out)" in str(caught.value)
        assert "api_key_env=, a hive's api_key: ${NAME}" in str(caught.value)
    limiters: dict[str, Any] = {}
    endpoint = OpenAIModel("gpt-4o-mini", base_url="http://127.0.0.1:1/v1", max_concurrency=3)
    sent = recipe(PricedModel(endpoint, Price(input_per_mtok=1.0, output_per_mtok=2.0)), limiters)
    assert b"sk-" not in sent
    again = pickle.loads(sent)  # as an actor makes it
    assert (again.inner.model, again.inner.base_url) == ("gpt-4o-mini", "http://127.0.0.1:1/v1")
    # Its rate limiter is the driver's, held for each attempt through a stand-in.
    assert list(limiters.values()) == [endpoint.limiter]
    assert isinstance(again.inner.limiter, DriverLimiter)
    assert limiters[again.inner.limiter.key] is endpoint.limiter


def test_sending_a_model_of_no_endpoint_leaves_openai_unimported() -> None:
    # Sending the first worker's model to the actors imported the openai SDK, to look
    # for an endpoint in it, in the run's event loop: with the offline model, the first
    # worker of a process stood a second before it began, every run of the loop with it
    # (and its span, and so the critical path, took that second in).
    script = """
import pickle, sys
from honeycomb import OfflineModel
from honeycomb.backends.ray import recipe
sent = recipe(OfflineModel(latency=0), {})
assert "openai" not in sys.modules, "imported"
assert isinstance(pickle.loads(sent), OfflineModel)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


async def test_a_models_rate_limiter_bounds_every_worker_wherever_it_runs(
    backend: RayBackend | None,
) -> None:
    # Each actor made the endpoint again with a limiter of its own (32 calls at once):
    # max_concurrency=1 let six workers on two actors call at once.
    from honeycomb import OpenAIModel
    from honeycomb.models import AdaptiveLimiter
    from tests.support.openai_server import OpenAIServer, error, text

    with OpenAIServer(text("done", delay_s=0.2)) as server:
        model = OpenAIModel("m", base_url=server.base_url, max_concurrency=1)
        ex = Executor([Role(name="r")], model, aggregator="concat", backend=backend)
        result = await ex.run("t", subtasks=[("r", f"task {i}") for i in range(6)])
        assert result.status == "ok"
        assert len(server.requests) == 6
        assert max(r.in_flight for r in server.requests) == 1
        # A 429 a worker met slows every worker down: the run's limiter learns of it.
        limiter = AdaptiveLimiter(4, cooldown_s=0.05)
        server.enqueue(error(429, retry_after=0.05))
        model = OpenAIModel("m", base_url=server.base_url, limiter=limiter)
        ex = Executor([Role(name="r")], model, aggregator="concat", backend=backend)
        result = await ex.run("t", subtasks=[("r", "one task")])
        assert result.status == "ok"
        assert limiter.limit == 2  # halved


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


async def _until(done: Any, within_s: float = 30.0) -> None:
    deadline = time.monotonic() + within_s
    while not done():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.02)


def test_a_driver_joins_a_two_process_cluster_by_address() -> None:
    """``ray start --head`` as a child process, on the loopback interface only and with
    token authentication; a driver process given only the token joins it at the address
    the head wrote and runs its workers there; the head is stopped by its pid."""
    token = secrets.token_hex(32)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env |= {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_TOKEN": token}
    ray_cli = Path(sys.executable).parent / "ray"
    # Ray's folder, short (its sockets' paths must fit) and the head's own: once it
    # serves, it writes its address there, at the port it chose (--port=0).
    folder = Path(tempfile.mkdtemp(prefix="ray-"))
    head = subprocess.Popen(
        [
            str(ray_cli), "start", "--head", "--block", "--port=0", f"--temp-dir={folder}",
            "--node-ip-address=127.0.0.1", "--num-cpus=1", "--include-dashboard=false",
            "--disable-usage-stats",
        ],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        # Ray's servers listen on the machine's address unless its clusters are "off" (a
        # head then binds 127.0.0.1; drivers on this machine still join it).
        env={**env, "RAY_AUTH_MODE": "token", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"},
    )  # fmt: skip
    try:
        address = _address_written(folder / "ray_current_cluster", head)
        driver = subprocess.run(
            [sys.executable, "-m", "tests.support.ray_driver", address],
            capture_output=True, text=True, timeout=90, env=env,
        )  # fmt: skip
        serving = listeners(psutil.Process(head.pid).children(recursive=True))
    finally:
        head.terminate()  # ray start --block stops what it started
        try:
            head.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        shutil.rmtree(folder, ignore_errors=True)
    assert address.startswith("127.0.0.1:"), address
    # The GCS and the raylet at least (not a check of nothing), none beyond loopback.
    assert len(serving) >= 2, serving
    assert wide(serving) == {}
    assert driver.returncode == 0, driver.stderr[-2000:]
    out = json.loads(driver.stdout.strip().splitlines()[-1])
    assert out["answers"] == ["a", "a"]
    assert len(out["pids"]) == 2
    assert os.getpid() not in out["pids"]


def _address_written(file: Path, head: subprocess.Popen[bytes]) -> str:
    """The address a head started with ``--temp-dir`` wrote in ``file``, once it has."""
    deadline = time.monotonic() + 60
    while not re.fullmatch(r"[\d.]+:\d+", address := _read(file)):
        assert head.poll() is None, f"the head ended with status {head.returncode}"
        assert time.monotonic() < deadline, "the head did not start"
        time.sleep(0.1)
    return address


def _read(file: Path) -> str:
    try:
        return file.read_text().strip()
    except FileNotFoundError:
        return ""


async def test_a_tool_given_as_an_object_runs_in_the_actor(ray_pool: RayBackend) -> None:
    """A tool given to the Executor as a Python object (a function of a test, not
    importable by path) is sent to the actors and made again there."""
    from honeycomb import tool

    @tool
    def where(text: str) -> str:
        """Say which process runs the call.

        Args:
            text: Anything.
        """
        return f"{text} {os.getpid()}"

    role = Role(name="q", tools=("where",))
    ex = Executor(
        [role], FunctionModel(scripted), tools=[where], aggregator="concat", backend=ray_pool
    )
    result = await ex.run("t", subtasks=[("q", script([("where", {"text": "in"})]))])
    actors = await ray_pool.pids()
    assert result.subtasks["s1"].worker is not None
    text, actor = result.subtasks["s1"].worker.text.split()
    assert (text, int(actor) in actors) == ("in", True)
    assert os.getpid() not in actors


async def test_a_closure_tool_with_postponed_annotations_runs_in_the_actor(
    ray_pool: RayBackend,
) -> None:
    """A tool made in a function goes by value; its signature's ``ToolContext``, a
    postponed annotation (this module's ``from __future__ import annotations``), is
    read where the tool was made, not in the actor, whose copy of the function holds
    only the globals its code uses."""

    def made() -> Tool[..., str]:
        async def stamp(text: str, context: ToolContext) -> str:
            """Stamp the text with the call's run.

            Args:
                text: Anything.
            """
            return f"{text} {context.run_id} {os.getpid()}"

        return Tool(stamp)

    ex = Executor(
        [Role(name="q", tools=("stamp",))], FunctionModel(scripted), tools=[made()],
        aggregator="concat", backend=ray_pool,
    )  # fmt: skip
    result = await ex.run("t", subtasks=[("q", script([("stamp", {"text": "in"})]))])
    actors = await ray_pool.pids()
    assert result.subtasks["s1"].worker is not None
    text, run, actor = result.subtasks["s1"].worker.text.split()
    assert (text, run, int(actor) in actors) == ("in", result.run_id, True)


def test_an_error_from_an_actor_comes_back_as_itself() -> None:
    from honeycomb.backends._wire import portable_error, raised
    from runtime import ToolDefinitionError

    again = raised(portable_error(ToolDefinitionError("stamp", "no type hint")))
    assert isinstance(again, ToolDefinitionError)
    assert (again.tool_name, again.reason) == ("stamp", "no type hint")


def test_a_budget_refusal_from_an_actor_says_what_its_turn_asked_for() -> None:
    from honeycomb.backends._wire import portable_error, raised

    again = raised(portable_error(BudgetExceeded("tool_calls", 7, 6, requested=2, running=6)))
    assert isinstance(again, BudgetExceeded)
    assert str(again) == (
        "budget exceeded: tool_calls used 6 of 7 allowed (6 in turns under way), "
        "and a turn asked for 2 more"
    )


async def test_a_tool_that_cannot_be_sent_fails_its_worker_alone(ray_session: None) -> None:
    import threading

    from honeycomb import tool

    held = threading.Lock()

    @tool
    def locked(text: str) -> str:
        """Hold a lock of this process (which cannot be pickled).

        Args:
            text: Anything.
        """
        with held:
            return text

    pool = RayBackend(actors=1, actor_cpus=0)
    try:
        role = Role(name="q", tools=("locked",))
        ex = Executor(
            [role, ROLE], FunctionModel(scripted), tools=[locked], aggregator="concat",
            backend=pool, policy=Policy(failure="best_effort"),
        )  # fmt: skip
        calls = script([("echo", {"text": "a", "delay": 0.0})])
        result = await ex.run("t", subtasks=[("q", calls), ("r", calls)])
    finally:
        pool.stop()
    failed, done = result.subtasks.values()
    assert failed.status == "failed"
    assert failed.error is not None
    assert failed.error.type == "ConfigError"
    assert "role 'q': tool 'locked' cannot be sent to Ray actors" in failed.error.message
    assert "import path" in failed.error.message
    assert done.ok


async def test_a_tool_the_actors_cannot_import_fails_its_worker_naming_its_role(
    ray_session: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool goes by its import path when a module holds it: a module the actors do
    not have (not installed on the nodes) is told as a ConfigError naming the role."""
    import types

    from honeycomb import tool

    module = types.ModuleType("tools_of_this_process_only")

    def nowhere(text: str) -> str:
        """Answer the text.

        Args:
            text: Anything.
        """
        return text

    nowhere.__module__, nowhere.__qualname__ = module.__name__, "nowhere"
    module.nowhere = tool(nowhere)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    pool = RayBackend(actors=1, actor_cpus=0)
    try:
        ex = Executor(
            [Role(name="q", tools=(f"{module.__name__}:nowhere",)), ROLE],
            FunctionModel(scripted), aggregator="concat", backend=pool,
            policy=Policy(failure="best_effort"),
        )  # fmt: skip
        calls = script([("echo", {"text": "a", "delay": 0.0})])
        result = await ex.run("t", subtasks=[("q", calls), ("r", calls)])
    finally:
        pool.stop()
    failed, done = result.subtasks.values()
    assert failed.error is not None
    assert failed.error.type == "ConfigError"
    assert failed.error.message.startswith(
        "role 'q' could not be set up in a Ray actor (ModuleNotFoundError: "
        "No module named 'tools_of_this_process_only')"
    )
    assert "RayBackend.imports_from(folder)" in failed.error.message  # what to do
    assert done.ok


class _Answers:
    """A model of a module only this process has (see the test below)."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(message=AssistantMessage(content="hi"))


async def test_a_model_the_actors_cannot_import_fails_its_workers_naming_it(
    ray_session: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model is pickled to the actors, its classes by their import path: a module they
    do not have is told naming the model, not as if the role's tools were missing."""
    import types

    module = types.ModuleType("models_of_this_process_only")
    monkeypatch.setattr(_Answers, "__module__", module.__name__)
    module._Answers = _Answers  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    pool = RayBackend(actors=1, actor_cpus=0)
    try:
        ex = Executor([Role(name="q")], _Answers(), aggregator="concat", backend=pool)
        with pytest.raises(RunFailed) as caught:
            await ex.run("t", subtasks=[("q", "hello")])
    finally:
        pool.stop()
    assert caught.value.partial is not None
    (failed,) = caught.value.partial.subtasks.values()
    assert failed.error is not None
    assert failed.error.type == "ConfigError"
    assert failed.error.message.startswith(
        "model models_of_this_process_only._Answers of role 'q' could not be made in a "
        "Ray actor (ModuleNotFoundError: No module named 'models_of_this_process_only')"
    )


# --- what is the run's, reached from the actors: memory, approvals, guards, pinned tools


async def test_memory_is_the_runs(backend: RayBackend | None, tmp_path: Path) -> None:
    from honeycomb import RoleMemory, SQLiteMemory

    memory = SQLiteMemory(tmp_path / "memory.db")
    role = Role(name="m", memory=RoleMemory(namespace="bees", recall=0))
    ex = Executor(
        [role], FunctionModel(scripted), memory=memory, aggregator="concat", backend=backend
    )
    await ex.run("t", subtasks=[("m", script([("remember", {"text": "queens lay eggs"})]))])
    (kept,) = await memory.list("bees")
    assert (kept.text, kept.worker, kept.role) == ("queens lay eggs", "s1", "m")
    result = await ex.run("t", subtasks=[("m", script([("recall", {"query": "queens"})]))])
    assert result.subtasks["s1"].worker is not None
    assert "queens lay eggs" in result.subtasks["s1"].worker.text


async def test_the_memorys_embeddings_spend_the_runs_budget(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    pytest.importorskip("sqlite_vec")
    from honeycomb import RoleMemory, SQLiteMemory
    from honeycomb.models import OpenAIEmbeddings, Price
    from honeycomb.trace.spans import SpanRecorder
    from tests.support.openai_server import OpenAIServer

    role = Role(name="m", memory=RoleMemory(namespace="bees", recall=0))
    note = "queens lay eggs all summer"
    with OpenAIServer() as server:
        price = Price(input_per_mtok=3.0, output_per_mtok=0.0)
        embeddings = OpenAIEmbeddings("e", base_url=server.base_url, api_key="k", price=price)
        memory = SQLiteMemory(tmp_path / "memory.db", embeddings=embeddings)
        ex = Executor(
            [role], FunctionModel(scripted), memory=memory, aggregator="concat", backend=backend
        )
        recorder = SpanRecorder()
        subtasks = [("m", script([("remember", {"text": note})]))]
        result = await ex.run("t", subtasks=subtasks, on_event=[recorder])
        await embeddings.endpoint.client.close()
    assert result.status == "ok"
    assert result.usage.cost == pytest.approx(5 * 3.0 / 1e6)  # its five words, at its price
    [root] = [s for s in recorder.spans if s.kind == "run"]  # its trace says so too
    assert (root.input_tokens, root.cost) == (
        result.usage.input_tokens,
        pytest.approx(result.usage.cost),
    )


async def test_a_call_needing_approval_goes_to_the_runs_approver(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    from honeycomb import ApprovalRequest, Decision

    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> Decision:
        asked.append(request)  # in this process: the approver is the run's
        return Decision.denied("not today")

    notes = tmp_path / "notes"
    role = Role(name="a", tools=(f"{TOOLS}:guarded_note",))
    ex = Executor(
        [role], FunctionModel(scripted), aggregator="concat", backend=backend, approver=approver
    )
    calls = script([("guarded_note", {"path": str(notes), "text": "hi"})])
    result = await ex.run("t", subtasks=[("a", calls)])
    (request,) = asked
    assert (request.worker, request.tool) == ("s1", "guarded_note")
    assert result.subtasks["s1"].worker is not None
    assert "not today" in result.subtasks["s1"].worker.text
    assert not notes.exists()


async def test_a_waiting_worker_is_decided_and_resumed(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    from tests.support.approvals import TASK, executor, payer_saw, plan

    db, effects = tmp_path / "runs.db", tmp_path / "effects.txt"
    first = executor(db, effects, backend=backend)
    waiting = await first.run(TASK, subtasks=plan(2), run_id="r1")
    assert waiting.status == "waiting"
    assert [p.call_id for p in await first.pending("r1")] == ["pay_1"]
    await first.decide("r1", "pay_1", approve=True)
    done = await executor(db, effects, backend=backend).resume("r1")
    assert done.status == "ok"
    assert payer_saw(done) == "payer saw: ok: paid 120 to ann"
    assert effects.read_text() == "paid 120 to ann\n"  # once


async def test_a_nested_workers_call_waits_for_approval_with_its_remote_caller(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    # On Ray, the pause crossed from the driver as a RemoteFailure: the caller's model
    # read it as the tool's error, the run ended ok, and the approved call never ran.
    # The lead's call passes its guard, whose verdict the journal keeps at the driver.
    notes, db = tmp_path / "notes", tmp_path / "runs.db"
    guards = Guards(arguments=("tests.support.guards:no_secrets",))
    lead = Role(name="lead", tools=("agent:a",), guards=guards)
    asker = Role(name="a", tools=(f"{TOOLS}:guarded_note",))

    def executor() -> Executor:
        return Executor(
            [lead, asker], FunctionModel(scripted), aggregator="concat", backend=backend,
            store=db,
        )  # fmt: skip

    inner = script([("guarded_note", {"path": str(notes), "text": "hi"})])
    calls = script([("a", {"instruction": inner})])
    waiting = await executor().run("t", subtasks=[("lead", calls)], run_id="n1")
    assert waiting.status == "waiting"
    (pending,) = waiting.pending
    assert (pending.tool, pending.call_id) == ("guarded_note", "c0_0")
    assert not notes.exists()
    await executor().decide("n1", "c0_0", approve=True, worker=pending.worker)
    done = await executor().resume("n1")
    assert done.status == "ok"
    assert done.subtasks["s1"].worker is not None
    assert done.subtasks["s1"].worker.text == "noted hi"
    assert notes.read_text() == "hi\n"  # once
    assert query(db, "SELECT status FROM journal WHERE worker = 's1'") == [("passed",)]


async def test_the_runs_argument_guards_check_remote_calls(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    ex = executor(backend, guards=Guards(arguments=("tests.support.guards:no_secrets",)))
    calls = script([("note", {"path": str(notes), "text": "the password is 1234"})])
    result = await ex.run("t", subtasks=[("r", calls)])
    assert result.subtasks["s1"].worker is not None
    assert "it mentions a password" in result.subtasks["s1"].worker.text
    assert not notes.exists()


async def test_an_agent_tool_runs_its_nested_worker_for_a_remote_caller(
    backend: RayBackend | None,
) -> None:
    """The call is made at the driver (the nested worker is the run's), and the nested
    worker runs where the run's workers run."""
    lead = Role(name="lead", tools=("agent:r", f"{TOOLS}:pid"))
    ex = Executor([lead, ROLE], FunctionModel(scripted), aggregator="concat", backend=backend)
    inner = script([("echo", {"text": "deep", "delay": 0.0}), ("pid", {})])
    calls = script([("r", {"instruction": inner}), ("pid", {})])
    result = await ex.run("t", subtasks=[("lead", calls)])
    assert result.subtasks["s1"].worker is not None
    deep, inner_pid, outer_pid = result.subtasks["s1"].worker.text.split("|")
    assert deep == "deep"
    if backend is None:
        assert int(inner_pid) == int(outer_pid) == os.getpid()
    else:
        assert os.getpid() not in (int(inner_pid), int(outer_pid))


async def test_an_agent_tool_under_a_tool_limit_of_one_holds_no_slot_its_worker_needs(
    backend: RayBackend | None,
) -> None:
    """The call waits for its nested worker, whose calls take the run's one slot (held
    at the driver for a remote worker): it takes none itself."""
    lead = Role(name="lead", tools=("agent:r", f"{TOOLS}:pid"))
    ex = Executor(
        [lead, ROLE], FunctionModel(scripted), aggregator="concat", backend=backend,
        policy=Policy(tool_concurrency=1),
    )  # fmt: skip
    inner = script([("echo", {"text": "deep", "delay": 0.0})])
    calls = script([("r", {"instruction": inner}), ("r", {"instruction": inner}), ("pid", {})])
    with anyio.fail_after(30):
        result = await ex.run("t", subtasks=[("lead", calls)])
    assert result.subtasks["s1"].worker is not None
    deep, deep_too, _ = result.subtasks["s1"].worker.text.split("|")
    assert deep == deep_too == "deep"


async def test_mcp_tools_are_called_through_the_runs_server(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    from tests.support.mcp_servers import sdk_server

    role = Role(name="q", tools=("t:lookup", "t:pid"))
    ex = Executor(
        [role], FunctionModel(scripted), aggregator="concat", backend=backend,
        mcp_servers=[sdk_server("t")],
    )  # fmt: skip
    async with ex:
        calls = script([("lookup", {"word": "bee"}), ("pid", {})])
        result = await ex.run("t", subtasks=[("q", calls)] * 2)
    texts = {s.worker.text for s in result.subtasks.values() if s.worker is not None}
    (text,) = texts  # one server for the run: the same process answered both
    looked_up, pid = text.split("|")
    assert looked_up == "an insect that makes honey"
    assert int(pid) != os.getpid()


async def test_a_judge_role_checks_a_remote_answer_at_the_driver(
    backend: RayBackend | None,
) -> None:
    judged: list[int] = []

    def answer(request: ModelRequest) -> str:
        if "You are a guard" in (request.messages[0].content or ""):
            judged.append(os.getpid())  # seen here only when the judge asks from here
            return "PASS"
        return "an answer"

    roles = [Role(name="w", guards=Guards(output=("reviewer",))), Role(name="reviewer")]
    ex = Executor(roles, FunctionModel(answer), aggregator="concat", backend=backend)
    result = await ex.run("t", subtasks=[("w", "a")])
    assert result.status == "ok"
    assert judged == [os.getpid()]
    assert result.usage.model_calls == 2  # the answer and the verdict, in the run's usage


async def test_a_pinned_tools_value_that_cannot_be_sent_reaches_its_worker_as_text(
    ray_session: None,
) -> None:
    """A pinned tool (called at the driver) that returns what cannot be pickled: its
    worker is shown the text of it, as in one process; the worker and the other
    workers on the actor go on."""
    import threading

    from honeycomb import Tool

    def lock() -> object:
        """A lock of the driver's process."""
        return threading.Lock()

    pool = RayBackend(actors=1, actor_cpus=0)
    try:
        role = Role(name="q", tools=("lock", f"{TOOLS}:echo"))
        ex = Executor(
            [role], FunctionModel(scripted), tools=[Tool(lock, pinned=True)],
            aggregator="concat", backend=pool,
        )  # fmt: skip
        result = await ex.run(
            "t",
            subtasks=[
                ("q", script([("lock", {})], [("echo", {"text": "after", "delay": 0.0})])),
                ("q", script([("echo", {"text": "other", "delay": 0.1})])),
            ],
        )
    finally:
        pool.stop()
    first, other = (s.worker for s in result.subtasks.values())
    assert first is not None
    assert other is not None
    shown, after = first.text.split("|")
    assert shown.startswith('"<unlocked _thread.lock object at ')  # as render shows it
    assert after == "after"
    assert other.text == "other"


async def test_a_run_whose_driver_was_killed_resumes(ray_pool: RayBackend, tmp_path: Path) -> None:
    """The driver (with its private Ray) killed mid-run: ``resume`` continues the run
    from the store, here on Ray, and the side effect it had made is not made again."""
    from tests.support.ray_driver import lost_run

    db, notes, waits = (str(tmp_path / name) for name in ("runs.db", "notes", "waits"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    driver = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.support.ray_driver", "--stored", db, notes, waits,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        env={**env, "RAY_USAGE_STATS_ENABLED": "0"},
    )  # fmt: skip
    try:
        await _until(lambda: "waiting" in _text(Path(waits)), within_s=90)
    finally:
        os.killpg(driver.pid, signal.SIGKILL)  # the driver and the Ray it started
        await driver.wait()
    result = await lost_run(db, notes, waits, ray_pool).resume("lost")
    worker = result.subtasks["s1"].worker
    assert worker is not None
    assert worker.text == "noted once|waited again"  # on from its last checkpoint
    assert _text(Path(notes)) == "once\n"  # the side effect ran once


async def test_an_actor_s_process_takes_the_switch_interval_it_is_given(
    ray_pool: RayBackend,
) -> None:
    """Sync tools run in an actor's threads: CPU-bound ones hand the GIL over less
    often at the backend's interval than at Python's 5 ms (docs/ray.md, Figures)."""
    python_s = RayBackend(actors=1, actor_cpus=0, switch_interval_s=None)
    try:
        await ray_pool.start()  # the backend's default
        await python_s.start()
        assert ray_pool._pool is not None
        assert python_s._pool is not None
        assert await ray_pool._pool[0].handle.switch_interval.remote() == pytest.approx(0.05)
        assert await python_s._pool[0].handle.switch_interval.remote() == pytest.approx(0.005)
    finally:
        python_s.stop()
    with pytest.raises(ConfigError, match="switch_interval_s must be positive"):
        RayBackend(switch_interval_s=0)


async def test_a_cancelled_run_counts_what_its_remote_workers_spent(
    ray_pool: RayBackend, tmp_path: Path
) -> None:
    # The run is cancelled while an actor's model answers (its process busy, the
    # cancellation waiting there): what the answer cost reaches the driver before the
    # run is recorded as interrupted, and counts.
    block, db = tmp_path / "block", tmp_path / "runs.db"
    calls = [["echo", {"text": "a", "delay": 0.0}]]
    task = json.dumps({"turns": [calls], "log": None, "block": str(block)})
    running = asyncio.create_task(
        executor(ray_pool, store=db).run("t", subtasks=[("r", task)], run_id="c1")
    )
    await _until(lambda: "answering" in _text(block))
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    await _until(lambda: "answered" in _text(block))
    kept = RunStore(db).find("c1")
    assert kept is not None
    assert (kept.status, kept.model_calls) == ("interrupted", 1)
    assert kept.input_tokens > 0  # the answer's usage, sent as it was made
