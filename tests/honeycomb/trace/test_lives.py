"""A run of several lives (waiting for a person, then resumed): its figures are the
same in its result and its trace, its timeline draws each life as a band with the
pause between them said, and each worker has one status wherever it is shown."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from rich.console import Console

from honeycomb import BudgetExceeded, Budgets, Executor, Policy, Role, Subtask, tool
from honeycomb.run.shown import stored_timeline, worker_statuses
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from honeycomb.trace.critical import figures
from honeycomb.trace.html import to_html
from honeycomb.trace.spans import Span, SpanKind
from honeycomb.trace.terminal import render_timeline
from honeycomb.trace.timeline import build_timeline
from honeycomb.web.pages import Links, live_parts
from runtime import AssistantMessage, Event, ModelRequest, ToolCallFinished, ToolMessage
from runtime.testing import call
from tests.support import approvals

HOUR = 3600.0


def _span(
    life: int,
    number: int,
    kind: SpanKind,
    name: str,
    start: float,
    end: float,
    parent: str | None = None,
    **more: Any,
) -> Span:
    """A span of life ``life`` (ids as a recorder makes them: the life's digits, then
    a count), under ``parent`` or else that life's run span."""
    above = None if kind == "run" else (parent or f"{life:08x}00000001")
    return Span(
        span_id=f"{life:08x}{number:08x}", parent_id=above, kind=kind, name=name, start=start,
        end=end, **more,
    )  # fmt: skip


def _two_lives() -> list[Span]:
    """A run that worked a second, waited an hour for a person, and worked a second."""
    first, second = 0xA1, 0xB2
    return [
        _span(first, 1, "run", "task", 0.0, 1.0, status="waiting"),
        _span(first, 2, "worker", "w", 0.1, 1.0, worker="w", status="waiting"),
        _span(first, 3, "model_call", "m", 0.1, 0.5, worker="w", parent=f"{first:08x}00000002",
              input_tokens=100, output_tokens=10, cost=0.01),
        _span(second, 1, "run", "task", HOUR + 1.0, HOUR + 2.0, status="ok"),
        _span(second, 2, "worker", "w", HOUR + 1.1, HOUR + 1.9, worker="w", status="ok"),
        _span(second, 3, "model_call", "m", HOUR + 1.2, HOUR + 1.8, worker="w",
              parent=f"{second:08x}00000002", input_tokens=200, output_tokens=20, cost=0.02),
        _span(second, 4, "tool_call", "pay", HOUR + 1.1, HOUR + 1.2, worker="w",
              parent=f"{second:08x}00000002"),
    ]  # fmt: skip


def test_each_life_is_a_band_and_the_pause_between_them_is_said() -> None:
    timeline = build_timeline(_two_lives(), run_id="r", task="task")
    first, second = timeline.lives
    assert (first.status, second.status) == ("waiting", "ok")
    assert second.gap_s == pytest.approx(HOUR)
    assert (first.model_calls, second.model_calls, second.tool_calls) == (1, 1, 1)
    assert (first.total_tokens, second.total_tokens) == (110, 220)
    assert timeline.total_tokens == 330  # the totals add the lives up
    assert timeline.wall_s == pytest.approx(2.0)  # the hour it waited is no work

    html = to_html(timeline)
    bands = re.findall(r'class="life" data-life="(\d)" style="left:([\d.]+)%;width:([\d.]+)%', html)
    assert [b[0] for b in bands] == ["1", "2"]
    (_, left1, width1), (_, left2, width2) = ((n, float(a), float(b)) for n, a, b in bands)
    pause = re.search(
        r'class="gap" data-gap-s="([\d.]+)" style="left:([\d.]+)%;width:([\d.]+)%', html
    )
    assert pause is not None
    assert float(pause[1]) == pytest.approx(HOUR)
    assert "life 2 · 1.00s (after a pause of 1h 00m)" in html
    # A band a life, side by side, the pause a narrow strip between them: not an hour
    # of empty track with both lives squeezed at its two ends.
    assert width1 > 40
    assert width2 > 40
    assert left1 + width1 <= float(pause[2]) + 0.01
    assert float(pause[2]) + float(pause[3]) <= left2 + 0.01
    assert float(pause[3]) < 10
    tool_bar = re.search(r'class="bar tool_call" style="left:([\d.]+)%', html)
    assert tool_bar is not None
    assert float(tool_bar[1]) >= left2  # drawn in its own life
    # What each life spent, and the run in total.
    table = html[html.index('<table class="lives">') :]
    assert re.search(r'<tr data-life="1"><td>1</td><td>1.00s</td><td>waiting</td><td>1</td>'
                     r"<td>0</td><td>110</td><td>\$0.0100</td></tr>", table)  # fmt: skip
    assert re.search(r'<tr class="pause"><td></td><td colspan="6">paused 1h 00m</td>', table)
    assert re.search(r'<tr class="total"><th>all</th><th>2.00s</th>.*<th>330</th>', table)


def test_the_terminal_draws_the_lives_side_by_side_and_says_each() -> None:
    out = io.StringIO()
    Console(file=out, width=100).print(render_timeline(build_timeline(_two_lives()), 100))
    text = out.getvalue()
    assert "2 lives" in text
    [row] = [line for line in text.splitlines() if line.lstrip("★ ").startswith("w ")]
    bar = row[row.index("w ") + 2 :]
    assert bar.index("█") < bar.index("┊") < bar.rindex("█")  # life 1 | pause | life 2
    assert "life 1            1.00s   waiting · 1 model call, 0 tool calls, 110 tokens" in text
    assert "  paused         1h 00m\nlife 2 " in text


def test_the_critical_path_is_of_what_ran() -> None:
    found = figures(
        wall_s=3.0, plan_s=0.5, aggregate_s=0.0,
        durations={"a": 2.0, "b": 0.0},
        subtasks=[_Planned("a", ()), _Planned("b", ("a",))],
    )  # fmt: skip
    assert found.critical_path == ("a",)  # b, waiting on a, has not run
    assert found.critical_path_s == pytest.approx(2.5)


class _Planned:
    def __init__(self, id: str, depends_on: tuple[str, ...]) -> None:
        self.id = id
        self.depends_on = depends_on


async def _waiting(db: Path, tmp_path: Path) -> Executor:
    executor = approvals.executor(db, tmp_path / "effects.txt", read_s=0.1)
    waiting = await executor.run(approvals.TASK, subtasks=approvals.plan(2), run_id="p")
    assert waiting.status == "waiting"
    return executor


async def test_a_waiting_worker_has_one_status_and_the_path_only_what_ran(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    await _waiting(db, tmp_path)
    store = RunStore(db)
    stored = await store.load("p")
    assert stored is not None
    assert worker_statuses(stored) == {"payer": "waiting", "r0": "ok", "r1": "ok"}
    timeline = stored_timeline(stored, store.spans("p"))
    assert {r.name: r.status for r in timeline.workers} == worker_statuses(stored)
    assert "aggregate" not in timeline.path  # it has not run
    assert timeline.path[0] == "plan"
    summary = await store.summary("p")
    assert summary is not None
    page = live_parts(summary, stored, store.spans("p"), [], "csrf", Links())
    shown = re.findall(r'data-worker="(\w+)".*?class="status[^"]*"[^>]*>(\w+)<', page, re.S)
    assert sorted(shown) == sorted([("payer", "waiting"), ("r0", "ok"), ("r1", "ok")] * 2)
    assert "→ aggregate" not in page


async def test_a_resumed_runs_figures_are_those_of_its_trace(tmp_path: Path) -> None:
    """The result of a run resumed after a wait counts every life, as its trace does:
    its critical path is no longer than its wall time, and both are the trace's."""
    db = tmp_path / "runs.db"
    executor = await _waiting(db, tmp_path)
    await executor.decide("p", "pay_1", approve=True)
    result = await executor.resume("p")
    assert result.status == "ok"
    store = RunStore(db)
    stored = await store.load("p")
    assert stored is not None
    timeline = stored_timeline(stored, store.spans("p"))
    assert len(timeline.lives) == 2
    t = result.timings
    assert t.critical_path_s <= t.wall_s
    # This life's wall time is measured from the call (the store opened, its lease
    # taken); the trace's from the run's span: near, not equal.
    assert t.wall_s == pytest.approx(timeline.wall_s, rel=0.5, abs=0.05)
    assert t.critical_path_s == pytest.approx(timeline.critical_path_s, rel=0.25, abs=0.02)
    assert t.sum_worker_s == pytest.approx(timeline.sum_worker_s, rel=0.25, abs=0.02)
    assert result.usage.model_calls == timeline.model_calls
    assert result.usage.total_tokens == timeline.total_tokens
    assert result.usage.tool_calls == timeline.tool_calls


def test_a_bar_that_starts_at_once_does_not_run_into_the_row_name() -> None:
    at_once = [_span(1, 1, "worker", "meteorologist-1", 0.0, 1.0, worker="meteorologist-1")]
    at_once.append(
        _span(
            1, 2, "model_call", "m", 0.0, 0.5, parent="0000000100000001", worker="meteorologist-1"
        )
    )
    out = io.StringIO()
    Console(file=out, width=80).print(render_timeline(build_timeline(at_once), 80))
    assert "meteorologist-1 █" in out.getvalue()


async def test_a_call_whose_turn_the_end_of_the_run_cuts_off_is_no_tool_call(
    tmp_path: Path,
) -> None:
    """A budget stops the run while a worker's turn has one call answered and one
    still running: the model never has that answer, so neither the budget nor the
    trace counts the call (the trace once counted it). Three model calls: a's, and
    b's two, whose second asks for a turn the budget refuses, as no model call is left
    to read it."""
    quick_ended = anyio.Event()

    @tool
    async def quick() -> str:
        """Answer at once."""
        return "quick"

    @tool
    async def slow() -> str:
        """Never answer (the end of the run cuts it off)."""
        await anyio.Event().wait()
        return "slow"

    def seen(event: Event) -> None:
        if isinstance(event, ToolCallFinished) and event.worker == "a":
            quick_ended.set()

    async def answer(request: ModelRequest) -> AssistantMessage | str:
        answered = sum(isinstance(m, ToolMessage) for m in request.messages)
        if (request.conversation or "").endswith("a"):
            return AssistantMessage(tool_calls=(call("quick"), call("slow")))
        if not answered:
            await quick_ended.wait()  # a's turn is running: b's two turns come now
        # b's second turn, over the budget, stops the run
        return AssistantMessage(tool_calls=(call("quick", id=f"q{answered}"),))

    roles = [Role(name="worker", description="Calls tools.", tools=("quick", "slow"))]
    store = RunStore(tmp_path / "runs.db")
    executor = Executor(
        roles, FunctionModel(answer), tools=[quick, slow], aggregator="concat", store=store,
        policy=Policy(budgets=Budgets(model_calls=3)),
    )  # fmt: skip
    plan = [Subtask(id=w, role="worker", instruction="go") for w in ("a", "b")]
    with pytest.raises(BudgetExceeded) as caught:
        await executor.run("call", subtasks=plan, run_id="cut", on_event=[seen])
    result = caught.value.partial
    assert result is not None
    timeline = build_timeline(store.spans("cut"), result.plan.subtasks)
    assert result.usage.tool_calls == 1  # b's: a's turn never had its answers
    assert timeline.tool_calls == result.usage.tool_calls


def test_a_call_made_again_in_a_later_life_counts_in_each() -> None:
    """A hive tool's call that a life cut off in mid-turn runs again in the next, and
    its sub-run's workers, under the same names, make their calls again, each answered
    (the budget counts both): the trace counted only the later, taking the two for one
    call dispatched again, and said two fewer tool calls than the result."""
    spans: list[Span] = []
    for life, start in ((0xA1, 0.0), (0xB2, 10.0)):
        nested = "s2/call_5/s1"  # the same in both lives: named after the call's id
        spans += [
            _span(life, 1, "run", "task", start, start + 1.0, status="ok"),
            _span(life, 2, "worker", nested, start + 0.1, start + 0.9, worker=nested,
                  status="ok"),
            _span(life, 3, "turn", "turn 1", start + 0.1, start + 0.8, worker=nested,
                  parent=f"{life:08x}00000002", status="ok", turn=1),
            _span(life, 4, "tool_call", "echo", start + 0.2, start + 0.3, worker=nested,
                  parent=f"{life:08x}00000003", status="ok", turn=1, detail="call_1"),
        ]  # fmt: skip
    timeline = build_timeline(spans)
    assert [life.tool_calls for life in timeline.lives] == [1, 1]
    assert timeline.tool_calls == 2
