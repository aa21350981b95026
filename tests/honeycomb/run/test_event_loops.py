"""One Executor serves one event loop at a time: consecutive ``asyncio.run()`` calls
(a script's, a worker process's), whatever the last loop left held in its sessions'
locks, its slots and the locks of ``exclusive`` tools; and a second loop at once
(another thread's) is refused at once, saying what to do, rather than left to hang
or to break the locks."""

from __future__ import annotations

import asyncio
import threading

import anyio
import pytest

from honeycomb import Executor, OfflineModel, Policy, Role, tool
from honeycomb.errors import EventLoopConflict
from honeycomb.testing import FunctionModel
from runtime import AssistantMessage, ModelRequest, ToolMessage
from runtime.testing import call
from tests.support.concurrency import Overlap
from tests.support.loops import LIMIT_S, LoopInThread, stranded
from tests.support.model_requests import Answer

pytestmark = pytest.mark.timeout(120)  # a failsafe: nothing here waits on a clock


class Printer:
    """An Executor whose workers print their subtask's page with an ``exclusive`` tool,
    with one model slot and one tool slot. A page named ``stall`` (or a subtask that
    says ``think forever``) holds the lock and the tool slot (the model slot) until
    cancelled, once it has told ``holding`` (an event of its loop) and ``held`` (an
    event of the threads)."""

    def __init__(self) -> None:
        self.holding: dict[str, asyncio.Event] = {}
        self.held = threading.Event()
        self.thinking = Overlap()  # model calls in flight, but the stalled ones
        self.printing = Overlap()  # tool calls in flight, but the stalled ones

        @tool(exclusive="printer")
        async def print_page(page: str) -> str:
            """Print a page."""
            if page == "stall":
                await self.stall("tool")
            async with self.printing:
                await asyncio.sleep(0)
            return f"printed {page}"

        async def think(request: ModelRequest) -> Answer:
            subtask = str(request.messages[1].content)
            if any(isinstance(m, ToolMessage) for m in request.messages):
                return f"done: {request.messages[-1].content}"
            if "think forever" in subtask:
                await self.stall("model")
            async with self.thinking:
                await asyncio.sleep(0)
            return AssistantMessage(tool_calls=(call("print_page", {"page": subtask.split()[-1]}),))

        self.executor = Executor(
            [Role(name="printer", tools=("print_page",))],
            FunctionModel(think),
            tools=[print_page],
            aggregator="concat",
            policy=Policy(model_concurrency=1, tool_concurrency=1),
        )

    async def stall(self, what: str) -> None:
        self.holding.setdefault(what, asyncio.Event()).set()
        self.held.set()
        await asyncio.Event().wait()

    async def holds(self, what: str, subtask: str) -> asyncio.Task[object]:
        """A run of ``subtask`` on the running loop, once it holds ``what``."""
        self.holding[what] = asyncio.Event()
        run = asyncio.get_running_loop().create_task(
            self.executor.run("print", subtasks=[("printer", subtask)])
        )
        await self.holding[what].wait()
        return run

    async def prints(self, *pages: str) -> list[str]:
        with anyio.fail_after(LIMIT_S):  # a failsafe: a slot or lock left held hangs it
            result = await self.executor.run(
                "print", subtasks=[("printer", f"print {page}") for page in pages]
            )
        assert result.status == "ok", [str(f.error) for f in result.failures]
        return [s.text for s in result.subtasks.values()]


def test_a_session_takes_messages_at_once_in_consecutive_event_loops() -> None:
    roles = [Role(name="planner"), Role(name="researcher"), Role(name="aggregator")]
    session = Executor(roles, OfflineModel(latency=0)).session("user-1", busy="wait")

    async def two(tag: str) -> list[str]:
        results = await asyncio.gather(
            session.run(f"Weather in Lisbon {tag}?"), session.run(f"And Porto {tag}?")
        )
        return [r.status for r in results]

    assert asyncio.run(two("a")) == ["ok", "ok"]
    assert asyncio.run(two("b")) == ["ok", "ok"]  # the lock the first loop had is not this one's
    assert [(t.turn, t.status) for t in asyncio.run(session.turns())] == [
        (1, "ok"),
        (2, "ok"),
        (3, "ok"),
        (4, "ok"),
    ]


def test_slots_and_exclusive_locks_a_stopped_loop_holds_are_free_on_the_next() -> None:
    printer = Printer()
    tool_held = lambda: printer.holds("tool", "print stall")  # noqa: E731
    model_held = lambda: printer.holds("model", "think forever")  # noqa: E731

    with stranded(tool_held, model_held):  # the lock, the tool slot and the model slot
        assert asyncio.run(printer.prints("1", "2")) == ["done: printed 1", "done: printed 2"]
        assert asyncio.run(printer.prints("3", "4")) == ["done: printed 3", "done: printed 4"]
    assert asyncio.run(printer.prints("5", "6")) == ["done: printed 5", "done: printed 6"]
    # Each loop's slots still bound it: one model call and one tool call at a time.
    assert (printer.thinking.peak, printer.printing.peak) == (1, 1)


def test_a_second_event_loop_at_once_is_refused_at_once_saying_what_to_do() -> None:
    printer = Printer()
    session = printer.executor.session("user-1")
    with LoopInThread() as there:
        holding = there.start(printer.holds("tool", "print stall"))
        assert printer.held.wait(LIMIT_S)
        with pytest.raises(EventLoopConflict, match="this Executor is in use by another") as run:
            asyncio.run(printer.prints("1"))
        assert "for each thread" in str(run.value)
        with pytest.raises(EventLoopConflict, match="this Executor"):
            asyncio.run(session.run("Print page 1"))  # refused before a turn is kept
        there.call(holding.result(LIMIT_S).cancel)  # a task of that loop's: cancelled there
        there.run(asyncio.sleep(0))
        # That loop still serves: its own runs go on, the locks and slots whole.
        assert there.run(printer.prints("2")) == ["done: printed 2"]
    assert asyncio.run(printer.prints("3")) == ["done: printed 3"]  # that loop stopped
    assert asyncio.run(session.turns()) == []
