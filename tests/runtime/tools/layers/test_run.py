"""The innermost handler: the tool itself."""

from __future__ import annotations

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


async def test_a_tool_is_given_its_context_with_a_key_of_the_scope() -> None:
    run = RunTool(Caller(worker="w", run_id="r"), max_output_chars=200, scope="s")
    outcome = await run(prepared(whoami, turn=4))
    assert outcome.content == f"w r 4 {idempotency_key('s', 'w', 4, 'c0')}"
