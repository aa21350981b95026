"""The innermost handler: the tool itself."""

from __future__ import annotations

import asyncio

import pytest

from runtime.errors import ModelRetry
from runtime.events import Caller
from runtime.tools import ToolContext, idempotency_key, tool
from runtime.tools.layers import Outcome, RunTool
from tests.support.layers import look, prepared


@tool
def whoami(context: ToolContext) -> str:
    """Say who calls."""
    return f"{context.worker} {context.run_id} {context.turn} {context.idempotency_key}"


@tool
async def broken(why: str) -> str:
    """Break."""
    if why == "retry":
        raise ModelRetry("give a number")
    raise ValueError(why)


async def test_a_tool_runs_and_what_it_returns_is_its_observation() -> None:
    run = RunTool(Caller(), max_output_chars=100)
    assert await run(prepared(look, key="k")) == Outcome(status="ok", content="k")
    assert await run.admit([prepared(look, key="k")]) == [prepared(look, key="k")]


async def test_a_tool_that_raises_is_an_error_observation() -> None:
    run = RunTool(Caller(), max_output_chars=100)
    raised = await run(prepared(broken, why="no"))
    assert raised == Outcome(
        status="error", content="Error: tool 'broken' raised ValueError: no", error="ValueError: no"
    )
    retry = await run(prepared(broken, why="retry"))
    assert (retry.content, retry.error) == ("Error: give a number", "give a number")


@tool
async def awaits_what_was_cancelled(key: str) -> str:
    """Await something another task cancelled."""
    future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    future.cancel()
    return await future


async def test_a_tool_that_raises_a_cancellation_of_its_own_is_an_error() -> None:
    """It ends its call, not its worker, which nobody cancelled."""
    run = RunTool(Caller(), max_output_chars=100)
    cancelled = await run(prepared(awaits_what_was_cancelled, key="k"))
    assert cancelled.status == "error"
    assert cancelled.content.startswith("Error: tool 'awaits_what_was_cancelled' raised Cancel")


async def test_a_call_whose_worker_is_cancelled_is_cancelled_with_it() -> None:
    run = RunTool(Caller(), max_output_chars=100)
    started = asyncio.Event()

    @tool
    async def waits(key: str) -> str:
        """Wait for ever."""
        started.set()
        await asyncio.Event().wait()
        return key

    call = asyncio.ensure_future(run(prepared(waits, key="k")))
    await started.wait()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call


async def test_a_tool_is_given_its_context_with_a_key_of_the_scope() -> None:
    run = RunTool(Caller(worker="w", run_id="r"), max_output_chars=200, scope="s")
    outcome = await run(prepared(whoami, turn=4))
    assert outcome.content == f"w r 4 {idempotency_key('s', 'w', 4, 'c0')}"
