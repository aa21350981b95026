"""``honeycomb demo`` and ``run`` on a real model, as a user runs them (README):
llama.cpp in-process (``--model local``), through the tool protocol it takes when none
is named, the JSON one. The demo must end ``ok`` or ``partial`` by its work, not by
the demo hive's wall-time budget (120 s), which would end it too. The other two
protocols meet the real model on one worker each
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


def honeycomb(
    args: list[str], folder: Path, status: int = 0, *, slow: bool = False
) -> list[dict[str, Any]]:
    """Run ``honeycomb ARGS --json`` in ``folder``; its records, after checking that it
    ended with ``status`` and that nothing of it was cut by the run's wall-time budget.
    How long it takes is the machine's (the test processes share its cores): with
    ``slow``, a run the wall time ended is taken too, and one whose workers their own
    time limit (``worker_timeout_s``) cut off, once its plan was ready and its workers
    ran (a planner with no output limit writes until the budget ends it; that the
    library's requests have one, tests/honeycomb/run/test_real_model.py checks)."""
    environment = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HONEYCOMB_DEMO_TOOL_LATENCY": "0",
        "HONEYCOMB_OUTBOX": str(folder / "outbox"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "honeycomb", *args, "--json"],
        capture_output=True, text=True, cwd=folder, env=environment, check=False,
        timeout=240,  # a hang's stop: the run's budget ends it at 120 s, loading apart
    )  # fmt: skip
    last_line = done.stdout.splitlines()[-1] if done.stdout.strip() else ""
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    last = records[-1] if records else {}
    assert last.get("event") == "run.finished", done.stderr[-2000:]
    cut = "wall_time_s" in (last.get("error") or "")  # a run its budget ends says which
    if slow and (cut or timed_out(last)):  # the machine's load, once plan and workers ran
        assert any(r["event"] == "run.plan_ready" for r in records), last["error"]
        assert any(r["event"] == "worker.finished" for r in records), last["error"]
        return records
    assert done.returncode == status, done.stderr[-2000:] + last_line[-3000:]  # why
    assert not cut, last["error"]
    return records


def timed_out(finished: dict[str, Any]) -> bool:
    """Whether a subtask of the run that ``finished`` tells of failed as its worker's
    own time limit (``worker_timeout_s``) cut it off."""
    subtasks = (finished.get("result") or {}).get("subtasks") or {}
    return any((s["error"] or {}).get("type") == "WorkerTimeout" for s in subtasks.values())


def test_the_demo_on_llama_cpp_in_process_ends_ok_or_partial(tmp_path: Path) -> None:
    records = honeycomb(["demo", TASK, "--no-store", "--model", "local"], tmp_path, slow=True)
    finished = records[-1]
    # Failed, when its workers' time limits cut every one off (the machine's load).
    assert finished["status"] in ("ok", "partial", "over_budget") or timed_out(finished), finished
    subtasks = finished["result"]["subtasks"].values()
    assert all(s["error"] for s in subtasks if s["status"] != "ok")  # each failure says why
    # Given its tools natively, SmolLM2 answered prose and called none.
    called = {r["tool"] for r in records if r["event"] == "tool_call.finished"}
    assert called, "no worker called a tool"


COURIER = """
models: {offline: {provider: offline}}
roles:
  planner:
    description: Splits the task.
  courier:
    description: Sends notes to the outbox.
    instructions: Send one message with a short subject and the note as the body.
    tools: [examples.trip.trip_tools:send_to_outbox]
    approvals: {tools: [send_to_outbox]}
    max_turns: 2
policy: {max_subtasks: 1}  # one worker calls the tool: a plan of two wrote twice as much
"""


def test_a_call_that_needs_approval_on_the_local_model_is_asked_for(tmp_path: Path) -> None:
    """A role whose tool asks for approval, on ``--model local``: its worker calls the
    tool, and the run waits for a person (exit status 3). Given the tool natively,
    SmolLM2 called none: nothing was asked, and the run ended ``ok``."""
    (tmp_path / "hive.yaml").write_text(COURIER)
    task = "Send a note to the outbox: the trip to Lisbon is booked."
    argv = ["run", "hive.yaml", task, "--store", "runs.db", "--model", "local"]
    records = honeycomb(argv, tmp_path, status=3)
    asked = [r for r in records if r["event"] == "approval.requested"]
    assert asked, records[-1]
    assert {r["tool"] for r in asked} == {"send_to_outbox"}
    assert records[-1]["status"] == "waiting"
    assert not (tmp_path / "outbox").exists()  # nothing sent before a person approves
