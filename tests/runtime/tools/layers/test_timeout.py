"""The time-limit layer alone, with a fake next layer."""

from __future__ import annotations

import time

from runtime.tools import tool
from runtime.tools.layers import TimeLimit
from tests.support.layers import Next, look, prepared


@tool(timeout=0.05)
async def quick(key: str) -> str:
    """Must be quick."""
    return key


@tool(side_effects=True)
def post(to: str) -> str:
    """Post a letter (sync, side-effecting)."""
    return to


async def test_a_call_past_its_tools_limit_is_cut_and_says_so() -> None:
    began = time.perf_counter()
    outcome = await TimeLimit(Next(delay_s=5), None)(prepared(quick, key="k"))
    assert time.perf_counter() - began < 2
    assert outcome.status == "timeout"
    assert outcome.content == "Error: tool 'quick' timed out after 0.05s and was cancelled."
    assert outcome.error == outcome.content


async def test_the_default_limit_holds_when_the_tool_sets_none() -> None:
    assert (await TimeLimit(Next(delay_s=5), 0.05)(prepared(look, key="k"))).status == "timeout"
    assert (await TimeLimit(Next(), None)(prepared(look, key="k"))).status == "ok"


async def test_a_sync_side_effect_cut_before_its_thread_took_it_says_it_never_ran() -> None:
    inner = Next(delay_s=5)  # it never sets begun: its thread never took the call up
    outcome = await TimeLimit(inner, 0.05)(prepared(post, to="ann"))
    assert inner.called[0].begun is not None  # the layer watches for it
    assert "before it started: it did not run" in outcome.content
