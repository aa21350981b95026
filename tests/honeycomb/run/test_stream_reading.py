"""Reading a run's stream as a service does: a wait for the next event that times out
(a keep-alive) loses nothing and stops nothing, a second reader is refused at once,
and iterating ``stream(...)`` without its block says how to write it."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from honeycomb import Executor, Role, RunStream
from honeycomb.errors import RunFailed, StreamBusy
from honeycomb.events import Event, RunFinished, RunStarted
from honeycomb.run.result import RunResult
from honeycomb.run.stream import streamed
from honeycomb.testing import FunctionModel
from runtime import ModelRequest


class Gate:
    """A model that holds its first call until :meth:`open`: while it waits, the run
    has no event to send."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()
        self.calls = 0

    async def answer(self, request: ModelRequest) -> str:
        self.calls += 1
        await self.opened.wait()
        return "done"

    def open(self) -> None:
        self.opened.set()


def executor(gate: Gate, handled: list[Event] | None = None, store: Path | None = None) -> Executor:
    on_event = [handled.append] if handled is not None else []
    return Executor(
        [Role(name="w")],
        FunctionModel(gate.answer),
        planner=lambda task: [("w", task)],
        aggregator="concat",
        on_event=on_event,
        store=store,
    )


async def read_to(events: AsyncIterator[Event], kind: str) -> list[Event]:
    read: list[Event] = []
    while not read or read[-1].kind != kind:
        read.append(await anext(events))
    return read


async def in_timeout(next_event: Awaitable[Event]) -> Event:
    async with asyncio.timeout(0.01):
        return await next_event


async def in_wait_for(next_event: Awaitable[Event]) -> Event:
    return await asyncio.wait_for(next_event, 0.01)


@pytest.mark.parametrize("wait", [in_timeout, in_wait_for], ids=["timeout", "wait_for"])
async def test_a_wait_for_the_next_event_that_times_out_loses_no_event_and_stops_no_run(
    wait: Callable[[Awaitable[Event]], Awaitable[Event]],
) -> None:
    """The keep-alive of a server-sent events service: the wait times out while the
    model works, and the next wait gets the next event; every event comes, in order."""
    gate, handled = Gate(), list[Event]()
    async with executor(gate, handled).stream("t", subtasks=[("w", "do")]) as events:
        read = await read_to(events, "model_call.started")
        for _ in range(3):  # the model holds: nothing to read, each wait times out
            with pytest.raises(TimeoutError):
                await wait(anext(events))
        gate.open()
        while True:
            try:
                read.append(await wait(anext(events)))
            except StopAsyncIteration:
                break
    assert [id(e) for e in read] == [id(e) for e in handled]  # each once, in order
    assert isinstance(read[-1], RunFinished)
    assert events.result is not None
    assert events.result.status == "ok"


async def test_a_sessions_stream_survives_a_wait_that_times_out_and_its_turn_ends() -> None:
    gate = Gate()
    session = executor(gate).session("u1")
    async with session.stream("hi") as events:
        await read_to(events, "model_call.started")
        with pytest.raises(TimeoutError):
            await in_timeout(anext(events))
        gate.open()
        rest = [event async for event in events]
    assert isinstance(rest[-1], RunFinished)
    assert events.result is not None
    assert [turn.status for turn in await session.turns()] == ["ok"]


async def test_a_second_reader_is_refused_at_once_and_the_first_reads_on() -> None:
    gate, handled = Gate(), list[Event]()
    async with executor(gate, handled).stream("t", subtasks=[("w", "do")]) as events:
        read = await read_to(events, "model_call.started")
        async with asyncio.TaskGroup() as group:
            first = group.create_task(anext(events))
            await asyncio.sleep(0)  # the first reader's task starts, and waits
            assert not first.done()
            with pytest.raises(StreamBusy, match="one reader"):
                await anext(events)
            with pytest.raises(RuntimeError):  # it is one, as asyncio's own say so
                await anext(events)
            gate.open()
        read.append(first.result())
        read += [event async for event in events]  # the next reader, once it is alone
    assert [id(e) for e in read] == [id(e) for e in handled]
    assert events.result is not None
    assert events.result.status == "ok"


async def test_a_reader_woken_but_not_yet_running_still_holds_the_stream() -> None:
    """An event wakes the waiting reader; another task asking before that reader runs
    is refused too, rather than taking the event from under it."""
    stream = RunStream()
    async with asyncio.TaskGroup() as group:
        first = group.create_task(anext(stream))
        await asyncio.sleep(0)
        stream(RunFinished(status="ok", wall_s=0.0))
        with pytest.raises(StreamBusy):
            await anext(stream)
    assert isinstance(first.result(), RunFinished)


async def test_leaving_the_block_on_a_timeout_cancels_the_run() -> None:
    """A timeout let out of the block leaves it early: the run is cancelled, as
    documented, and the block raises the timeout."""
    gate = Gate()
    with pytest.raises(TimeoutError):  # noqa: PT012 - raised inside the block
        async with executor(gate).stream("t", subtasks=[("w", "do")]) as events:
            await read_to(events, "model_call.started")
            await in_timeout(anext(events))
    assert events.result is None
    assert events.error is None
    assert gate.calls == 1


def test_iterating_a_stream_without_its_block_says_how_to_write_it() -> None:
    gate = Gate()
    ex = executor(gate)
    for stream in (ex.stream("t", subtasks=[("w", "do")]), ex.session("u1").stream("hi")):
        with pytest.raises(TypeError, match=r"async with executor\.stream\(task\) as events"):
            aiter(stream)  # type: ignore[arg-type]
    assert gate.calls == 0  # no run started


async def test_async_for_over_a_stream_without_its_block_fails_at_once() -> None:
    gate = Gate()
    with pytest.raises(TypeError, match="gives a block, not the events"):
        async for _ in executor(gate).stream("t", subtasks=[("w", "do")]):  # type: ignore[attr-defined]
            pass
    assert gate.calls == 0


async def test_a_run_s_error_is_raised_once_then_the_stream_is_exhausted() -> None:
    """As an async generator's: a reader that asks again after the error gets
    StopAsyncIteration, not the same error again (its traceback growing each time);
    ``events.error`` keeps it."""

    async def broken(request: ModelRequest) -> str:
        raise ValueError("the model broke")

    failing = Executor([Role(name="w")], FunctionModel(broken), planner=lambda task: [("w", task)])
    for stream in (failing.stream("t"), failing.session("u1").stream("hi")):
        read: list[Event] = []
        async with stream as events:
            with pytest.raises(RunFailed, match="nothing to aggregate") as raised:  # noqa: PT012 - raised while iterating
                async for event in events:
                    read.append(event)
            with pytest.raises(StopAsyncIteration):
                await anext(events)
            assert [event async for event in events] == []
        assert isinstance(read[-1], RunFinished)
        assert events.error is raised.value
        assert events.result is None


async def test_leaving_the_block_at_the_runs_last_event_lets_it_end_and_keeps_its_result(
    tmp_path: Path,
) -> None:
    """``run.finished`` is the last event: a reader that stops there leaves a run that
    has ended, which records its end (its store row, a session's turn) uncancelled,
    and ``events.result`` holds its result."""
    model = FunctionModel(lambda request: "done")
    ex = Executor(
        [Role(name="w")], model, planner=lambda task: [("w", task)], store=tmp_path / "runs.db"
    )
    for stream in (ex.stream("t", run_id="r1"), ex.session("u1").stream("hi")):
        async with stream as events:
            async for event in events:
                if isinstance(event, RunFinished):
                    break
        assert events.result is not None
        assert events.result.status == "ok"
    summary = await ex.store.summary("r1")  # type: ignore[union-attr]
    assert summary is not None
    assert summary.status == "ok"
    (turn,) = await ex.session("u1").turns()
    assert turn.status == "ok"


async def test_an_event_after_the_end_the_reader_saw_stops_the_run_going_on() -> None:
    """A run that goes on after the ``run.finished`` its reader stopped at (a new life,
    for a call decided as it ended) is stopped: nobody reads it any more."""
    stream, stopped = RunStream(), []
    stream(RunStarted(run_id="r", task="t"))
    stream(RunStarted(run_id="sub", task="t", caller="r"))  # a hive called as a tool
    stream(RunFinished(run_id="sub", status="ok", wall_s=0.0))
    stream(RunFinished(run_id="r", status="waiting", wall_s=0.0))
    for _ in range(3):
        await anext(stream)
        assert not stream.ended  # a sub-run's end is not the run's
    await anext(stream)
    assert stream.ended
    stream.on_more = lambda: stopped.append("stopped")
    stream(RunStarted(run_id="r", task="t"))  # the run's next life
    assert not stream.ended
    assert stopped == ["stopped"]


async def test_a_block_entered_again_while_it_runs_is_refused_and_the_first_reads_on() -> None:
    """One ``stream(...)`` is one block at a time: entering it again while it runs (from
    another task) says so, and leaves the first block and its run as they were; once
    left, it may be entered again, for another run."""
    gate = Gate()
    block = executor(gate).stream("t", subtasks=[("w", "do")])
    async with block as events:
        await read_to(events, "model_call.started")
        with pytest.raises(RuntimeError, match="entered already"):
            await asyncio.create_task(block.__aenter__())
        gate.open()
        assert (await read_to(events, "run.finished"))[-1].kind == "run.finished"
    assert events.result is not None
    assert events.result.status == "ok"
    async with block as again:
        assert [e async for e in again][-1].kind == "run.finished"
    assert again.result is not None
    assert gate.calls == 2


async def test_a_session_stream_left_at_its_message_s_last_event_keeps_its_result(
    tmp_path: Path,
) -> None:
    """A session's message answered after the turn it resumes first streams two runs:
    the reader that stops at the message's ``run.finished`` leaves its run to end."""
    gate = Gate()
    ex = executor(gate, store=tmp_path / "runs.db")
    async with ex.session("u1").stream("first") as cut:
        await read_to(cut, "model_call.started")  # left here: the turn is interrupted
    gate.open()
    session = ex.session("u1", unfinished="resume")
    finished = 0
    async with session.stream("second") as events:
        async for event in events:
            finished += isinstance(event, RunFinished)
            if finished == 2:
                break
    assert events.result is not None
    assert events.result.task == "second"
    assert [turn.status for turn in await session.turns()] == ["ok", "ok"]


async def test_a_session_stream_left_at_the_resumed_turns_end_lets_its_message_be_answered(
    tmp_path: Path,
) -> None:
    """The first ``run.finished`` of a session's message that resumes an unfinished turn
    first is that turn's: a reader that stops there (as at any run's end) left the
    message's own run cancelled as it began, its turn interrupted, holding the session.
    It is answered, and ``events.result`` holds its result."""
    gate = Gate()
    ex = executor(gate, store=tmp_path / "runs.db")
    async with ex.session("u1").stream("first") as cut:
        await read_to(cut, "model_call.started")  # left here: the turn is interrupted
    gate.open()
    session = ex.session("u1", unfinished="resume")
    async with session.stream("second") as events:
        async for event in events:
            if isinstance(event, RunFinished):
                break
    assert events.result is not None
    assert events.result.task == "second"
    assert [turn.status for turn in await session.turns()] == ["ok", "ok"]


async def test_a_run_that_follows_the_end_the_reader_saw_is_not_stopped() -> None:
    """Events of a run of its own after the end the reader stopped at (a session's
    message, after the turn it resumed), queued or to come, do not stop the block's
    run; an event of the run that ended does."""
    for queued in (False, True):
        stream, stopped = RunStream(), []
        stop = stopped.append
        stream(RunStarted(run_id="turn", task="t"))
        stream(RunFinished(run_id="turn", status="ok", wall_s=0.0))
        await anext(stream)
        if queued:
            stream(RunStarted(run_id="message", task="t"))
        await anext(stream)
        assert stream.ended
        stream.on_more = functools.partial(stop, "stopped")
        stream(RunStarted(run_id="message", task="t"))
        stream(RunFinished(run_id="message", status="ok", wall_s=0.0))
        assert stopped == []
    stream = RunStream()
    stream(RunStarted(run_id="turn", task="t"))
    stream(RunFinished(run_id="turn", status="ok", wall_s=0.0))
    stream(RunStarted(run_id="message", task="t"))
    for _ in range(3):
        await anext(stream)
    assert not stream.ended  # read on into the message's run: leaving now stops it


async def test_the_stream_of_a_run_that_ended_has_no_event_and_its_kept_result(
    tmp_path: Path,
) -> None:
    gate = Gate()
    gate.open()
    ex = executor(gate, store=tmp_path / "runs.db")
    first = await ex.run("t", run_id="r1")
    async with ex.stream("t", run_id="r1") as events:
        assert [event async for event in events] == []
    assert events.result is not None
    assert events.result.answer_text == first.answer_text
    assert gate.calls == 1  # nothing ran again


async def test_a_block_cancelled_says_what_the_runs_stop_could_not_record() -> None:
    """A run cancelled with its block, whose store could not record it as interrupted,
    notes so on its cancellation (as ``run()`` raises it); the block's own cancellation,
    which is what leaves it, said nothing of it, and ``honeycomb run`` stopped by Ctrl-C
    said the run was kept as interrupted."""
    started = asyncio.Event()

    async def run(put: Callable[[Event], object]) -> RunResult:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError as exc:
            exc.add_note("Honeycomb could not record the run as interrupted: the store is away")
            raise
        raise AssertionError("unreachable")

    async def read() -> None:
        async with streamed(run) as events:
            async for _ in events:
                pass

    reading = asyncio.create_task(read())
    await started.wait()
    reading.cancel()
    with pytest.raises(asyncio.CancelledError) as stopped:
        await reading
    assert getattr(stopped.value, "__notes__", []) == [
        "Honeycomb could not record the run as interrupted: the store is away"
    ]
