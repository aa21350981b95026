"""The innermost handler's time limit: around the tool and nothing else."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from runtime.events import Caller
from runtime.tools import Tool, tool
from runtime.tools.layers import RunTool, run
from tests.support.layers import look, prepared


@tool(timeout=0.05)
async def hangs(key: str) -> str:
    """Never answers."""
    await asyncio.Event().wait()
    return key


@tool
async def hangs_unless_limited(key: str) -> str:
    """Never answers either, and sets no limit of its own."""
    await asyncio.Event().wait()
    return key


@tool(side_effects=True)
def post(to: str) -> str:
    """Post a letter (sync, side-effecting)."""
    return to


def handler(default_timeout: float | None = None) -> RunTool:
    return RunTool(Caller(), max_output_chars=100, default_timeout=default_timeout)


async def test_a_call_past_its_tools_limit_is_cut_and_says_so() -> None:
    began = time.perf_counter()
    outcome = await handler()(prepared(hangs, key="k"))
    assert time.perf_counter() - began < 2
    assert outcome.status == "timeout"
    assert outcome.content == "Error: tool 'hangs' timed out after 0.05s and was cancelled."
    assert outcome.error == outcome.content


async def test_the_default_limit_holds_when_the_tool_sets_none() -> None:
    cut = await handler(0.05)(prepared(hangs_unless_limited, key="k"))
    assert cut.status == "timeout"
    assert "after 0.05s" in cut.content
    assert (await handler(None)(prepared(look, key="k"))).status == "ok"


async def test_a_sync_side_effect_cut_before_its_thread_took_it_says_it_never_ran(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    watched: list[threading.Event | None] = []

    async def no_thread_free(
        found: Tool[Any, Any], kwargs: dict[str, Any], begun: threading.Event | None
    ) -> Any:
        watched.append(begun)  # never set: no thread ever took the call up
        await asyncio.Event().wait()

    monkeypatch.setattr(run, "run_tool", no_thread_free)
    outcome = await handler(0.05)(prepared(post, to="ann"))
    assert watched[0] is not None  # the handler watches for its thread
    assert outcome.status == "timeout"
    assert "before it started: it did not run" in outcome.content


async def test_a_limit_of_the_tools_own_that_runs_out_is_its_failure_not_a_timeout() -> None:
    from runtime.concurrency import within

    @tool
    async def own_limit(key: str) -> str:
        """Waits under a limit of its own."""
        with within(0.01):
            await asyncio.Event().wait()
        return key

    outcome = await handler(None)(prepared(own_limit, key="k"))
    assert outcome.status == "error"
    assert outcome.content.startswith("Error: tool 'own_limit' raised TimedOut")
