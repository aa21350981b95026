"""Tool dispatch, one semantic per test (see DESIGN.md, "Semantics that must hold").

Timing claims are ratios against the test's own latency ``L``, with generous bounds;
concurrency claims are also checked with a counter of calls in flight.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import itertools
import sys
import threading
import time
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest
import structlog
from structlog.testing import capture_logs

from runtime.errors import ModelRetry
from runtime.events import Event, ToolCallFinished, ToolCallStarted, Tracer
from runtime.messages import ToolCall, ToolMessage
from runtime.testing import call
from runtime.tools import Tool, ToolContext, ToolRegistry, idempotency_key, tool
from runtime.tools.approvals import ApprovalNeeded, PendingApproval
from runtime.tools.dispatch import Dispatcher, DispatchPolicy, LockTable, check_cancelled
from runtime.tools.journal import MemoryJournal
from tests.support.concurrency import MEET_LIMIT_S, Rendezvous
from tests.support.dispatching import layered

L = 0.2  # the latency of a slow tool call, in seconds


class Probe:
    """Counts calls in flight (peak) and records when each call starts and ends.

    Thread-safe, so sync tools running in worker threads can use it too.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.active = 0
        self.peak = 0
        self.started: list[str] = []
        self.finished: list[str] = []
        self.spans: dict[str, tuple[float, float]] = {}

    @contextmanager
    def track(self, label: str) -> Iterator[None]:
        with self._lock:
            start = time.perf_counter()
            self.started.append(label)
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            yield
        finally:
            with self._lock:
                self.active -= 1
                self.finished.append(label)
                self.spans[label] = (start, time.perf_counter())

    def assert_no_overlap(self, labels: list[str]) -> None:
        assert set(labels) <= set(self.spans), f"still running: {set(labels) - set(self.spans)}"
        spans = sorted(self.spans[label] for label in labels)
        for (_, end), (next_start, _) in itertools.pairwise(spans):
            assert end <= next_start, f"calls overlapped: {spans}"


def calls(name: str, *labels: str) -> list[ToolCall]:
    """One call of ``name`` per label; the label is the call id and the argument."""
    return [call(name, {"label": label}, id=label) for label in labels]


def dispatcher(*tools: Tool[Any, Any], **options: Any) -> Dispatcher:
    return layered(ToolRegistry(tools), **options)


async def signalled(event: threading.Event) -> bool:
    """Whether ``event`` is set within the rendezvous limit (waited for in a thread, so
    the loop goes on meanwhile)."""
    return await anyio.to_thread.run_sync(event.wait, MEET_LIMIT_S, abandon_on_cancel=True)


def sleeper(
    probe: Probe, latency: float = L, meet: Rendezvous | None = None, **options: Any
) -> Tool[Any, Any]:
    """An async tool that sleeps ``latency`` seconds and returns its label; with
    ``meet``, it first waits for ``meet.n`` calls to be in at once."""

    @tool(**options)
    async def nap(label: str) -> str:
        with probe.track(label):
            if meet is not None:
                await meet.meet()
            await anyio.sleep(latency)
        return label

    return nap


def assert_in_call_order(results: tuple[ToolMessage, ...], batch: list[ToolCall]) -> None:
    assert [r.tool_call_id for r in results] == [c.id for c in batch]
    assert [r.name for r in results] == [c.name for c in batch]


# --- parallel-safe calls ------------------------------------------------------------


async def test_parallel_safe_calls_overlap() -> None:
    probe = Probe()
    d = dispatcher(sleeper(probe, meet=Rendezvous(8)))  # all eight at once, or it fails
    batch = calls("nap", *"abcdefgh")

    results = await d.dispatch(batch)

    assert [r.status for r in results] == ["ok"] * 8, [r.content for r in results]
    assert probe.peak == 8


async def test_per_worker_cap_bounds_calls_in_flight() -> None:
    probe = Probe()
    # Three rounds of two: each call goes on only beside another, and never a third.
    nap = sleeper(probe, L / 2, meet=Rendezvous(2))
    d = dispatcher(nap, policy=DispatchPolicy(max_concurrency=2))

    results = await d.dispatch(calls("nap", *"abcdef"))

    assert [r.status for r in results] == ["ok"] * 6, [r.content for r in results]
    assert probe.peak == 2


async def test_shared_limiter_bounds_calls_across_dispatchers() -> None:
    probe = Probe()
    limiter = anyio.CapacityLimiter(3)
    nap = sleeper(probe, L / 2)
    first = dispatcher(nap, limiter=limiter, worker="first")
    second = dispatcher(nap, limiter=limiter, worker="second")
    results: dict[str, tuple[ToolMessage, ...]] = {}

    async def run(d: Dispatcher, labels: str) -> None:
        results[labels] = await d.dispatch(calls("nap", *labels))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, first, "abcd")
        tg.start_soon(run, second, "wxyz")

    assert probe.peak == 3
    assert [r.status for r in results["abcd"] + results["wxyz"]] == ["ok"] * 8


@pytest.mark.parametrize("slots", [1, 2])
async def test_a_call_that_nests_holds_no_token_its_nested_calls_need(slots: int) -> None:
    """A tool that ``nests`` runs calls of its own through a dispatcher sharing the
    limiter (a nested worker's): they take the tokens, it takes none, so as many of
    it as there are tokens (one in the dispatching task) neither fail nor wait."""
    probe = Probe()
    limiter = anyio.CapacityLimiter(slots)
    leaf = sleeper(probe, L / 4)

    async def ask(label: str) -> str:
        inner = dispatcher(leaf, limiter=limiter, worker=f"nested {label}")
        done = await inner.dispatch(calls("nap", f"{label}1", f"{label}2"))
        return "+".join(r.content for r in done)

    outer = dispatcher(Tool(ask, nests=True), leaf, limiter=limiter)
    with anyio.fail_after(10 * L):
        results = await outer.dispatch([*calls("ask", "a", "b", "c"), *calls("nap", "d")])

    assert [r.content for r in results] == ["a1+a2", "b1+b2", "c1+c2", "d"]
    assert probe.peak == slots  # the leaf calls are bounded, and fill every slot


async def test_each_call_has_its_own_timeout_not_counting_the_wait_for_a_slot() -> None:
    probe = Probe()
    # One at a time: the third call waits 0.2 s for its slot, then runs 0.1 s, 0.3 s in
    # all; with a timeout of 0.25 s it must not time out (each call alone has 0.15 s
    # to spare).
    nap = sleeper(probe, 0.1, timeout=0.25)
    d = dispatcher(nap, policy=DispatchPolicy(max_concurrency=1))

    results = await d.dispatch(calls("nap", "a", "b", "c"))

    assert [r.status for r in results] == ["ok", "ok", "ok"]


# --- side-effecting and exclusive calls ---------------------------------------------


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
async def test_side_effecting_calls_run_one_at_a_time_in_emitted_order(sync: bool) -> None:
    probe = Probe()
    # Latencies shrink along the batch, so any overlap or reordering would show.
    latency = {"w1": 0.08, "w2": 0.05, "w3": 0.02, "w4": 0.0}

    if sync:

        @tool(side_effects=True)
        def write(label: str) -> str:
            with probe.track(label):
                time.sleep(latency[label])
            return label

    else:

        @tool(side_effects=True)
        async def write(label: str) -> str:
            with probe.track(label):
                await anyio.sleep(latency[label])
            return label

    d = dispatcher(write, sleeper(probe, 0.05))
    batch = [
        call("write", {"label": "w1"}, id="w1"),
        call("nap", {"label": "p1"}, id="p1"),
        call("write", {"label": "w2"}, id="w2"),
        call("write", {"label": "w3"}, id="w3"),
        call("nap", {"label": "p2"}, id="p2"),
        call("write", {"label": "w4"}, id="w4"),
    ]

    results = await d.dispatch(batch)

    assert_in_call_order(results, batch)
    assert [r.content for r in results] == ["w1", "p1", "w2", "w3", "p2", "w4"]
    writes = ["w1", "w2", "w3", "w4"]
    assert [label for label in probe.started if label in writes] == writes
    probe.assert_no_overlap(writes)


async def test_exclusive_key_shared_through_one_lock_table_never_overlaps() -> None:
    probe = Probe()
    latency = L / 4
    locks = LockTable()

    @tool(exclusive="db")
    async def migrate(label: str) -> str:
        with probe.track(label):
            await anyio.sleep(latency)
        return label

    first = dispatcher(migrate, locks=locks, worker="first")
    second = dispatcher(migrate, locks=locks, worker="second")

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(first.dispatch, calls("migrate", "a1", "a2", "a3"))
        tg.start_soon(second.dispatch, calls("migrate", "b1", "b2", "b3"))
    elapsed = time.perf_counter() - started

    assert probe.peak == 1
    probe.assert_no_overlap(["a1", "a2", "a3", "b1", "b2", "b3"])
    assert elapsed >= 5.5 * latency


async def test_different_exclusive_keys_do_not_block_each_other() -> None:
    probe = Probe()
    locks = LockTable()

    @tool(exclusive="db")
    async def migrate(label: str) -> str:
        with probe.track(label):
            await anyio.sleep(L)
        return label

    @tool(exclusive="cache")
    async def flush(label: str) -> str:
        with probe.track(label):
            await anyio.sleep(L)
        return label

    first = dispatcher(migrate, locks=locks)
    second = dispatcher(flush, locks=locks)
    async with anyio.create_task_group() as tg:
        tg.start_soon(first.dispatch, calls("migrate", "m"))
        tg.start_soon(second.dispatch, calls("flush", "f"))

    assert probe.peak == 2
    assert repr(locks) == "LockTable(['cache', 'db'])"


# --- observations: order, exactly one per call, errors ------------------------------


async def test_observations_come_in_call_order_when_later_calls_finish_first() -> None:
    probe = Probe()

    @tool
    async def wait(label: str, seconds: float) -> str:
        with probe.track(label):
            await anyio.sleep(seconds)
        return label

    batch = [
        call("wait", {"label": label, "seconds": s}, id=label)
        for label, s in [("slow", 0.15), ("medium", 0.1), ("fast", 0.05), ("instant", 0.0)]
    ]

    results = await dispatcher(wait).dispatch(batch)

    assert probe.finished == ["instant", "fast", "medium", "slow"]
    assert_in_call_order(results, batch)
    assert [r.content for r in results] == ["slow", "medium", "fast", "instant"]


@tool
def echo(text: str, times: int = 1) -> str:
    """Repeat the text."""
    return text * times


@tool
def explode(reason: str) -> str:
    raise ValueError(reason)


@tool
async def explode_async(reason: str) -> str:
    await anyio.lowlevel.checkpoint()
    raise KeyError(reason)


@tool
def retry_please(hint: str) -> str:
    raise ModelRetry(hint)


async def test_bad_model_output_becomes_one_error_observation_per_call() -> None:
    d = dispatcher(echo, explode, explode_async, retry_please)
    batch = [
        call("echo", {"text": "ok"}, id="c1"),
        call("ecko", {"text": "typo"}, id="c2"),
        call("echo", '{"text": "unterminated', id="c3"),
        call("echo", {"text": "x", "times": "many"}, id="c4"),
        call("explode", {"reason": "bad input"}, id="c5"),
        call("explode_async", {"reason": "missing"}, id="c6"),
        call("retry_please", {"hint": "use a smaller date range"}, id="c7"),
        call("echo", {"text": "still"}, id="c8"),
    ]

    results = await d.dispatch(batch)

    assert_in_call_order(results, batch)
    assert [r.status for r in results] == ["ok", *["error"] * 6, "ok"]
    ok, unknown, not_json, invalid, raised, raised_async, retry, last = results
    assert ok.content == "ok"
    assert last.content == "still"
    assert unknown.content == (
        "Error: unknown tool 'ecko'. Available tools: echo, explode, explode_async, retry_please."
    )
    assert "are not valid JSON" in not_json.content
    assert "failed validation" in invalid.content
    assert "argument 'times'" in invalid.content
    assert "Fix the arguments" in invalid.content
    assert raised.content == "Error: tool 'explode' raised ValueError: bad input"
    assert raised_async.content == "Error: tool 'explode_async' raised KeyError: 'missing'"
    assert retry.content == "Error: use a smaller date range"
    assert all("Traceback" not in r.content for r in results)


async def test_an_unknown_tool_in_an_empty_registry() -> None:
    (result,) = await Dispatcher(ToolRegistry()).dispatch([call("anything", id="c1")])
    assert result.status == "error"
    assert "Available tools: none" in result.content


async def test_tool_values_are_rendered_as_text() -> None:
    @tool
    def as_dict() -> dict[str, Any]:
        return {"a": [1, 2], "b": None}

    @tool
    async def nothing() -> None:
        return None

    results = await dispatcher(as_dict, nothing).dispatch(
        [call("as_dict", id="c1"), call("nothing", id="c2")]
    )

    assert [r.content for r in results] == ['{"a":[1,2],"b":null}', ""]


async def test_long_output_is_cut_with_a_marker_saying_how_much() -> None:
    @tool
    def dump(size: int) -> str:
        return "x" * size

    d = dispatcher(dump, policy=DispatchPolicy(max_output_chars=100))
    short, exact, long = await d.dispatch(
        [call("dump", {"size": s}, id=str(s)) for s in (50, 100, 1_250)]
    )

    assert short.content == "x" * 50
    assert exact.content == "x" * 100
    assert long.status == "ok"
    assert long.content.startswith("x" * 100 + "\n")
    assert long.content.count("x") == 100
    assert long.content.endswith("[... output cut: 1,150 of 1,250 characters not shown]")


# --- timeouts -----------------------------------------------------------------------


async def test_a_timed_out_call_is_cancelled_and_the_batch_goes_on() -> None:
    cancelled, after_sleep = anyio.Event(), anyio.Event()
    hang = 10.0  # 200 times the tool's time limit: its cancellation is seen at any load

    @tool(timeout=0.05)
    async def stuck() -> str:
        try:
            await anyio.sleep(hang)
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise
        after_sleep.set()  # must never run: the call was cancelled
        return "done"

    d = dispatcher(stuck, echo)
    started = time.perf_counter()
    timed_out, ok = await d.dispatch(
        [call("stuck", id="c1"), call("echo", {"text": "hi"}, id="c2")]
    )
    elapsed = time.perf_counter() - started

    assert timed_out.status == "timeout"
    assert timed_out.content == "Error: tool 'stuck' timed out after 0.05s and was cancelled."
    assert ok.status == "ok"
    assert ok.content == "hi"
    assert elapsed < hang / 2  # it did not wait for the tool's sleep
    assert cancelled.is_set()  # the call was cancelled, not left running
    assert not after_sleep.is_set()


async def test_an_async_tool_that_blocks_past_its_limit_keeps_its_result_with_a_warning() -> None:
    # Blocking the event loop, it could not be cancelled: it ran, and its result (an
    # effect it may have had) stands, but the calls beside it waited without a word of
    # why: a warning names the call and the cause.
    @tool(timeout=0.05)
    async def blocking() -> str:
        time.sleep(0.4)  # noqa: ASYNC251 (what the call does wrong: it holds the event loop)
        return "late"

    with capture_logs() as logged:
        (result,) = await dispatcher(blocking).dispatch([call("blocking", id="c1")])

    assert (result.status, result.content) == ("ok", "late")
    (warning,) = [e for e in logged if e["event"] == "tool_call.held_loop"]
    assert warning["log_level"] == "warning"
    assert warning["tool"] == "blocking"
    assert warning["timeout_s"] == 0.05
    assert warning["took_s"] >= 0.4
    assert "async tool that blocks" in warning["advice"]


async def test_the_policy_default_timeout_applies_to_tools_without_one() -> None:
    @tool
    async def stuck() -> str:
        await anyio.sleep(10)
        return "done"

    d = dispatcher(stuck, policy=DispatchPolicy(default_timeout=0.05))
    (result,) = await d.dispatch([call("stuck", id="c1")])

    assert result.status == "timeout"
    assert "timed out after 0.05s" in result.content


async def test_a_tool_raising_its_own_timeout_error_failed_and_did_not_time_out() -> None:
    @tool(timeout=5)
    async def fetch() -> str:
        raise TimeoutError("upstream took too long")

    (result,) = await dispatcher(fetch).dispatch([call("fetch", id="c1")])

    assert result.status == "error"
    assert result.content == ("Error: tool 'fetch' raised TimeoutError: upstream took too long")


async def test_a_sync_tool_that_checks_for_cancellation_stops_on_timeout() -> None:
    began, stopped, released = threading.Event(), threading.Event(), threading.Event()
    finished = threading.Event()

    # Its timeout leaves a loaded machine ample time to hand the call to a thread (one
    # cancelled before that never runs, and would prove nothing).
    @tool(timeout=1.0)
    def crunch() -> str:
        began.set()
        try:
            while not released.is_set():  # runs until released, unless cancelled
                time.sleep(0.002)
                check_cancelled()
        except BaseException:
            stopped.set()
            raise
        finished.set()
        return "done"

    try:
        (result,) = await dispatcher(crunch).dispatch([call("crunch", id="c1")])

        assert result.status == "timeout"
        assert began.is_set()
        assert await signalled(stopped), "the thread went on past its timeout"
        assert not finished.is_set()
    finally:
        released.set()


async def test_a_sync_side_effecting_tool_past_its_timeout_is_waited_for_and_reported() -> None:
    probe = Probe()
    timeout = 0.05

    @tool(side_effects=True, timeout=timeout)
    def slow_write(label: str) -> str:
        with probe.track(label):
            time.sleep(4 * timeout)
        return "written"

    @tool(side_effects=True)
    def write(label: str) -> str:
        with probe.track(label):
            return "written"

    d = dispatcher(slow_write, write)
    slow, fast = await d.dispatch(
        [call("slow_write", {"label": "s"}, id="s"), call("write", {"label": "f"}, id="f")]
    )

    assert slow.status == "timeout"
    assert "timed out after 0.05s" in slow.content
    assert "cannot be interrupted" in slow.content
    assert "its effects may have happened" in slow.content
    assert fast.status == "ok"
    # The thread could not be stopped, so the next side-effecting call waited for it.
    probe.assert_no_overlap(["s", "f"])


async def test_a_sync_side_effect_cancelled_twice_still_ends_only_with_its_thread() -> None:
    """Cancelled while its thread runs, a side-effecting call waits for the thread to
    end; cancelled again during that wait (a run stopped twice, Ctrl-C pressed twice),
    it still waits: the call must not outlive its run, nor overlap the next one."""
    inside, release = threading.Event(), threading.Event()
    ended: list[str] = []

    @tool(side_effects=True)
    def effect() -> str:
        inside.set()
        release.wait(5)
        ended.append("thread")
        return "done"

    task = asyncio.create_task(dispatcher(effect).dispatch([call("effect", {}, id="c1")]))
    await asyncio.to_thread(inside.wait, 5)
    task.cancel()
    await asyncio.sleep(L / 10)  # the call now waits for its thread, shielded
    task.cancel()
    await asyncio.sleep(L / 10)
    assert not task.done(), "the second cancellation cut the wait for the thread short"
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ended == ["thread"]


# --- sync tools ---------------------------------------------------------------------


async def test_sync_tools_run_in_worker_threads_without_blocking_the_loop() -> None:
    loop_thread = threading.get_ident()
    tool_threads: list[int] = []
    ticked = threading.Event()

    @tool
    def block() -> str:
        tool_threads.append(threading.get_ident())
        # The loop ticks on while the tool blocks; a tool blocking the loop waits in vain.
        return "ticked" if ticked.wait(MEET_LIMIT_S) else "the loop stood still"

    async def ticker() -> None:
        for _ in range(3):
            await anyio.sleep(L / 40)
        ticked.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        (result,) = await dispatcher(block).dispatch([call("block", {}, id="c1")])

    assert result.content == "ticked"
    assert tool_threads
    assert loop_thread not in tool_threads


async def test_a_sync_side_effect_cancelled_as_it_starts_ends_at_once_and_never_runs_after() -> (
    None
):
    """Cancelled before its thread took it up, a side-effecting call ends at once (it
    waited forever for a thread that would never run it), and does not run later."""
    ran: list[int] = []

    @tool(side_effects=True)
    def effect(n: int) -> str:
        ran.append(n)
        return "done"

    tools = dispatcher(effect)
    for n in range(24):
        task = asyncio.create_task(tools.dispatch([call("effect", {"n": n}, id=f"c{n}")]))
        for _ in range(n % 6):  # cancelled at a different step of its start each time
            await asyncio.sleep(0)
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=5 * L)
        assert done, f"call {n} still waits after its cancellation"
        seen = list(ran)
        await asyncio.sleep(L / 10)
        assert ran == seen, f"call {n} ran after its cancellation was reported"


async def test_a_sync_side_effect_that_timed_out_waiting_for_a_thread_says_it_never_ran() -> None:
    """Every worker thread busy, a side-effecting call times out before one takes it
    up: it never ran, and its observation says so (not that its effects may have
    happened)."""
    ran: list[str] = []
    release = threading.Event()

    @tool(side_effects=True, timeout=0.05)
    def effect(label: str) -> str:
        ran.append(label)
        return "done"

    limiter = anyio.to_thread.current_default_thread_limiter()
    total = limiter.total_tokens
    limiter.total_tokens = 1
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: anyio.to_thread.run_sync(release.wait))
            while limiter.borrowed_tokens < 1:  # the only thread is taken
                await anyio.lowlevel.checkpoint()
            (observed,) = await dispatcher(effect).dispatch([call("effect", {"label": "x"})])
            release.set()
    finally:
        limiter.total_tokens = total
    assert observed.status == "timeout"
    assert "before it started: it did not run" in observed.content
    assert "may have happened" not in observed.content
    assert ran == []


async def test_sync_parallel_safe_calls_overlap() -> None:
    # Each call waits at a barrier for all four: only calls that run at the same time
    # get through (one at a time, the first would wait until the barrier broke).
    barrier = threading.Barrier(4, timeout=10)

    @tool
    def block(label: str) -> str:
        barrier.wait()
        return label

    results = await dispatcher(block).dispatch(calls("block", *"abcd"))

    assert [r.content for r in results] == list("abcd")
    assert [r.status for r in results] == ["ok"] * 4


# --- repeats ------------------------------------------------------------------------


async def test_an_identical_repeat_of_the_previous_turn_is_skipped() -> None:
    runs: list[str] = []

    @tool
    def lookup(city: str, country: str) -> str:
        runs.append(city)
        return f"{city} is sunny"

    d = dispatcher(lookup)
    previous = [call("lookup", '{"city": "Oslo", "country": "NO"}', id="t1")]
    await d.dispatch(previous, turn=1)
    assert runs == ["Oslo"]

    # Same arguments in another key order and spacing, and a different call.
    repeat = call("lookup", '{ "country":"NO",  "city":"Oslo" }', id="t2a")
    different = call("lookup", '{"city": "Bergen", "country": "NO"}', id="t2b")
    skipped, ran = await d.dispatch([repeat, different], turn=2, previous=previous)

    assert runs == ["Oslo", "Bergen"]
    assert skipped.status == "skipped"
    assert skipped.tool_call_id == "t2a"
    assert "repeats your previous call to 'lookup'" in skipped.content
    assert ran.status == "ok"
    assert ran.content == "Bergen is sunny"


# --- ToolContext, events and logs ---------------------------------------------------


async def test_tool_context_is_injected() -> None:
    seen: list[ToolContext] = []

    @tool
    async def whoami(ctx: ToolContext) -> str:
        seen.append(ctx)
        return "me"

    @tool
    def whoami_sync(note: str, context: ToolContext) -> str:
        seen.append(context)
        return note

    journal = MemoryJournal(scope="run-1 of this store")
    d = dispatcher(whoami, whoami_sync, worker="researcher", run_id="run-1", journal=journal)
    await d.dispatch([call("whoami", id="c1"), call("whoami_sync", {"note": "n"}, id="c2")], turn=4)

    key = functools.partial(idempotency_key, "run-1 of this store", "researcher", 4)
    context = functools.partial(ToolContext, worker="researcher", run_id="run-1", turn=4)
    assert sorted(seen, key=lambda c: c.call_id) == [
        context(call_id="c1", idempotency_key=key("c1")),
        context(call_id="c2", idempotency_key=key("c2")),
    ]


async def test_a_calls_idempotency_key_is_its_runs_own_and_the_same_each_time() -> None:
    keys: list[str] = []

    @tool(side_effects=True, idempotent=True)
    async def charge(context: ToolContext) -> str:
        keys.append(context.idempotency_key)
        return "charged"

    # The journals of two lives of run-1 (the second lost the call's outcome), one of
    # another run, and none (a run with nothing to resume), twice.
    lives = [MemoryJournal(scope="run-1"), MemoryJournal(scope="run-1")]
    for journal in (*lives, MemoryJournal(scope="run-2"), None, None):
        d = dispatcher(charge, worker="payer", run_id="run-1", journal=journal)
        await d.dispatch([call("charge", id="c1")], turn=1)
    first, again, other_run, *unjournaled = keys
    assert first == again  # made again by a resumed run: under the same key
    assert len({first, other_run, *unjournaled}) == 4
    assert all(k.startswith("honeycomb-") and len(k) == 42 for k in keys)


async def test_each_call_emits_started_and_finished_events_to_handlers() -> None:
    events: list[Event] = []
    probe = Probe()
    d = dispatcher(
        sleeper(probe, L / 4),
        explode,
        tracer=Tracer(events.append, log=False),
        worker="w1",
        run_id="r1",
    )

    await d.dispatch(
        [call("nap", {"label": "a"}, id="c1"), call("explode", {"reason": "no"}, id="c2")],
        turn=3,
    )

    started = [e for e in events if isinstance(e, ToolCallStarted)]
    finished = {e.call_id: e for e in events if isinstance(e, ToolCallFinished)}
    assert len(events) == 4
    assert {e.call_id for e in started} == {"c1", "c2"}
    for e in started:
        assert (e.worker, e.run_id, e.turn) == ("w1", "r1", 3)
        assert events.index(e) < events.index(finished[e.call_id])

    nap, boom = finished["c1"], finished["c2"]
    assert (nap.worker, nap.run_id, nap.turn, nap.tool, nap.status) == ("w1", "r1", 3, "nap", "ok")
    assert nap.duration_s >= L / 4 * 0.9
    assert nap.error is None
    assert (boom.tool, boom.status, boom.error) == ("explode", "error", "ValueError: no")
    assert boom.duration_s >= 0


@pytest.fixture
def captured_logs() -> Iterator[list[MutableMapping[str, Any]]]:
    was_configured = structlog.is_configured()
    with capture_logs() as logs:
        yield logs
    if not was_configured:
        # capture_logs leaves structlog marked as configured, which would make every
        # later Tracer print through structlog's defaults.
        structlog.reset_defaults()


async def test_events_go_to_structlog_when_captured(
    captured_logs: list[MutableMapping[str, Any]],
) -> None:
    @tool(timeout=0.02)
    async def stuck() -> str:
        await anyio.sleep(10)
        return "done"

    d = dispatcher(echo, stuck, tracer=Tracer(), worker="w1", run_id="r1")
    await d.dispatch([call("echo", {"text": "x"}, id="c1"), call("stuck", id="c2")], turn=2)

    finished = {e["call_id"]: e for e in captured_logs if e["event"] == "tool_call.finished"}
    started = [e for e in captured_logs if e["event"] == "tool_call.started"]
    assert len(started) == 2
    assert set(finished) == {"c1", "c2"}
    for entry in (*started, *finished.values()):
        assert entry["log_level"] == "info"
        assert (entry["worker"], entry["run_id"], entry["turn"]) == ("w1", "r1", 2)
    ok, timed_out = finished["c1"], finished["c2"]
    assert (ok["tool"], ok["status"]) == ("echo", "ok")
    assert (timed_out["tool"], timed_out["status"]) == ("stuck", "timeout")
    assert timed_out["duration_s"] >= 0.02 * 0.9
    assert "timed out after 0.02s" in timed_out["error"]


async def test_no_events_are_built_without_handlers_or_logging() -> None:
    assert not Tracer(log=False).enabled
    (result,) = await dispatcher(echo).dispatch([call("echo", {"text": "x"}, id="c1")])
    assert result.status == "ok"


# --- cancellation -------------------------------------------------------------------


@pytest.mark.parametrize("batch_size", [1, 3], ids=["one-call", "many-calls"])
async def test_cancelling_a_dispatch_cancels_running_tools_promptly(batch_size: int) -> None:
    """Cancelled once every call has started, a dispatch ends at once: its async tools
    are cancelled, and a sync tool's thread stops at its next ``check_cancelled()``.
    Left alone, each tool would run until the test ends."""
    labels = ["a"] if batch_size == 1 else ["a", "s", "w"]
    began = {label: threading.Event() for label in labels}
    cancelled: list[str] = []
    completed: list[str] = []
    sync_stopped, released = threading.Event(), threading.Event()

    async def wait_long(label: str) -> str:
        began[label].set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled.append(label)
            raise
        completed.append(label)
        return label

    wait = tool(name="wait")(wait_long)
    write = tool(name="write", side_effects=True)(wait_long)

    @tool
    def spin(label: str) -> str:
        began[label].set()
        try:
            while not released.is_set():
                time.sleep(0.002)
                check_cancelled()
        except BaseException:
            sync_stopped.set()
            raise
        completed.append(label)
        return label

    names = {"a": "wait", "s": "spin", "w": "write"}
    batch = [call(names[label], {"label": label}, id=label) for label in labels]
    d = dispatcher(wait, spin, write)
    returned: list[str] = []

    async def run(scope: anyio.CancelScope) -> None:
        with scope:
            await d.dispatch(batch)
            returned.append("returned")  # a swallowed cancellation gets here

    try:
        scope = anyio.CancelScope()
        # Against tools that never end by themselves: it did not wait for them.
        with anyio.fail_after(MEET_LIMIT_S):
            async with anyio.create_task_group() as group:
                group.start_soon(run, scope)
                for label in labels:
                    assert await signalled(began[label]), f"{label!r} never started"
                scope.cancel()

        assert scope.cancelled_caught  # the cancellation was not swallowed
        assert returned == []
        assert completed == []
        assert sorted(cancelled) == [label for label in labels if label != "s"]
        if batch_size > 1:
            assert await signalled(sync_stopped), "the sync tool's thread went on"
    finally:
        released.set()


# --- policy -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_concurrency": 0}, "max_concurrency must be at least 1"),
        ({"default_timeout": 0}, "default_timeout must be positive"),
        ({"max_output_chars": 10}, "max_output_chars must be at least 100"),
    ],
)
def test_policy_refuses_bad_values(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DispatchPolicy(**options)


def test_policy_allows_no_default_timeout() -> None:
    assert DispatchPolicy(default_timeout=None).default_timeout is None


def _paused_call(worker: str) -> ApprovalNeeded:
    """What a nested worker's call waiting for a person raises through its caller."""
    waiting = PendingApproval(
        call_id="n1", worker=worker, role="researcher", turn=1, tool="send",
        arguments={}, why="send needs approval", asked_at=0.0,
    )  # fmt: skip
    return ApprovalNeeded((waiting,))


async def test_a_nesting_call_that_pauses_lets_the_turns_other_calls_end_first() -> None:
    done: list[str] = []

    async def ask(label: str) -> str:
        """Ask a nested worker."""
        raise _paused_call(f"w/{label}")

    delegate = Tool(ask, name="delegate", nests=True)

    @tool
    async def look(label: str) -> str:
        """Look something up."""
        await anyio.sleep(0.01)
        done.append(label)
        return label

    batch = [*calls("delegate", "d1"), *calls("look", "l1", "l2")]
    with pytest.raises(ApprovalNeeded) as paused:
        await dispatcher(delegate, look).dispatch(batch)
    assert [p.worker for p in paused.value.pending] == ["w/d1"]
    assert sorted(done) == ["l1", "l2"]  # neither was cut off


async def test_a_tool_that_does_not_nest_cannot_pause_its_worker_it_fails() -> None:
    @tool
    async def sneaky(label: str) -> str:
        """Claims to wait for a person."""
        raise _paused_call("elsewhere")

    @tool
    async def look(label: str) -> str:
        """Look something up."""
        return label

    batch = [*calls("sneaky", "s1"), *calls("look", "l1")]
    first, second = await dispatcher(sneaky, look).dispatch(batch)
    assert first.status == "error"
    assert "tool 'sneaky' raised ApprovalNeeded" in first.content
    assert (second.status, second.content) == ("ok", "l1")


async def test_a_turn_whose_calls_run_holds_its_lanes_and_observations_and_no_more() -> None:
    # What each worker holds while its tools work is what 10,000 workers hold at once
    # (benchmarks A and E): the admitted calls in their lanes, the tasks of those that
    # run apart and the observations, nothing the admission was done with, no cell a
    # comprehension would keep, no frame between the turn and the call it awaits, and
    # in each frame no slot for what only a call that fails needs; and what it keeps
    # for the next turn (whose repeats of these calls it skips) is the calls, with no
    # index of their arguments by tool.
    started, release = asyncio.Event(), asyncio.Event()

    @tool
    async def look(label: str) -> str:
        """Look something up."""
        started.set()
        await release.wait()
        return label

    turns = dispatcher(look)
    task = asyncio.ensure_future(turns.dispatch(calls("look", "l1", "l2")))
    await started.wait()
    awaited, sizes = [], []
    coro = task.get_coro()
    while hasattr(coro, "cr_code"):
        awaited.append(coro.cr_code.co_name)
        sizes.append(sys.getsizeof(coro))
        coro = coro.cr_await
    frame = task.get_coro().cr_frame
    code = frame.f_code
    arguments = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    lists = sorted(
        name
        for name, value in frame.f_locals.items()
        if isinstance(value, list) and name not in arguments
    )
    release.set()
    observations = await task
    assert lists == ["parallel", "results", "serial", "tasks"]
    assert frame.f_code.co_cellvars == ()
    assert awaited[:3] == ["dispatch", "__call__", "look"]  # the call's layers, then its tool
    assert sum(sizes[:2]) <= 656  # bytes (376 and 328 when their failures' slots were there)
    assert [o.content for o in observations] == ["l1", "l2"]
    assert not [kept for kept in gc.get_referents(turns) if isinstance(kept, dict)]
