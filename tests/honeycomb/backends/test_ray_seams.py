"""Where workers on Ray meet the run's other features: the same run on both backends
(``backend``: the local one, and two actors of the session's Ray) gives the same
events, the same errors and the same masks."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from honeycomb import (
    BudgetExceeded,
    Budgets,
    ConfigError,
    Event,
    Executor,
    ModelRequest,
    ModelResponse,
    Policy,
    Role,
    RunFailed,
    add_secret,
)
from honeycomb.backends import RayBackend
from honeycomb.backends import _driver as driver
from honeycomb.backends import ray as ray_backend
from honeycomb.backends._setup import SetupFailed
from honeycomb.errors import ModelHTTPError
from honeycomb.events import TextDelta, WorkerFinished, WorkerStarted
from honeycomb.testing import FunctionModel
from runtime import (
    AdaptiveLimiter,
    AssistantMessage,
    RateLimitedModel,
    RetryingModel,
    RetryPolicy,
    UserMessage,
)
from runtime.model import TextSink
from runtime.secrets import isolated, masked
from tests.support.ray_tools import scripted

pytest.importorskip("ray")

# One test process for every test that uses Ray (``ray_session``, tests/conftest.py).
pytestmark = pytest.mark.xdist_group("ray")

SECRET = "hunter2-but-longer"
TOOLS = "tests.support.ray_tools"


class Pieces:
    """Streams its answer in the pieces given, then (``hang``) waits for ever, or
    (``fail``) fails; its one-shot answer is the pieces joined."""

    def __init__(self, *pieces: str, hang: bool = False, fail: bool = False) -> None:
        self.pieces = pieces
        self.hang = hang
        self.fail = fail

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self.hang:
            await asyncio.Event().wait()
        return ModelResponse(message=AssistantMessage(content="".join(self.pieces)))

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        for piece in self.pieces:
            on_text(piece)
            await asyncio.sleep(0)
        if self.fail:
            raise ModelHTTPError(400, body="refused mid-answer")
        return await self.complete(request)


async def test_a_secret_split_across_a_remote_workers_deltas_reaches_no_listener(
    backend: RayBackend | None,
) -> None:
    # The actor knows none of the driver's secrets, and the driver masked each delta
    # alone: "Connected with hunter2-" and "but-longer." hold no secret each, and the
    # stream showed it whole on Ray.
    model = Pieces("Connected with hunter2-", "but-longer.", " Done.")
    ex = Executor([Role(name="w")], model, aggregator="concat", backend=backend)
    with isolated():
        add_secret(SECRET, "password")
        async with ex.stream("t", subtasks=[("w", "connect")]) as events:
            deltas = [e async for e in events if isinstance(e, TextDelta) and e.worker == "s1"]
    text = "".join(d.text for d in deltas)
    assert text == "Connected with [password hidden]. Done."
    assert all(d.turn == 1 for d in deltas)
    assert events.result.subtasks["s1"].text == text


async def test_the_start_of_a_secret_a_failed_remote_call_held_back_is_never_shown(
    backend: RayBackend | None,
) -> None:
    # What could begin a secret waits for the next delta; a call that fails then
    # never shows it (in one process its held text is dropped). The driver showed it.
    model = Pieces("Connected with ", "hunter2-but", fail=True)
    ex = Executor(
        [Role(name="w")], model, aggregator="concat", backend=backend,
        policy=Policy(failure="best_effort"),
    )  # fmt: skip
    with isolated():
        add_secret(SECRET, "password")
        deltas: list[str] = []
        with pytest.raises(RunFailed):  # its workers both failed
            await _deltas(ex, [("w", "connect"), ("w", "connect")], deltas)
    assert deltas
    assert "".join(deltas) == "Connected with " * len(deltas)


async def test_the_start_of_a_secret_a_killed_actors_worker_held_back_is_never_shown(
    ray_session: None,
) -> None:
    """A worker's actor dies as its answer streams: what it held back, as it may begin a
    secret, goes as a failed attempt's does, nowhere. It was shown as the worker's
    stream ended: half the password."""
    pool = RayBackend(actors=1, actor_cpus=0)
    ex = Executor(
        [Role(name="w")], Pieces("Connected with hunter2-", hang=True), aggregator="concat",
        backend=pool,
    )  # fmt: skip
    deltas: list[str] = []

    async def watch() -> None:  # its deltas; the actor killed at the first
        async with ex.stream("t", subtasks=[("w", "connect")]) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    deltas.append(event.text)
                    if len(deltas) == 1:  # as the call hangs, mid-answer
                        (pid,) = await pool.pids()
                        os.kill(pid, signal.SIGKILL)

    try:
        with isolated(), anyio.fail_after(60):
            add_secret(SECRET, "password")
            with pytest.raises(RunFailed) as caught:
                await watch()
    finally:
        pool.stop()
    assert caught.value.partial is not None
    error = caught.value.partial.subtasks["s1"].error
    assert error is not None
    assert error.type == "WorkerLost"  # lost with its actor: the run has no store
    assert "".join(deltas) == "Connected with "


@pytest.mark.parametrize("stop_wait_s", [driver.STOP_WAIT_S, 0.0])
async def test_the_start_of_a_secret_a_cut_off_remote_call_held_back_is_never_shown(
    backend: RayBackend | None, monkeypatch: pytest.MonkeyPatch, stop_wait_s: float
) -> None:
    # A wall time that cuts a call off as it streams: in one process the text it held
    # back, as it may begin a secret, is dropped with the call; from an actor, the
    # driver showed it as the call said it was cut off (or, not waiting for that, as
    # the cancelled worker's stream ended): half the password.
    monkeypatch.setattr(driver, "STOP_WAIT_S", stop_wait_s)
    model = Pieces("Connected with hunter2-", hang=True)
    ex = Executor(
        [Role(name="w")], model, aggregator="concat", backend=backend,
        policy=Policy(budgets=Budgets(wall_time_s=await _room(backend))),
    )  # fmt: skip
    deltas: list[str] = []
    with isolated(), anyio.fail_after(60):
        add_secret(SECRET, "password")
        with pytest.raises(BudgetExceeded):
            await _deltas(ex, [("w", "connect")], deltas)
    assert "".join(deltas) == "Connected with "


async def _room(backend: RayBackend | None) -> float:
    """A wall time that leaves the calls room to stream their pieces on a busy machine
    before it cuts them off; on Ray, once the pool's actors have started (at 1.5 s with
    their start in it, one CI run found neither call under way yet), room for the
    role and the model to be installed in them too."""
    if backend is None:
        return 2.0
    await backend.start()
    return 3.0


async def _deltas(ex: Executor, subtasks: list[tuple[str, str]], into: list[str]) -> None:
    """The run's text deltas, into ``into`` as they come."""
    async with ex.stream("t", subtasks=subtasks) as events:
        async for event in events:
            if isinstance(event, TextDelta):
                into.append(event.text)


async def test_without_secrets_a_remote_workers_deltas_come_as_written(
    backend: RayBackend | None,
) -> None:
    model = Pieces("one ", "two ", "three")
    ex = Executor([Role(name="w")], model, aggregator="concat", backend=backend)
    with isolated():
        async with ex.stream("t", subtasks=[("w", "count")]) as events:
            deltas = [e.text async for e in events if isinstance(e, TextDelta) and e.worker == "s1"]
    assert deltas == ["one ", "two ", "three"]


async def test_a_wall_time_budget_names_the_remote_calls_it_cut_off(
    backend: RayBackend | None,
) -> None:
    # On Ray the calls were in flight in the actors only: BudgetExceeded said none.
    model = Pieces("a ", "b ", "c", hang=True)
    ex = Executor(
        [Role(name="w")], model, aggregator="concat", backend=backend,
        policy=Policy(budgets=Budgets(wall_time_s=await _room(backend))),
    )  # fmt: skip
    with anyio.fail_after(30), pytest.raises(BudgetExceeded) as caught:
        await ex.run(
            "t",
            subtasks=[("w", "x"), ("w", "y")],
            on_event=[lambda event: None],
            text_deltas=True,
        )
    cut = caught.value
    assert cut.limit == "wall_time_s"
    assert sorted((c.who, c.kind, c.turn, c.streamed) for c in cut.in_flight) == [
        ("s1", "turn", 1, 3),
        ("s2", "turn", 1, 3),
    ]
    assert "cut off in flight: s" in str(cut)


PATIENT = RetryPolicy(attempts=4, deadline_s=10.0, initial_wait_s=0.01, jitter_s=0)
LONG = 60.0
"""What the endpoint tells B to wait: far past the retry deadline, and the test's patience."""


class Throttling:
    """An endpoint two calls share, through one rate limiter: A's first attempt begins
    (``a_began``), then B is told to wait ``LONG`` s; once the limiter has that
    cool-down (``cooled``), A is told to wait 0.1 s, and its retry meets it."""

    def __init__(self, a_began: Path, cooled: Path) -> None:
        self.a_began, self.cooled = a_began, cooled

    async def __call__(self, request: ModelRequest) -> ModelResponse:
        task = next(m for m in request.messages if isinstance(m, UserMessage)).content
        if task.startswith("B"):
            await _until(self.a_began.exists)
            raise ModelHTTPError(429, "slow down", retry_after=LONG)
        self.a_began.touch()
        await _until(self.cooled.exists)
        raise ModelHTTPError(429, "slow down, A", retry_after=0.1)


async def _until(done: Callable[[], bool]) -> None:
    while True:
        if done():
            return
        await asyncio.sleep(0.01)


async def test_a_remote_retry_is_held_by_the_drivers_limiter_no_longer_than_its_deadline(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    """A cool-down another call's 429 set gives a retry that cannot wait it out up at
    once (``RetryAfterPastDeadline``), as in one process. The limiter at the driver did
    not know the retry deadline of an attempt in an actor: the retry sat out the whole
    cool-down there, far past its deadline."""
    limiter = AdaptiveLimiter(4)
    a_began, cooled = tmp_path / "a_began", tmp_path / "cooled"
    endpoint = RateLimitedModel(FunctionModel(Throttling(a_began, cooled)), limiter)
    ex = Executor(
        [Role(name="w")], RetryingModel(endpoint, PATIENT), aggregator="concat", backend=backend
    )

    async def watch() -> None:  # the cool-down is there: A's answer may come
        await _until(lambda: limiter.cooldown_left_s > 0)
        cooled.touch()

    async def run() -> RunFailed:
        with pytest.raises(RunFailed) as caught:  # both its workers failed
            await ex.run("t", subtasks=[("w", "A"), ("w", "B")])
        return caught.value

    with anyio.fail_after(LONG / 3):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(watch)
            failed = await run()
    assert failed.partial is not None
    a, b = (failed.partial.subtasks[s].error for s in ("s1", "s2"))
    assert a is not None
    assert b is not None
    assert (a.type, b.type) == ("RetryAfterPastDeadline", "RetryAfterPastDeadline")
    assert a.message.startswith(
        "gave up after 1 attempt: the rate limiter's cool-down for a 429's Retry-After "
        "asked to wait"
    )
    assert a.message.endswith("HTTP 429: slow down")  # B's 429, which set it
    assert "the endpoint's Retry-After asked to wait 60s" in b.message


def limited_or_done(request: ModelRequest) -> str:
    task = request.messages[-1].content
    if task == "limited":
        raise ModelHTTPError(429, "slow down", retry_after=60)
    return f"done: {task}"


async def test_a_remote_retry_ends_where_the_runs_wall_time_does(
    backend: RayBackend | None,
) -> None:
    """A Retry-After of 60 s, within the retry policy's 90 s but past the run's 20 s of
    wall time, fails the call at once, in an actor as in one process (where the actor
    did not know the run's wall time, its worker sat the wait out until the wall time
    stopped the whole run)."""
    patient = RetryPolicy(attempts=3, deadline_s=90.0, initial_wait_s=0.01, jitter_s=0)
    ex = Executor(
        [Role(name="w")], RetryingModel(FunctionModel(limited_or_done), patient),
        aggregator="concat", backend=backend, policy=Policy(budgets=Budgets(wall_time_s=20)),
    )  # fmt: skip
    with anyio.fail_after(LONG / 3):
        result = await ex.run("t", subtasks=[("w", "limited"), ("w", "fine")])
    assert result.status == "partial"
    assert result.subtasks["s2"].text == "done: fine"
    error = result.subtasks["s1"].error
    assert error is not None
    assert error.type == "RetryAfterPastDeadline"
    assert "the endpoint's Retry-After asked to wait 60s" in error.message
    assert "s of the run's wall time left" in error.message


async def test_a_cancelled_run_does_not_wait_out_its_remote_workers(
    ray_pool: RayBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The driver waited for a cancelled worker to say it stopped *and* to send its
    # result, which a cancelled worker never sends: every cancelled run (a wall time
    # run out, a fail-fast failure, run() cancelled) waited out STOP_WAIT_S.
    monkeypatch.setattr(driver, "STOP_WAIT_S", 120.0)
    started: list[Any] = []
    both = asyncio.Event()

    def heard(event: Any) -> None:
        if event.kind == "model_call.started":
            started.append(event)
            if len(started) == 2:  # both calls are under way in the actors
                both.set()

    ex = Executor([Role(name="w")], Pieces("x", hang=True), aggregator="concat", backend=ray_pool)
    running = asyncio.create_task(ex.run("t", subtasks=[("w", "a"), ("w", "b")], on_event=[heard]))
    with anyio.fail_after(60):
        await both.wait()
    running.cancel()
    ended, _ = await asyncio.wait({running}, timeout=30)
    assert ended == {running}, "the cancelled run waited out its remote workers"
    assert running.cancelled()


def holding_up(request: ModelRequest) -> str:
    """Answers ``hold FILE`` after holding its process's event loop up for 2 s (a
    model of blocking code), saying so in FILE first; anything else at once."""
    task = next(m for m in request.messages if isinstance(m, UserMessage)).content or ""
    if task.startswith("hold "):
        Path(task.split()[1]).write_text("holding")
        time.sleep(2.0)  # blocking: what the driver delivers to the actor meanwhile waits
    return "done"


async def test_a_worker_cancelled_as_it_is_sent_says_so_and_its_run_ends_at_once(
    ray_session: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A worker's start waits behind a delivery to its actor, and its run is cancelled
    meanwhile: its start and its cancellation reach the actor in one batch, and it is
    cancelled before it begins. It then never said it stopped (only a worker that had
    begun did), and the cancelled run waited out STOP_WAIT_S for it."""
    monkeypatch.setattr(driver, "STOP_WAIT_S", 120.0)
    pool = RayBackend(actors=1, actor_cpus=0)
    ex = Executor([Role(name="w")], FunctionModel(holding_up), aggregator="concat", backend=pool)
    held = tmp_path / "held"
    started: dict[str, asyncio.Event] = {"second": asyncio.Event(), "third": asyncio.Event()}

    def run(name: str) -> asyncio.Task[Any]:
        def heard(event: Any) -> None:
            if event.kind == "worker.started":
                started[name].set()

        return asyncio.create_task(ex.run("t", subtasks=[("w", name)], on_event=[heard]))

    try:
        await ex.run("t", subtasks=[("w", "ready")])  # its setup and model installed
        holder = asyncio.create_task(ex.run("t", subtasks=[("w", f"hold {held}")]))
        await _until(held.exists)  # the actor's event loop is held up: deliveries wait
        second = run("second")  # its start is delivered, and waits
        await started["second"].wait()
        third = run("third")  # its start waits behind the second's delivery ...
        await started["third"].wait()
        third.cancel()  # ... and its cancellation joins it there
        ended, _ = await asyncio.wait({third}, timeout=30)
        assert ended == {third}, "the cancelled run waited out its worker that never began"
        assert third.cancelled()
        assert (await second).status == "ok"
        assert (await holder).status == "ok"
    finally:
        pool.stop()


def test_an_install_cut_off_with_its_event_loop_is_made_again_in_the_next(
    ray_session: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The install of a role in an actor is shared by every later worker: one cut off
    # as its asyncio.run ended (a run cancelled as it started) stayed a cancelled
    # future, and every later run's worker of the role failed with "Cancelled".
    pool = RayBackend(actors=1, actor_cpus=0)
    ex = Executor([Role(name="w")], Pieces("done"), aggregator="concat", backend=pool)
    made = ray_backend.installed

    async def cut_off() -> None:
        installing = asyncio.Event()

        async def stuck(ref: Any) -> None:
            installing.set()
            await asyncio.Event().wait()  # until its loop ends

        monkeypatch.setattr(ray_backend, "installed", stuck)
        running = asyncio.create_task(ex.run("t", subtasks=[("w", "a")]))
        with anyio.fail_after(60):
            await installing.wait()
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running

    try:
        asyncio.run(cut_off())
        monkeypatch.setattr(ray_backend, "installed", made)
        result = asyncio.run(asyncio.wait_for(ex.run("t", subtasks=[("w", "b")]), 60))
    finally:
        pool.stop()
    assert result.subtasks["s1"].text == "done"


async def test_an_install_that_fails_once_its_run_was_cancelled_is_not_told_as_unseen(
    ray_session: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C as a worker's model was installed: the install, shared and shielded, went
    # on; as the command stopped its actors it failed (ActorDiedError) with no worker
    # waiting for it, and asyncio printed "Task exception was never retrieved" and
    # Ray's traceback under the command's last line.
    pool = RayBackend(actors=1, actor_cpus=0)
    ex = Executor([Role(name="w")], Pieces("done"), aggregator="concat", backend=pool)
    installing, fail = asyncio.Event(), asyncio.Event()

    async def failing(ref: Any) -> None:
        installing.set()
        await fail.wait()
        raise SetupFailed("its actor died")

    loop = asyncio.get_running_loop()
    told: list[str] = []
    loop.set_exception_handler(lambda _, context: told.append(context["message"]))
    monkeypatch.setattr(ray_backend, "installed", failing)
    try:
        running = asyncio.create_task(ex.run("t", subtasks=[("w", "a")]))
        with anyio.fail_after(60):
            await installing.wait()
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        assert pool._pool is not None
        installs = pool._pool[0].installing
        fail.set()
        await asyncio.wait(list(installs.values()))
        installs.clear()  # the last reference to the failed install
        del running
        gc.collect()
    finally:
        loop.set_exception_handler(None)
        pool.stop()
    assert told == []


def test_a_tools_system_exit_stops_the_run_and_spares_the_actor(
    backend: RayBackend | None,
) -> None:
    # In one process a tool's SystemExit stops the run (asyncio.run raises it). In an
    # actor it ended the event loop every worker of the actor ran on: the run never
    # ended, and each later worker sent there failed, "could not be set up in a Ray
    # actor (RuntimeError: Event loop is closed)".
    from honeycomb import tool

    @tool
    async def leave(code: int) -> str:
        """Stop the program.

        Args:
            code: Its exit status.
        """
        raise SystemExit(code)

    role = Role(name="q", tools=("leave", "tests.support.ray_tools:echo"))
    ex = Executor(
        [role], FunctionModel(scripted), tools=[leave], aggregator="concat", backend=backend
    )

    def run(*calls: tuple[str, dict[str, Any]]) -> Any:
        task = json.dumps({"turns": [list(calls)], "log": None})
        return asyncio.run(asyncio.wait_for(ex.run("t", subtasks=[("q", task)]), 30))

    with pytest.raises(SystemExit) as caught:
        run(("leave", {"code": 3}))
    assert caught.value.code == 3
    after = run(("echo", {"text": "after", "delay": 0.0}))
    assert after.subtasks["s1"].text == "after"


async def test_actor_options_ray_refuses_are_a_config_error_naming_the_backend(
    ray_session: None,
) -> None:
    # Ray's own ValueError or TypeError came out of run() as it was ("/nowhere is not
    # a valid path."), naming neither the backend nor its runtime_env, and a value of
    # env_vars (a secret) with it.
    for env, said in (
        ({"working_dir": "/nowhere/at/all"}, "/nowhere/at/all is not a valid path"),
        ({"env_vars": {"KEY": ["sk-not-text-12345"]}}, "[runtime_env env_vars value hidden]"),
    ):
        pool = RayBackend(actors=1, actor_cpus=0, runtime_env=env)
        ex = Executor([Role(name="w")], Pieces("x"), aggregator="concat", backend=pool)
        try:
            with pytest.raises(ConfigError) as caught:
                await ex.run("t", subtasks=[("w", "a")])
        finally:
            pool.stop()
        told = str(caught.value)
        assert told.startswith("RayBackend(address='local', actors=1): Ray refused the actors'")
        assert said in told
        assert "runtime_env" in told
        assert "sk-not-text" not in told


def test_the_values_of_a_backends_env_vars_are_secrets_while_it_lives() -> None:
    # A tool in an actor that quoted one (a token it read from its environment, in its
    # error) showed it in the worker's answer, the result, its span and the store;
    # a hive's env_vars, and an MCP server's env, were masked.
    with isolated():
        env = {"SERVICE_TOKEN": "tok-5ecret-abcdef", "PYTHONPATH": "/srv/app/tools"}
        pool = RayBackend(actors=1, runtime_env={"env_vars": env})
        said = "401 for token tok-5ecret-abcdef, tools in /srv/app/tools"
        assert masked(said) == "401 for token [secret hidden], tools in /srv/app/tools"
        del pool
        gc.collect()
        assert masked(said) == said  # forgotten with the backend


async def test_a_nested_worker_on_ray_is_told_started_once_its_role_is_installed(
    ray_pool: RayBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An agent tool's worker was told started (worker.started) as its call began, before
    # its role was installed in the actor: its span and its time took the install in.
    order: list[tuple[str, str]] = []
    install = RayBackend._install

    async def noted(
        self: RayBackend, actor: Any, key: str, method: str, *args: Any, **kw: Any
    ) -> None:
        await install(self, actor, key, method, *args, **kw)
        if method == "install_setup":
            order.append(("installed", args[0].name))

    def heard(event: Event) -> None:
        if isinstance(event, WorkerStarted | WorkerFinished):
            order.append((event.kind, event.role))

    monkeypatch.setattr(RayBackend, "_install", noted)
    roles = [Role(name="lead", tools=("agent:r",)), Role(name="r", tools=(f"{TOOLS}:echo",))]
    ex = Executor(roles, FunctionModel(scripted), aggregator="concat", backend=ray_pool)
    inner = json.dumps({"turns": [[["echo", {"text": "deep", "delay": 0}]]]})
    calls = json.dumps({"turns": [[["r", {"instruction": inner}]]]})
    result = await ex.run("t", subtasks=[("lead", calls)], on_event=[heard])
    assert result.subtasks["s1"].text == "deep"
    assert order == [
        ("installed", "lead"),
        ("worker.started", "lead"),
        ("installed", "r"),
        ("worker.started", "r"),
        ("worker.finished", "r"),
        ("worker.finished", "lead"),
    ]


async def test_a_workers_time_limit_leaves_out_what_is_made_to_send_it(
    ray_pool: RayBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the backend made before a worker began, outside its wait for the pool (Ray's
    # first import, half a second; its model pickled), counted in its worker_timeout_s:
    # the first worker of a process under a limit of a second was cut off 0.3 s after
    # it began.
    made = ray_backend.recipe

    def slow(model: Any, held: dict[str, Any]) -> bytes:
        time.sleep(1.2)  # a model that takes a while to pickle, as a first import does
        return made(model, held)

    monkeypatch.setattr(ray_backend, "recipe", slow)
    ex = Executor(
        [Role(name="w")], Pieces("done"), aggregator="concat", backend=ray_pool,
        policy=Policy(worker_timeout_s=1.0),
    )  # fmt: skip
    result = await ex.run("t", subtasks=[("w", "a")])
    assert result.subtasks["s1"].error is None
    assert result.subtasks["s1"].text == "done"


async def test_a_stored_runs_worker_whose_pool_is_stopped_under_it_goes_on_in_a_new_one(
    ray_session: None, tmp_path: Path
) -> None:
    # Its actor killed by stop(), it was to go on in another from its last checkpoint,
    # and found no pool: the run failed with a bare AssertionError. A worker started
    # after stop() makes a new pool; one that goes on does too. One with no store is
    # lost, and told so: its actor "died unexpectedly", Ray said, as if it crashed.
    pool = RayBackend(actors=1, actor_cpus=0)
    role = Role(name="r", tools=(f"{TOOLS}:echo",))

    stopped: list[Event] = []

    def stop_as_its_tool_runs(event: Event) -> None:
        if event.kind == "tool_call.started" and not stopped:
            stopped.append(event)
            pool.stop()

    ex = Executor(
        [role], FunctionModel(scripted), aggregator="concat", backend=pool,
        store=tmp_path / "runs.db",
    )  # fmt: skip
    unkept = Executor([role], FunctionModel(scripted), aggregator="concat", backend=pool)
    calls = json.dumps({"turns": [[["echo", {"text": "done", "delay": 0.5}]]]})
    try:
        result = await ex.run("t", subtasks=[("r", calls)], on_event=[stop_as_its_tool_runs])
        stopped.clear()
        with pytest.raises(RunFailed) as caught:
            await unkept.run("t", subtasks=[("r", calls)], on_event=[stop_as_its_tool_runs])
    finally:
        pool.stop()
    assert result.status == "ok"
    assert result.subtasks["s1"].text == "done"
    assert (
        "worker 's1' was lost with its Ray actor, while it ran tool 'echo' (its pool was "
        "stopped (RayBackend.stop()) as it ran)"
    ) in str(caught.value)


def test_runs_of_two_event_loops_start_one_pool_together(ray_session: None) -> None:
    # Two threads of a service, each with its event loop, ran the first workers of a
    # pool at once: the one that waited for the other's start of the pool waited on
    # an asyncio lock of its own loop, woken from the other's thread: it hung.
    pool = RayBackend(actors=1, actor_cpus=0)  # one pool, an Executor a thread
    together = threading.Barrier(2)
    texts: list[str] = []

    def serve() -> None:
        ex = Executor([Role(name="w")], Pieces("done"), aggregator="concat", backend=pool)
        together.wait()
        texts.append(asyncio.run(ex.run("t", subtasks=[("w", "a")])).subtasks["s1"].text)

    threads = [threading.Thread(target=serve, daemon=True) for _ in range(2)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        pool.stop()
    assert texts == ["done", "done"]
