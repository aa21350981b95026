"""Tool faults survived: in a run of several workers, one worker's tool hangs, raises,
returns a huge output, or returns a value that is not JSON; that worker gets an
observation saying so and answers, and every other worker's result is intact."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest

from honeycomb import Executor, Policy, Role, RunResult, tool
from honeycomb.events import ToolCallFinished
from honeycomb.testing import FunctionModel
from runtime import AssistantMessage, Event, ModelRequest, ToolMessage
from runtime.testing import call

pytestmark = pytest.mark.timeout(30)  # a tool that hangs the event loop fails here

WORKERS = 6
FAULTY = "s3"
LIMIT = 20_000  # DispatchPolicy.max_output_chars, the default


@tool
async def fetch(key: str) -> str:
    """Fetch the value of a key."""
    await anyio.sleep(0.01)
    return f"value of {key}"


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no str for you")

    def __repr__(self) -> str:
        raise RuntimeError("no repr either")


class Opaque:
    def __str__(self) -> str:
        return "an opaque object"


def numbers() -> Iterator[int]:
    yield from (1, 2, 3)


def answer(request: ModelRequest) -> AssistantMessage | str:
    """Calls its worker's tool once, then answers with the observation it got."""
    last = request.messages[-1]
    if isinstance(last, ToolMessage):
        return f"{last.status}: {last.content}"
    worker = (request.conversation or "").rsplit("/", 1)[-1]
    if worker == FAULTY:
        return AssistantMessage(tool_calls=(call("misbehave", {"key": worker}),))
    return AssistantMessage(tool_calls=(call("fetch", {"key": worker}),))


async def run_with(misbehave: Any) -> tuple[RunResult, list[Event]]:
    events: list[Event] = []
    role = Role(name="researcher", tools=("fetch", "misbehave"))
    executor = Executor(
        [role],
        FunctionModel(answer),
        tools=[fetch, misbehave],
        aggregator="concat",
        policy=Policy(max_workers=WORKERS),
        on_event=[events.append],
    )
    plan = [("researcher", f"part {i}") for i in range(WORKERS)]
    result = await executor.run("t", subtasks=plan, run_id="r")
    return result, events


def returning(value: Callable[[], Any]) -> Any:
    @tool(name="misbehave")
    def misbehave(key: str) -> Any:
        """Misbehave."""
        return value()

    return misbehave


def assert_others_intact(result: RunResult) -> str:
    """Every worker finished; the others saw their own values. Returns the faulty
    worker's answer."""
    assert result.status == "ok"
    assert all(s.ok for s in result.subtasks.values())
    for sid, outcome in result.subtasks.items():
        if sid != FAULTY:
            assert outcome.text == f"ok: value of {sid}"
    return result.subtasks[FAULTY].text


def tool_status(events: list[Event]) -> str:
    (finished,) = [e for e in events if isinstance(e, ToolCallFinished) and e.tool == "misbehave"]
    return finished.status


async def test_a_tool_that_hangs_is_cut_by_its_timeout() -> None:
    woke = anyio.Event()

    @tool(name="misbehave", timeout=0.2)
    async def misbehave(key: str) -> str:
        """Hang."""
        await anyio.sleep(30)
        woke.set()
        return "never"

    started = time.perf_counter()
    result, events = await run_with(misbehave)
    elapsed = time.perf_counter() - started

    text = assert_others_intact(result)
    assert text == "timeout: Error: tool 'misbehave' timed out after 0.2s and was cancelled."
    assert tool_status(events) == "timeout"
    # The tool hangs 30 s; cut at 0.2 s, the run ends long before: a third of the hang
    # leaves seconds to a loaded machine and still tells a wait for it.
    assert elapsed < 30 / 3, "the run waited for the hung tool"
    assert not woke.is_set()


async def test_a_tool_that_raises_becomes_an_error_observation() -> None:
    def boom() -> Any:
        raise ConnectionResetError("peer went away")

    result, events = await run_with(returning(boom))

    text = assert_others_intact(result)
    assert text == "error: Error: tool 'misbehave' raised ConnectionResetError: peer went away"
    assert tool_status(events) == "error"


async def test_a_tool_whose_own_await_is_cancelled_becomes_an_error_observation() -> None:
    """It awaited what another task cancelled: its worker was not cancelled, and goes on."""

    @tool(name="misbehave")
    async def misbehave(key: str) -> str:
        """Await what was cancelled."""
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        future.cancel()
        return await future

    result, events = await run_with(misbehave)

    text = assert_others_intact(result)
    assert text.startswith("error: Error: tool 'misbehave' raised CancelledError")
    assert tool_status(events) == "error"


@pytest.mark.parametrize(
    "huge",
    [lambda: "y" * 5_000_000, lambda: list(range(2_000_000)), lambda: {"rows": ["row"] * 10**6}],
    ids=["text", "list", "nested"],
)
async def test_a_huge_output_is_cut_to_the_policy_limit(huge: Callable[[], Any]) -> None:
    result, events = await run_with(returning(huge))

    text = assert_others_intact(result)
    assert text.startswith("ok: ")
    shown, marker = text.removeprefix("ok: ").rsplit("\n", 1)
    assert len(shown) == LIMIT
    assert marker.startswith("[... output cut")
    assert tool_status(events) == "ok"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (Opaque, '"an opaque object"'),
        (lambda: {3, 1, 2}, "[1,2,3]"),
        (lambda: b"\xffbinary\x00", "\ufffdbinary\x00"),  # bytes: their text, as a str
        (numbers, "[1,2,3]"),
        (Unprintable, '"<Unprintable object that cannot be shown>"'),
        (lambda: {"when": Opaque(), "why": Unprintable()}, None),
    ],
    ids=["object", "set", "bytes", "generator", "str-raises", "nested"],
)
async def test_a_value_that_is_not_json_is_shown_as_text(
    value: Callable[[], Any], shown: str | None
) -> None:
    result, events = await run_with(returning(value))

    text = assert_others_intact(result)
    if shown is None:
        shown = '{"when":"an opaque object","why":"<Unprintable object that cannot be shown>"}'
    assert text == f"ok: {shown}"
    assert tool_status(events) == "ok"


async def test_an_endless_generator_is_read_only_as_far_as_it_can_be_shown() -> None:
    result, _ = await run_with(returning(itertools.count))

    text = assert_others_intact(result)
    shown, marker = text.removeprefix("ok: ").rsplit("\n", 1)
    assert shown.startswith("[0,1,2,3,")
    assert len(shown) == LIMIT
    assert marker == f"[... output cut at {LIMIT:,} characters; the rest not shown]"
