"""Tracing where it meets the other features: the wall-time budget cutting workers
off, a turn whose calls wait for a person, text no view can print as it is, and a
terminal narrower than the legend."""

from __future__ import annotations

import asyncio
import io
import os
from pathlib import Path

import pytest
from rich.console import Console

from honeycomb import BudgetExceeded, Budgets, Executor, Policy, Role, tool
from honeycomb.cli.main import main
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from honeycomb.trace.html import to_html
from honeycomb.trace.spans import Span, SpanRecorder
from honeycomb.trace.terminal import render_timeline
from honeycomb.trace.timeline import build_timeline
from runtime import AssistantMessage, Event, ModelRequest, ToolMessage
from runtime.testing import call
from tests.honeycomb.trace.test_cut_off import HANG_S, one, unfinished, wait, within_their_workers
from tests.support import approvals


def _waits_long(request: ModelRequest) -> AssistantMessage | str:
    if any(isinstance(m, ToolMessage) for m in request.messages):
        return "done"
    return AssistantMessage(tool_calls=(call("wait", {"seconds": HANG_S}),))


async def test_workers_the_wall_time_cuts_off_are_over_budget_in_their_spans() -> None:
    """The wall-time budget stops the run as its worker waits on a tool: the worker's
    span and event say ``over_budget``, as its result does and as any other budget
    says it (they said ``cancelled``)."""
    events: list[Event] = []
    recorder = SpanRecorder()
    executor = Executor(
        [Role(name="w", tools=("wait",))], FunctionModel(_waits_long), tools=[wait],
        # Room for the worker's tool call to have begun on a busy machine (at 0.3 s, one
        # CI run cut the run before it had).
        aggregator="concat", policy=Policy(budgets=Budgets(wall_time_s=1.5)),
    )  # fmt: skip
    with pytest.raises(BudgetExceeded) as stopped:
        await executor.run("t", subtasks=[("w", "go")], on_event=[recorder, events.append])
    partial = stopped.value.partial
    assert partial is not None
    assert partial.subtasks["s1"].status == "over_budget"
    assert unfinished(events) == []
    [finished] = [e for e in events if e.kind == "worker.finished"]
    assert finished.status == "over_budget"  # type: ignore[attr-defined]
    worker = one(recorder.spans, "worker", "s1")
    assert worker.status == "over_budget"
    assert worker.error is not None
    assert "wall_time_s" in worker.error
    assert one(recorder.spans, "turn", "s1").status == "over_budget"
    assert one(recorder.spans, "tool_call", "s1").status == "cancelled"
    within_their_workers(recorder.spans)


async def test_a_turn_whose_calls_wait_for_a_person_waits(tmp_path: Path) -> None:
    """The payer's model asks for a call that waits in the store for a person: none
    of the turn's calls ran, and its span waits, as its worker and run do (it said
    ``ok``, a turn that got its answers)."""
    recorder = SpanRecorder()
    executor = approvals.executor(tmp_path / "runs.db", tmp_path / "effects.txt")
    waiting = await executor.run(
        approvals.TASK, subtasks=approvals.plan(0), run_id="p", on_event=[recorder]
    )
    assert waiting.status == "waiting"
    assert one(recorder.spans, "worker", "payer").status == "waiting"
    assert one(recorder.spans, "turn", "payer").status == "waiting"
    assert executor.store is not None
    assert one(executor.store.spans("p"), "turn", "payer").status == "waiting"


NOT_UTF8 = os.fsdecode(b"report-\xff.txt")  # Python holds such a name with a lone surrogate


@tool
async def read_file(name: str) -> str:
    """Read a file (its name is not UTF-8)."""
    raise FileNotFoundError(f"no file {NOT_UTF8}")


def _reads(request: ModelRequest) -> AssistantMessage | str:
    if any(isinstance(m, ToolMessage) for m in request.messages):
        return "done"
    return AssistantMessage(tool_calls=(call("read_file", {"name": "x"}),))


async def test_the_views_show_a_runs_lone_surrogates_replaced() -> None:
    """A task and a tool's error with lone surrogates: the terminal view writes to a
    UTF-8 stream and the page is UTF-8, each with U+FFFD in their place (both raised
    UnicodeEncodeError), as the store and JSON lines have them."""
    recorder = SpanRecorder()
    executor = Executor(
        [Role(name="w", tools=("read_file",))], FunctionModel(_reads), tools=[read_file],
        aggregator="concat",
    )  # fmt: skip
    task = "sum up " + os.fsdecode(b"q3-\xfe.csv")
    result = await executor.run(task, subtasks=[("w", "go")], on_event=[recorder])
    assert one(recorder.spans, "tool_call", "s1").status == "error"
    timeline = build_timeline(recorder.spans, result.plan.subtasks, task=task)
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    Console(file=out, width=100).print(render_timeline(timeline, 100))
    out.flush()
    assert "sum up q3-\ufffd.csv" in out.buffer.getvalue().decode()  # type: ignore[attr-defined]
    page = to_html(timeline).encode()
    assert "no file report-\ufffd.txt".encode() in page
    assert "q3-\ufffd.csv".encode() in page


def test_the_legend_keeps_each_key_beside_its_meaning_at_80_columns() -> None:
    """``honeycomb trace`` off a terminal draws 80 columns: the legend, longer than
    that, breaks between its entries (it broke ``★`` off ``critical path``)."""
    spans = [
        Span(span_id="r", parent_id=None, kind="run", name="t", start=0.0, end=1.0),
        Span(span_id="w", parent_id="r", kind="worker", name="w", start=0.0, end=1.0, worker="w"),
    ]
    out = io.StringIO()
    Console(file=out, width=80).print(render_timeline(build_timeline(spans), 80))
    legend = out.getvalue().splitlines()[-2:]
    assert legend == [
        "█ model call  ▓ summary call  ▒ tool call  x error  ! timeout  · waiting",
        "★ critical path",
    ]


async def test_the_trace_of_a_run_still_going_says_its_figures_are_so_far(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``honeycomb trace`` of a run another worker of which still thinks: its spans are
    kept as they close, so its wall time and speedup were those of what had ended (a
    wall time of 0.01 s for a run going for minutes), with no word that it goes on."""
    hold = asyncio.Event()

    async def answer(request: ModelRequest) -> str:
        if "slow" in str(request.messages[-1].content):
            await hold.wait()
        return "done"

    db = tmp_path / "runs.db"
    executor = Executor([Role(name="w")], FunctionModel(answer), store=db, aggregator="concat")
    plan = [("w", "quick"), ("w", "slow")]
    going = asyncio.create_task(executor.run("t", subtasks=plan, run_id="r1"))
    reader = RunStore(db)
    for _ in range(2000):  # until the quick worker's span is committed (a signal, polled)
        if any(s.kind == "worker" for s in reader.spans("r1")):
            break
        await asyncio.sleep(0.005)
    html = tmp_path / "trace.html"
    traced = ["trace", "r1", "--store", str(db), "--html", str(html)]
    assert await asyncio.to_thread(main, traced) == 0
    said = "still running: only the calls that have ended are drawn and counted"
    assert said in capsys.readouterr().out
    assert said in html.read_text()
    hold.set()
    await going
    assert await asyncio.to_thread(main, traced) == 0
    assert "still running" not in capsys.readouterr().out
    assert "still running" not in html.read_text()
    reader.close()
    assert executor.store is not None
    executor.store.close()
