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
    if why.startswith("retry"):
        raise ModelRetry("give a number" if why == "retry" else why)
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


async def test_what_a_failure_says_is_cut_as_output_is() -> None:
    # An error quoting a whole input (5 MB of it) went whole into the observation,
    # and so into the model's context, the span, the log and the store.
    run = RunTool(Caller(), max_output_chars=100)
    for why in ("x" * 5_000_000, "retry" * 1_000_000):
        failed = await run(prepared(broken, why=why))
        assert failed.error is not None
        assert len(failed.content) < 200
        assert len(failed.error) < 200
    raised = await run(prepared(broken, why="x" * 5_000_000))
    assert (
        raised.error
        == f"ValueError: {'x' * 88}\n[... error cut: 4,999,912 of 5,000,012 characters not shown]"
    )
    assert raised.content == f"Error: tool 'broken' raised {raised.error}"


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
