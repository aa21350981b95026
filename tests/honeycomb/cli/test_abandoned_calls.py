"""A sync tool past its time limit is abandoned, and its thread runs on: once the run
has ended, the command says it waits for such calls, and Ctrl-C leaves them (it seemed
to hang after its last line, then printed a traceback of ``threading._shutdown``)."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

import pytest

from tests.support import ROOT

TOOLS = '''
import os

from honeycomb import tool


@tool
def city_facts(city: str) -> str:
    """Look up facts about a city.

    Args:
        city: The city's name.
    """
    with open(os.environ["GATE"]) as gate:  # blocks until the test opens it to write
        gate.read()
    return f"{city}: facts"
'''

HIVE = """\
models:
  offline: {provider: offline, latency: 0}
roles:
  planner: {description: Plans.}
  researcher:
    description: Looks up facts about cities.
    tools: [tools:city_facts]
    tool_timeout: 0.2
  aggregator: {description: Merges.}
"""

WAITING = (
    "waiting for 1 call that timed out (city_facts) to end: the run went on without it, "
    "but Python cannot stop a thread, and waits for it before the process exits; a sync "
    "tool should time out by itself, or call check_cancelled(). Ctrl-C leaves it.\n"
)


def lines_of(stream: IO[str]) -> queue.Queue[str]:
    """The lines of ``stream``, as they come ("" at its end), read by a thread."""
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line)
        lines.put("")

    threading.Thread(target=read, daemon=True).start()
    return lines


@pytest.mark.parametrize("how", ["the-call-ends", "ctrl-c"])
def test_the_command_says_it_waits_for_the_calls_it_abandoned(tmp_path: Path, how: str) -> None:
    (tmp_path / "tools.py").write_text(TOOLS)
    (tmp_path / "hive.yaml").write_text(HIVE)
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    env = {**os.environ, "GATE": str(gate), "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-m", "honeycomb", "run", "hive.yaml", "Look up facts about Oslo",
         "--plain", "--no-store"],
        cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert child.stderr is not None
        assert child.stdout is not None
        said = lines_of(child.stderr)
        told: list[str] = []
        while not told or told[-1] not in (WAITING, ""):
            told.append(said.get(timeout=60))
        assert told[-1] == WAITING, "".join(told)
        if how == "ctrl-c":
            child.send_signal(signal.SIGINT)
        else:
            with open(gate, "w"):  # the tool reads to the end, and returns
                pass
        out = child.stdout.read()
        assert child.wait(timeout=60) == 0  # the run's status: it had ended with an answer
        rest = iter(lambda: said.get(timeout=60), "")
        assert "Traceback" not in "".join(rest)
        assert "\nAnswer:\n" in out
    finally:
        child.kill()
        child.wait()
