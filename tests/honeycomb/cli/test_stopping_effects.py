"""Ctrl-C while a sync side-effecting tool runs: the run stops once the tool's thread
has ended (it cannot be interrupted, and what it did is kept), and the command says so
at once, rather than seeming to hang for as long as the tool takes."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(60)

SENDING = """
import asyncio, sys
from honeycomb.cli.exits import stopped_by_signals
from runtime import tool
from runtime.tools.threads import in_thread

@tool(side_effects=True)
def send_message(to: str) -> str:
    \"\"\"Send a message.\"\"\"
    print("sending", flush=True)
    sys.stdin.readline()  # until the test lets it end
    return "sent"

async def main() -> None:
    with stopped_by_signals([]):
        try:
            await in_thread(send_message, {"to": "ann"})
        except asyncio.CancelledError:
            print("stopped", flush=True)

asyncio.run(main())
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="sends POSIX signals")
def test_a_signal_while_a_sync_side_effect_runs_says_what_the_stop_waits_for() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", SENDING], text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert child.stdin is not None
    assert child.stdout is not None
    assert child.stderr is not None
    try:
        assert child.stdout.readline() == "sending\n"
        child.send_signal(signal.SIGINT)
        assert child.stderr.readline() == "\n"
        assert child.stderr.readline() == (
            "SIGINT: the run stops once send_message has ended: a sync side-effecting call "
            "cannot be interrupted, and what it did is kept. SIGINT again stops at once, and "
            "a resumed run is told its outcome is unknown\n"
        )
        child.stdin.write("\n")  # the tool ends
        child.stdin.flush()
        out, _ = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert out == "stopped\n"
