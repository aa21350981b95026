"""``runtime.tools.threads``: the calls abandoned when cancelled are listed while their
threads run (a command waits for them, saying so, before its process exits), and only
while they run."""

from __future__ import annotations

import asyncio
import contextlib
import threading

import anyio.to_thread

from runtime.concurrency import TimedOut, within
from runtime.tools.threads import abandoned_when_cancelled, still_running


def ours() -> list[str]:
    return [name for name, _ in still_running() if name.startswith("test-")]


async def test_an_abandoned_call_is_listed_until_its_thread_ends() -> None:
    started, release = threading.Event(), threading.Event()

    def blocked() -> str:
        started.set()
        release.wait(30)
        return "done"

    call = asyncio.create_task(abandoned_when_cancelled(blocked, "test-blocked"))
    await anyio.to_thread.run_sync(started.wait, 30)
    assert ours() == []  # running, not abandoned
    call.cancel()
    await asyncio.gather(call, return_exceptions=True)
    [ended] = [e for n, e in still_running() if n == "test-blocked"]
    release.set()
    assert await anyio.to_thread.run_sync(ended.wait, 30)
    assert ours() == []
    assert await abandoned_when_cancelled(lambda: "fine", "test-fine") == "fine"
    assert ours() == []  # it ended, never abandoned


async def test_a_call_cancelled_before_its_thread_took_it_up_is_not_listed() -> None:
    # With the only thread's token held here, the call waits for it, and is cancelled
    # there: listed, it would be waited for forever.
    limiter = anyio.to_thread.current_default_thread_limiter()
    tokens, limiter.total_tokens = limiter.total_tokens, 1
    holder = object()
    await limiter.acquire_on_behalf_of(holder)
    try:
        with contextlib.suppress(TimedOut), within(0.05):
            await abandoned_when_cancelled(lambda: "never", "test-never")
        assert ours() == []
    finally:
        limiter.release_on_behalf_of(holder)
        limiter.total_tokens = tokens
    assert ours() == []
