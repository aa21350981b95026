"""Property test: random batches of tool calls, run by one or two workers at once,
keep every dispatch semantic.

Each example mixes parallel-safe, side-effecting and exclusive tools, sync and async,
with random latencies (0-30 ms), failures and hangs past a 50 ms timeout. It runs in
its own ``anyio.run`` inside a sync test, so hypothesis and pytest-asyncio do not meet.

Peak concurrency is made deterministic with a barrier: each parallel-safe call that
does not hang waits, holding its slot, until ``min(cap, such calls)`` of them have
started; so the peak is exactly that number unless the cap is broken or calls do not
start together. (Hanging calls stay out of the count: a sync one is abandoned on
timeout and may still be running, briefly, after its slot was given to another call.)
A sync call runs once a thread takes it up: on a loaded machine a hanging one's 50 ms
may run out before that, and then it never runs (it is not started late). So the
checks are of the calls that started: those that did not are sync hanging ones.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.messages import ToolCall, ToolMessage
from runtime.testing import call
from runtime.tools import Tool, ToolRegistry, tool
from runtime.tools.dispatch import Dispatcher, DispatchPolicy, LockTable, check_cancelled

HANG_TIMEOUT = 0.05
HANG_FOR = 0.5  # 10x HANG_TIMEOUT: a call still running then was not cancelled
BARRIER_LIMIT = 2.0  # a barrier not reached by then fails the example instead of hanging
EXCLUSIVE_KEYS = {"ex_a": "a", "ex_b": "b", "ex_c": "c"}
SIDE_EFFECTING = {"se", *EXCLUSIVE_KEYS}


@dataclass(frozen=True)
class Spec:
    """One call of a batch. ``lane`` "bad" is a call to a tool that does not exist."""

    lane: str
    sync: bool
    latency: float
    outcome: str  # "ok", "fail" or "hang"

    @property
    def hangs(self) -> bool:
        return self.outcome == "hang" and self.lane != "bad"

    @property
    def tool_name(self) -> str:
        if self.lane == "bad":
            return "no_such_tool"
        hang = "_hang" if self.hangs else ""
        return f"{self.lane}_{'sync' if self.sync else 'async'}{hang}"

    @property
    def side_effecting(self) -> bool:
        return self.lane in SIDE_EFFECTING

    @property
    def counted(self) -> bool:
        """Whether the call takes part in the peak-concurrency barrier."""
        return self.lane == "ps" and not self.hangs

    @property
    def expected_status(self) -> str:
        if self.lane == "bad":
            return "error"
        return {"ok": "ok", "fail": "error", "hang": "timeout"}[self.outcome]


@dataclass
class Recorder:
    """What one worker's tools did; thread-safe for the sync tools."""

    target: int  # the barrier: calls in flight that parallel-safe calls wait for
    lock: threading.Lock = field(default_factory=threading.Lock)
    entered: int = 0
    active: int = 0
    peak: int = 0
    barrier_missed: bool = False
    serial_starts: list[str] = field(default_factory=list)
    starts: dict[str, float] = field(default_factory=dict)
    spans: dict[str, tuple[float, float]] = field(default_factory=dict)
    cancelled: set[str] = field(default_factory=set)
    after_timeout: set[str] = field(default_factory=set)
    threads: dict[str, int] = field(default_factory=dict)

    def enter(self, label: str, lane: str, counted: bool, sync: bool) -> None:
        with self.lock:
            self.starts[label] = time.perf_counter()
            if lane in SIDE_EFFECTING:
                self.serial_starts.append(label)
            if counted:
                self.entered += 1
                self.active += 1
                self.peak = max(self.peak, self.active)
            if sync:
                self.threads[label] = threading.get_ident()

    def leave(self, label: str, counted: bool) -> None:
        with self.lock:
            self.spans[label] = (self.starts[label], time.perf_counter())
            if counted:
                self.active -= 1

    def barrier_open(self, deadline: float) -> bool:
        if self.entered >= self.target:
            return True
        if time.perf_counter() > deadline:
            self.barrier_missed = True
            return True
        return False

    async def barrier_async(self) -> None:
        deadline = time.perf_counter() + BARRIER_LIMIT
        # Polled, not an anyio.Event: worker threads update the count too.
        while not self.barrier_open(deadline):  # noqa: ASYNC110
            await anyio.sleep(0.001)

    def barrier_sync(self) -> None:
        deadline = time.perf_counter() + BARRIER_LIMIT
        while not self.barrier_open(deadline):
            time.sleep(0.001)


def make_tool(rec: Recorder, spec: Spec) -> Tool[Any, Any]:
    """The tool that ``spec`` calls, reporting to ``rec``."""
    lane, sync, hang, counted = spec.lane, spec.sync, spec.hangs, spec.counted
    options: dict[str, Any] = {"name": spec.tool_name}
    if lane == "se":
        options["side_effects"] = True
    elif lane in EXCLUSIVE_KEYS:
        options["exclusive"] = EXCLUSIVE_KEYS[lane]
    if hang:
        options["timeout"] = HANG_TIMEOUT

    fn: Callable[..., Any]
    if sync and hang:

        def fn(label: str, latency: float, fail: bool) -> str:
            rec.enter(label, lane, counted, sync=True)
            try:
                try:
                    for _ in range(int(HANG_FOR / 0.002)):
                        time.sleep(0.002)
                        check_cancelled()
                except BaseException:
                    rec.cancelled.add(label)
                    raise
                rec.after_timeout.add(label)
                return label
            finally:
                rec.leave(label, counted)

    elif sync:

        def fn(label: str, latency: float, fail: bool) -> str:
            rec.enter(label, lane, counted, sync=True)
            try:
                if counted:
                    rec.barrier_sync()
                time.sleep(latency)
                if fail:
                    raise RuntimeError(label)
                return label
            finally:
                rec.leave(label, counted)

    elif hang:

        async def fn(label: str, latency: float, fail: bool) -> str:
            rec.enter(label, lane, counted, sync=False)
            try:
                try:
                    await anyio.sleep(HANG_FOR)
                except anyio.get_cancelled_exc_class():
                    rec.cancelled.add(label)
                    raise
                rec.after_timeout.add(label)
                return label
            finally:
                rec.leave(label, counted)

    else:

        async def fn(label: str, latency: float, fail: bool) -> str:
            rec.enter(label, lane, counted, sync=False)
            try:
                if counted:
                    await rec.barrier_async()
                await anyio.sleep(latency)
                if fail:
                    raise RuntimeError(label)
                return label
            finally:
                rec.leave(label, counted)

    return tool(**options)(fn)


@dataclass(frozen=True)
class Worker:
    cap: int
    specs: list[Spec]

    def labels(self, index: int) -> list[str]:
        return [f"w{index}c{i}" for i in range(len(self.specs))]


specs = st.builds(
    Spec,
    lane=st.sampled_from(["ps", "ps", "ps", "se", "ex_a", "ex_b", "ex_c", "bad"]),
    sync=st.booleans(),
    latency=st.integers(0, 30).map(lambda ms: ms / 1000),
    outcome=st.sampled_from(["ok", "ok", "ok", "ok", "fail", "hang"]),
)
workers = st.builds(Worker, cap=st.integers(1, 4), specs=st.lists(specs, max_size=8))


@settings(max_examples=60, deadline=None)
@given(st.lists(workers, min_size=1, max_size=2))
def test_random_batches_keep_the_dispatch_semantics(batch: list[Worker]) -> None:
    anyio.run(check_example, batch)


async def check_example(batch: list[Worker]) -> None:
    locks = LockTable()  # shared, as the Executor shares it between workers
    recorders = [Recorder(target=min(w.cap, sum(s.counted for s in w.specs))) for w in batch]
    calls = [
        [
            call(
                s.tool_name,
                {"label": label, "latency": s.latency, "fail": s.outcome == "fail"},
                id=label,
            )
            for s, label in zip(w.specs, w.labels(index), strict=True)
        ]
        for index, w in enumerate(batch)
    ]
    dispatchers = [
        Dispatcher(
            tools_for(w, rec),
            policy=DispatchPolicy(max_concurrency=w.cap, default_timeout=5.0),
            locks=locks,
            worker=f"w{index}",
        )
        for index, (w, rec) in enumerate(zip(batch, recorders, strict=True))
    ]
    results: dict[int, tuple[ToolMessage, ...]] = {}

    async def run(index: int) -> None:
        results[index] = await dispatchers[index].dispatch(calls[index])

    async with anyio.create_task_group() as tg:
        for index in range(len(batch)):
            tg.start_soon(run, index)

    loop_thread = threading.get_ident()
    for index, worker in enumerate(batch):
        check_worker(worker, recorders[index], calls[index], results[index], loop_thread)
        await check_hangs_were_cancelled(worker, recorders[index], calls[index])
    check_exclusive_keys(batch, recorders)


def tools_for(worker: Worker, rec: Recorder) -> ToolRegistry:
    """One tool per distinct name the worker's batch calls (not for "bad" calls)."""
    by_name = {s.tool_name: s for s in worker.specs if s.lane != "bad"}
    return ToolRegistry(make_tool(rec, spec) for spec in by_name.values())


def check_worker(
    worker: Worker,
    rec: Recorder,
    calls: list[ToolCall],
    results: tuple[ToolMessage, ...],
    loop_thread: int,
) -> None:
    # Exactly one observation per call, in call order, with the expected status.
    assert [r.tool_call_id for r in results] == [c.id for c in calls]
    for spec, result in zip(worker.specs, results, strict=True):
        assert result.status == spec.expected_status, (spec, result)
        if result.status == "ok":
            assert result.content == result.tool_call_id
        elif spec.outcome == "fail" and spec.lane != "bad":
            assert f"raised RuntimeError: {result.tool_call_id}" in result.content

    # A call that never started timed out before a thread took it up (and never ran).
    not_started = {c.id for c in calls} - set(rec.starts)
    unstartable = {c.id for s, c in zip(worker.specs, calls, strict=True) if s.hangs and s.sync}
    bad = {c.id for s, c in zip(worker.specs, calls, strict=True) if s.lane == "bad"}
    assert not_started - bad <= unstartable, "a call that had time never started"

    # Side-effecting calls start in emitted order and never overlap.
    serial = [
        c.id
        for s, c in zip(worker.specs, calls, strict=True)
        if s.side_effecting and c.id not in not_started
    ]
    assert rec.serial_starts == serial
    assert set(serial) <= set(rec.spans), "a side-effecting call was still running"
    assert_no_overlap([rec.spans[label] for label in serial])

    # Parallel-safe calls run together, up to the cap and no further.
    assert not rec.barrier_missed, "parallel-safe calls did not start together"
    assert rec.peak == rec.target <= worker.cap

    # Sync tools ran in worker threads, never on the event loop's thread.
    assert loop_thread not in rec.threads.values()


async def check_hangs_were_cancelled(worker: Worker, rec: Recorder, calls: list[ToolCall]) -> None:
    hung = {c.id for s, c in zip(worker.specs, calls, strict=True) if s.hangs}

    def started() -> set[str]:  # a sync one that timed out before its thread never runs
        return hung & set(rec.starts)

    # An abandoned sync thread notices its cancellation at its next check; wait for it.
    with anyio.move_on_after(1.0):
        while not started() <= rec.cancelled:  # noqa: ASYNC110 - set from worker threads
            await anyio.sleep(0.002)
    assert started() <= rec.cancelled
    assert not rec.after_timeout, f"code after a timed-out await ran: {rec.after_timeout}"


def check_exclusive_keys(batch: list[Worker], recorders: list[Recorder]) -> None:
    for lane in EXCLUSIVE_KEYS:
        spans = [
            rec.spans[label]
            for index, (worker, rec) in enumerate(zip(batch, recorders, strict=True))
            for spec, label in zip(worker.specs, worker.labels(index), strict=True)
            if spec.lane == lane and label in rec.spans  # those that started
        ]
        assert_no_overlap(spans)


def assert_no_overlap(spans: list[tuple[float, float]]) -> None:
    ordered = sorted(spans)
    for (_, end), (next_start, _) in itertools.pairwise(ordered):
        assert end <= next_start, f"calls overlapped: {ordered}"
