"""The terminal views: the live table on a terminal, plain lines, JSON lines."""

from __future__ import annotations

import asyncio
import fcntl
import io
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from rich.console import Console

from honeycomb import Executor, GuardCheck, Guards, Policy, Role, tool
from honeycomb.cli.main import main
from honeycomb.cli.view import JsonView, LiveView, PlainView, summary
from honeycomb.events import RunStarted
from honeycomb.testing import ScriptedModel
from runtime.testing import call
from tests.support.sample_tools import lookup


def executor(policy: Policy | None = None) -> Executor:
    model = ScriptedModel(lambda key: [call("lookup", {"key": key}), f"done {key}"])
    return Executor([Role(name="researcher", tools=("lookup",))], model, tools=[lookup],
                    aggregator="concat", policy=policy)  # fmt: skip


async def test_live_view_draws_the_plan_and_a_row_per_worker() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100, color_system=None)
    view = LiveView(console, "test hive")
    with view:
        async with executor().stream(
            "t", subtasks=[("researcher", "a"), ("researcher", "b")]
        ) as events:
            async for event in events:
                view.handle(event)
    text = out.getvalue()
    assert "test hive" in text
    for column in ("subtask", "role", "state", "turn", "tools", "elapsed"):
        assert column in text
    assert "s1" in text
    assert "s2" in text
    assert "ok" in text
    rows = {row.id: row for row in view.state.rows.values()}
    assert rows["s1"].tool_calls == 1
    assert rows["s1"].turn == 2
    assert view.state.phase == "ok"


async def test_plain_and_json_views_write_a_line_per_event() -> None:
    plain, lines = io.StringIO(), io.StringIO()
    plain_view, json_view = PlainView(plain), JsonView(lines)
    async with executor().stream("t", subtasks=[("researcher", "a")]) as events:
        async for event in events:
            plain_view.handle(event)
            json_view.handle(event)
    text = plain.getvalue()
    assert "plan ready" in text
    assert "s1 (researcher) started" in text
    assert "lookup ok" in text
    assert "run ok" in text
    records = [json.loads(line) for line in lines.getvalue().splitlines()]
    assert records[0]["event"] == "run.started"
    assert records[-1]["event"] == "run.finished"
    assert records[-1]["result"]["status"] == "ok"
    # The run's spending as its fields, as the result's is (it was its repr's text).
    assert records[-1]["usage"] == records[-1]["result"]["usage"]
    assert records[-1]["usage"]["model_calls"] == 2  # the worker's two turns
    assert events.result is not None
    closing = "\n".join(summary(events.result))
    for label in ("wall time", "critical path", "speedup", "tokens", "calls"):
        assert label in closing


def test_a_failed_model_call_says_what_failed_in_the_plain_and_live_views() -> None:
    """``model error in 120.17s`` alone leaves a person guessing: the error's short
    text follows it (without its class's name), on one line, cut, with any secret in
    it masked."""
    from honeycomb.run.events import PlanReady, WorkerStarted
    from honeycomb.run.plan import Plan, Subtask
    from runtime import ModelCallFinished, ModelCallRetrying, ModelCallStarted
    from runtime.secrets import add_secret

    add_secret("sk-hidden-key-123456", "API key")
    timed_out = "ModelTimeout: the model call timed out after 120s"
    refused = "ModelHTTPError: HTTP 401: bad key sk-hidden-key-123456\n" + "detail " * 60
    plan = Plan(subtasks=(Subtask(id="s1", role="researcher", instruction="a"),))
    events = [
        PlanReady(plan=plan, duration_s=0.1),
        WorkerStarted(worker="s1", role="researcher"),
        ModelCallStarted(worker="s1", turn=1),
        ModelCallRetrying(
            worker="s1", turn=1, attempt=1, status="timeout", wait_s=0.5, error=timed_out
        ),
        ModelCallFinished(worker="s1", turn=1, duration_s=120.17, status="error", error=timed_out),
        ModelCallFinished(worker="lead", turn=1, duration_s=0.2, status="error", error=refused),
    ]
    plain = io.StringIO()
    out = io.StringIO()
    live = LiveView(Console(file=out, force_terminal=True, width=160, color_system=None), "h")
    with PlainView(plain) as view, live:
        for event in events[:-1]:
            view.handle(event)
            live.handle(event)
        view.handle(events[-1])
    lines = plain.getvalue().splitlines()
    assert lines[-3].endswith("s1 turn 1: model timeout (attempt 1), retrying in 0.50s")
    assert lines[-2].endswith(
        "s1 turn 1: model error in 120.17s: the model call timed out after 120s"
    )
    last = lines[-1]
    assert "lead turn 1: model error in 0.20s: HTTP 401: bad key [API key hidden] detail" in last
    assert "sk-hidden" not in plain.getvalue()
    assert last.endswith("…")
    assert len(last) < 260
    assert "model error: the model call timed out after 120s" in out.getvalue()


def test_a_repaired_plan_is_said_before_it_is_ready() -> None:
    """The warning that a planner's plan was repaired (SmolLM2's plans depend on
    themselves) had no line: the plan showed ready as if the planner had written it so."""
    from honeycomb.run.events import PlanRepaired

    dropped = (
        "subtask 's1' depended on itself",
        "subtask 's2' depended on 's9', which is not in the plan",
    )
    plain = io.StringIO()
    with PlainView(plain) as view:
        view.handle(PlanRepaired(round=1, dropped=dropped))
        view.handle(PlanRepaired(round=2, dropped=dropped[:1]))
    first, second = plain.getvalue().splitlines()
    assert first.endswith(
        "plan repaired, dependencies dropped: subtask 's1' depended on itself; subtask 's2' "
        "depended on 's9', which is not in the plan"
    )
    assert second.endswith(
        "round 2 repaired, dependencies dropped: subtask 's1' depended on itself"
    )


def test_a_role_the_planner_sees_without_its_tools_is_said() -> None:
    """A role whose MCP server did not start was shown to the planner without its
    tools, and honeycomb run said nothing of it: a plan without the role ran as if it
    had never had them."""
    from honeycomb.run.events import RoleToolsMissing

    error = "McpServerError: MCP server 'time' cannot be started: [Errno 2] No such file"
    plain = io.StringIO()
    with PlainView(plain) as view:
        view.handle(RoleToolsMissing(round=1, role="clock", error=error))
        view.handle(RoleToolsMissing(round=3, role="clock", error=error))
    first, third = plain.getvalue().splitlines()
    said = "MCP server 'time' cannot be started: [Errno 2] No such file"
    assert first.endswith(f"the planner sees clock without its tools: {said}")
    assert third.endswith(f"the lead (round 3) sees clock without its tools: {said}")


async def test_the_closing_lines_say_when_subtasks_ran_in_waves() -> None:
    result = await executor(Policy(max_workers=2)).run(
        "t", subtasks=[("researcher", str(i)) for i in range(5)]
    )
    assert "subtasks             5    (2 at a time: the policy's max_workers)" in summary(result)
    small = await executor().run("t", subtasks=[("researcher", "a")])
    assert not any(line.startswith("subtasks") for line in summary(small))


@tool
async def listing() -> str:
    """List files (one of whose names is not UTF-8)."""
    return "report\udcff.txt"


async def test_the_json_view_writes_text_with_lone_surrogates_as_valid_json() -> None:
    lines = io.StringIO()
    view = JsonView(lines)
    model = ScriptedModel([call("listing"), "found report\udcff.txt"])
    runs = Executor([Role(name="w", tools=("listing",))], model, tools=[listing],
                    aggregator="concat")  # fmt: skip
    async with runs.stream("t \udcff", subtasks=[("w", "a")]) as events:
        async for event in events:
            view.handle(event)
    text = lines.getvalue()
    text.encode("utf-8")  # valid: each surrogate replaced
    records = [json.loads(line) for line in text.splitlines()]
    assert records[0]["task"] == "t \ufffd"
    assert "found report\ufffd.txt" in records[-1]["result"]["answer_text"]


async def test_live_view_shows_the_aggregators_answer_as_it_is_written() -> None:
    answer = "Lisbon is sunny. Porto is rainy. Take a coat."

    def script(key: str) -> list[object]:
        return [answer] if key.endswith("/aggregator") else [f"done {key}"]

    roles = [Role(name="researcher"), Role(name="aggregator")]
    model = ScriptedModel(script)  # type: ignore[arg-type]
    out = io.StringIO()
    view = LiveView(Console(file=out, force_terminal=True, width=100, color_system=None), "h")
    partial: list[str] = []  # the answer panel's text after each event, drawn
    with view:
        async with Executor(roles, model).stream(
            "t", subtasks=[("researcher", "a"), ("researcher", "b")]
        ) as events:
            async for event in events:
                view.handle(event)
                drawn = io.StringIO()
                Console(file=drawn, width=100, color_system=None).print(view)
                if "answer" in drawn.getvalue() and view.state.answer:
                    partial.append(view.state.answer)
    assert partial[-1] == answer
    assert partial[0] != answer  # drawn while it was being written
    assert answer.startswith(partial[0])
    after = io.StringIO()  # the frame left on the terminal: the command prints the answer
    Console(file=after, width=100, color_system=None).print(view)
    assert "Take a coat." not in after.getvalue()
    assert "s1" in after.getvalue()
    assert "done" not in view.state.answer  # the workers' answers are not the answer


async def test_live_view_shows_no_workers_text_the_runs_guards_held_as_the_answer() -> None:
    """The run's output guards check an answer made of its workers' (concat): their
    text is held until the guards pass it, so it comes as the run aggregates, and the
    live view drew it as the aggregator's answer being written."""
    ok = Guards(output=(lambda check: None,))
    ex = Executor([Role(name="w")], ScriptedModel(["done"]), aggregator="concat", guards=ok)
    view = LiveView(Console(file=io.StringIO(), force_terminal=True, color_system=None), "h")
    texts: list[str | None] = []  # whose text came
    with view:
        async with ex.stream("t", subtasks=[("w", "a"), ("w", "b")]) as events:
            async for event in events:
                view.handle(event)
                if event.kind == "model_call.text":
                    texts.append(event.worker)
    assert texts == ["s1", "s2"]  # released once the run's guards passed the answer
    assert view.state.answer == ""


def _on_a_terminal(args: list[str], typed: bytes, cwd: Path, limit_s: float = 90.0) -> str:
    """What ``honeycomb ARGS`` shows on a terminal 120 columns wide (escape sequences
    left out), with ``typed`` typed ahead."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 60, 120, 0, 0))
    env = {**os.environ, "HONEYCOMB_DEMO_TOOL_LATENCY": "0",
           "HONEYCOMB_OUTBOX": str(cwd / "outbox"), "COLUMNS": "120"}  # fmt: skip
    child = subprocess.Popen(
        [sys.executable, "-m", "honeycomb", *args],
        cwd=cwd, env=env, stdin=terminal, stdout=terminal, stderr=terminal,
    )  # fmt: skip
    os.close(terminal)
    os.write(controller, typed)
    shown = bytearray()
    ends = time.monotonic() + limit_s
    try:
        while time.monotonic() < ends:
            if select.select([controller], [], [], 0.5)[0]:
                try:
                    chunk = os.read(controller, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                shown += chunk
            elif child.poll() is not None:
                break
        assert child.wait(timeout=10) == 0, shown.decode(errors="replace")[-3000:]
    finally:
        if child.poll() is None:
            child.kill()
        os.close(controller)
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown.decode(errors="replace"))


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_on_a_terminal_a_call_asked_about_needs_approval_and_the_answer_is_shown_once(
    tmp_path: Path,
) -> None:
    shown = _on_a_terminal(
        ["demo", "--approve", "--latency", "0.2", "--no-store"], b"a\n", tmp_path
    )
    asked = shown.index("Approval needed: s4 (courier)")
    (row,) = re.findall(r"s4 +courier .*", shown[:asked])[-1:]
    assert "needs approval" in row, row  # the frame left on screen while it asks
    final_frame = shown[shown.rindex("honeycomb · trip-planner") : shown.index("\nAnswer:")]
    assert re.search(r"s4 +courier", final_frame)
    assert "The cost comes to 361" not in final_frame  # the answer follows it, once
    assert shown.count("\nAnswer:") == 1
    assert "The cost comes to 361" in shown[shown.index("\nAnswer:") :]


def test_the_views_clocks_start_with_the_run_not_as_the_view_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The command makes its view, then builds the run's models (importing openai for a
    # hive that declares an endpoint, loading a GGUF file), then enters the view as
    # the run starts: the first line said '[  1.79s] run ... started' for the starter.
    now = [100.0]
    monkeypatch.setattr(time, "perf_counter", lambda: now[0])
    out, screen = io.StringIO(), io.StringIO()
    plain = PlainView(out)
    live = LiveView(Console(file=screen, force_terminal=True, width=80), "hive")
    now[0] += 1.8  # the models being built
    with plain, live:
        plain.handle(RunStarted(run_id="r", task="t"))
        now[0] += 0.25
    assert out.getvalue().startswith("[  0.00s] run r started: t\n")
    assert "planning ·  0.25s" in screen.getvalue()  # its last frame, as the run ended


def test_force_color_into_a_pipe_gets_the_plain_lines_not_the_live_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # FORCE_COLOR (which CI jobs set to colour their logs) made rich take the pipe for
    # a terminal, and the live table was redrawn into it: every frame, cursor moves
    # and all, in the log.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert main(["demo", "--latency", "0", "--no-store"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "] s4 (courier) started" in out  # the plain view's lines


async def test_the_live_view_says_checking_while_a_guard_checks_an_answer() -> None:
    """A worker whose answer a judge checked read ``running`` for as long as the check
    took (no event said a check began): it reads ``checking``, and, its answer passed,
    ends ``ok``."""
    view = LiveView(Console(file=io.StringIO(), force_terminal=True, color_system=None), "h")
    checked = asyncio.Event()

    async def slow_judge(check: GuardCheck) -> None:
        await asyncio.wait_for(checked.wait(), 10)  # until the view says so

    role = Role(name="clerk", guards=Guards(output=(slow_judge,)))
    states: list[str] = []
    with view:
        async with Executor([role], ScriptedModel(["fine"])).stream(
            "t", subtasks=[("clerk", "say")]
        ) as events:
            async for event in events:
                view.handle(event)
                if "s1" in view.state.rows:
                    states.append(view.state.rows["s1"].state)
                    if states[-1] == "checking":
                        checked.set()
    assert "checking" in states
    assert states[-1] == "ok"
