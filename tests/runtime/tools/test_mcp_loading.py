"""The first MCP server a process starts loads the ``mcp`` SDK, a second or two of
imports: off the event loop, which goes on meanwhile (a run's other workers are not
stalled by one worker's server). In fresh interpreters, where the SDK is not loaded yet."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from runtime import McpServerError, ModelRetry
from tests.support import ROOT
from tests.support.mcp_servers import running, sdk_server

pytestmark = pytest.mark.timeout(120)

IMPORT_ALONE = textwrap.dedent(
    """
    import json, time
    began = time.perf_counter()
    import runtime.tools._mcp_sdk
    print(json.dumps({"import_s": time.perf_counter() - began}))
    """
)

STARTED_BESIDE_A_TICKER = textwrap.dedent(
    """
    import asyncio, json, sys, time
    from runtime import McpServers
    from tests.support.mcp_servers import sdk_server

    assert "runtime.tools._mcp_sdk" not in sys.modules

    async def main() -> None:
        longest, last, done = 0.0, time.perf_counter(), asyncio.Event()

        async def tick() -> None:
            nonlocal longest, last
            while not done.is_set():
                await asyncio.sleep(0.005)
                now = time.perf_counter()
                longest, last = max(longest, now - last), now

        ticker = asyncio.create_task(tick())
        async with McpServers([sdk_server()]) as live:
            await live.session("t", set())
        done.set()
        await ticker
        print(json.dumps({"longest_s": longest}))

    asyncio.run(main())
    """
)


def _measured(script: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=100,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    found: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_the_first_server_loads_the_sdk_without_stalling_the_event_loop() -> None:
    import_s = min(_measured(IMPORT_ALONE)["import_s"] for _ in range(2))
    longest_s = _measured(STARTED_BESIDE_A_TICKER)["longest_s"]
    # With the SDK imported in the loop, the ticker would stall for the whole import;
    # in a thread it waits only for its share of the interpreter's lock.
    assert longest_s < import_s / 2, (longest_s, import_s)


async def test_a_server_started_without_the_sdk_says_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without the ``mcp`` SDK (the extra not installed), a server's start fails as a
    start does, saying what to install: not with the import's error out of the block."""
    monkeypatch.delitem(sys.modules, "runtime.tools._mcp_sdk", raising=False)
    monkeypatch.setitem(sys.modules, "mcp", None)  # as if it were not installed
    async with running(sdk_server()) as run:
        with pytest.raises(McpServerError) as info:
            await run.listed("t")
        with pytest.raises(ModelRetry, match=r"pip install 'honeycomb-agents\[mcp\]'"):
            await run.call("t", "pid", {})
    assert str(info.value).startswith("MCP server 't' cannot start: the mcp SDK cannot be imported")
    assert str(info.value).endswith("pip install 'honeycomb-agents[mcp]'")
