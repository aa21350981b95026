"""``honeycomb demo`` on a real model, as a user runs it (README): llama.cpp in-process
(``--model local``) with the native tool protocol. It must end ``ok`` or ``partial`` by
its work, not by the demo hive's wall-time budget (120 s), which would end it too. The
other two protocols meet the real model on one worker each
(tests/honeycomb/run/test_real_model.py: a whole demo is a minute of CPU), and the
demo's run with ``--tool-protocol json`` is replayed from its recording
(tests/examples/test_trip_cassette.py).
(``--model NAME --base-url URL`` takes the same path through the library to a llama.cpp
server of its own: the planned run of tests/honeycomb/run/test_real_model.py goes that
way, to the session's server.)

What it rests on: every model call has an output limit (a planner without one
writes until the run's wall budget ends it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import ROOT
from tests.support.llama import REAL_MODEL

pytestmark = [*REAL_MODEL, pytest.mark.timeout(300)]

TASK = (
    "Compare the weather in Lisbon and Porto, work out the cost of 2 nights at 95 euros, "
    "and send the summary to the outbox."
)
"""Shorter than the demo's own task (the same tools), to keep the suite quick."""


def demo(args: list[str], folder: Path) -> dict[str, Any]:
    """Run ``honeycomb demo ... --json`` in ``folder``; its last record (run.finished),
    after checking that it ended with status 0 and that nothing of it was cut by the
    run's wall-time budget (how long it took is the machine's: the test processes share
    its cores)."""
    environment = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HONEYCOMB_DEMO_TOOL_LATENCY": "0",
        "HONEYCOMB_OUTBOX": str(folder / "outbox"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "honeycomb", "demo", TASK, "--json", "--no-store", *args],
        capture_output=True, text=True, cwd=folder, env=environment, check=False,
        timeout=240,  # a hang's stop: the run's budget ends it at 120 s, loading apart
    )  # fmt: skip
    last_line = done.stdout.splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, done.stderr[-2000:] + last_line[-3000:]  # its subtasks' errors
    last: dict[str, Any] = json.loads(last_line)
    assert last["event"] == "run.finished"
    # A run its budget ends is over_budget, and says which budget: not the wall time's.
    assert "wall_time_s" not in json.dumps(last), last["error"]
    return last


def test_the_demo_on_llama_cpp_in_process_ends_ok_or_partial(tmp_path: Path) -> None:
    finished = demo(["--model", "local"], tmp_path)
    assert finished["status"] in ("ok", "partial"), finished
    subtasks = finished["result"]["subtasks"].values()
    assert all(s["error"] for s in subtasks if s["status"] != "ok")  # each failure says why
