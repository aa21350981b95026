"""Showing a run in the terminal: a live rich view on a TTY, plain lines otherwise,
or JSON lines. Each view consumes the run's events; :func:`summary` prints the end.
The live view also shows the aggregator's answer as it is written (its text deltas).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any, Protocol, TextIO

import msgspec
import pydantic_core
from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from honeycomb.cli.lines import describe, model_finished, short_error
from honeycomb.run.events import (
    AggregationStarted,
    PlanReady,
    RoundPlanned,
    RoundStarted,
    RunFinished,
    WorkerFinished,
    WorkerStarted,
)
from honeycomb.run.result import RunResult
from honeycomb.trace.format import format_cost, printable, token_detail
from runtime import (
    ApprovalRequest,
    Approver,
    CompactionFinished,
    CompactionStarted,
    Decision,
    Event,
    ModelCallFinished,
    ModelCallRetrying,
    ModelCallStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from runtime.text import valid_data
from workers.guards import GuardChecked, GuardStarted

__all__ = ["JsonView", "LiveView", "PlainView", "View", "live", "summary"]


class View(Protocol):
    """Consumes events; opened before the run and closed after it."""

    def __enter__(self) -> View: ...
    def __exit__(self, *exc: object) -> None: ...
    def handle(self, event: Event) -> None: ...


class _Row(msgspec.Struct, kw_only=True):
    id: str
    role: str
    depends_on: tuple[str, ...]
    state: str = "waiting"
    turn: int = 0
    tool_calls: int = 0
    tools_running: int = 0
    started: float | None = None
    ended: float | None = None
    error: str = ""  # what its last model call failed with, shortened


class _RunState(msgspec.Struct, kw_only=True):
    """What the views know about a run, updated event by event."""

    started: float = msgspec.field(default_factory=time.perf_counter)
    phase: str = "planning"
    rows: dict[str, _Row] = msgspec.field(default_factory=dict)
    answer: str = ""  # the aggregator's answer so far, as it is written
    answer_turn: int = 0
    asking: set[str] = msgspec.field(default_factory=set)  # workers whose call is asked about
    planner: str = ""  # the planner (or lead), while it plans
    planner_turn: int = 0  # its call under way
    planner_pieces: int = 0  # the pieces of text that call streamed so far
    planner_error: str = ""  # what its last call failed with, shortened

    def apply(self, event: Event) -> None:
        now = time.perf_counter()
        row = self.rows.get(event.worker or "")
        planning = self.phase.startswith("planning") and row is None
        if planning and isinstance(event, ModelCallStarted):
            self.planner, self.planner_turn = event.worker or "planner", event.turn
            self.planner_pieces, self.planner_error = 0, ""
        elif planning and isinstance(event, TextDelta) and event.worker == self.planner:
            self.planner_pieces += 1
        elif planning and isinstance(event, ModelCallFinished) and event.error:
            self.planner_error = short_error(event.error)
        if isinstance(event, TextDelta):
            # The aggregator's own answer: not the agents it calls (named under it),
            # nor a subtask's text the run's output guards held until they passed it.
            if self.phase == "aggregating" and row is None and "/" not in (event.worker or ""):
                if event.turn != self.answer_turn:  # a later turn writes a new answer
                    self.answer, self.answer_turn = "", event.turn
                self.answer += event.text
        elif isinstance(event, PlanReady | RoundPlanned):
            self.phase, self.planner = "working", ""
            plan = event.plan if isinstance(event, PlanReady) else event.added
            for s in plan.subtasks:
                self.rows[s.id] = _Row(id=s.id, role=s.role, depends_on=s.depends_on)
        elif isinstance(event, RoundStarted):
            self.phase = f"planning round {event.round}"
        elif isinstance(event, WorkerStarted) and row:
            row.state, row.started = "running", now
        elif isinstance(event, WorkerFinished) and row:
            # Not yet started is "waiting" in this table: a paused worker says why.
            paused = event.status == "waiting"
            row.state, row.ended = "needs approval" if paused else event.status, now
        elif isinstance(event, ModelCallStarted) and row:
            row.state, row.turn, row.error = "thinking", event.turn, ""
        elif isinstance(event, ModelCallFinished) and row and event.error:
            row.state, row.error = "model error", short_error(event.error)
        elif isinstance(event, CompactionStarted) and row:
            row.state, row.turn = "compacting", event.turn
        elif isinstance(event, ModelCallFinished | CompactionFinished) and row:
            row.state = "running"
        elif isinstance(event, ToolCallStarted) and row:
            row.tools_running += 1
            row.state = "calling tools"
        elif isinstance(event, ToolCallFinished) and row:
            row.tools_running -= 1
            row.tool_calls += 1
            if row.tools_running == 0:
                row.state = "running"
        elif isinstance(event, GuardStarted) and row:
            row.state = "checking"  # a judge's call may take a while
        elif isinstance(event, GuardChecked) and row and row.state == "checking":
            row.state = "calling tools" if row.tools_running else "running"
        elif isinstance(event, AggregationStarted):
            self.phase = "aggregating"
        elif isinstance(event, RunFinished):
            self.phase = event.status


_STYLE = {
    "waiting": "dim",
    "running": "cyan",
    "thinking": "magenta",
    "compacting": "magenta dim",
    "calling tools": "yellow",
    "checking": "blue",
    "ok": "green",
    "failed": "red",
    "skipped": "red dim",
    "cancelled": "red dim",
    "over_budget": "red",
    "needs approval": "bold yellow",
    "model error": "red",
}


ANSWER_LINES = 12
"""Lines of the answer being written that the live view shows (its last ones)."""


def live(console: Console) -> bool:
    """Whether the live view is drawn on ``console``: its file is a terminal. A
    console rich takes for one (``FORCE_COLOR`` set, as CI jobs set it to colour their
    logs) that writes into a pipe or a file gets the plain lines: a live table redrawn
    there leaves every frame, cursor moves and all, in the log."""
    isatty = getattr(console.file, "isatty", None)
    return console.is_terminal and isatty is not None and bool(isatty())


class LiveView:
    """A live table: the plan, then one row per worker with state, turn, tool calls
    and elapsed time; below it, the aggregator's answer as it is written. The table
    stays on the terminal once the run ends; the answer does not (the command prints
    it whole after the table)."""

    def __init__(self, console: Console, title: str) -> None:
        self.console = console
        self.title = title
        self.state = _RunState()
        self._closed = False
        # Live draws this view (its __rich__) at its own pace, so events only update
        # the state and a run of thousands of workers is not redrawn per event.
        self._live = Live(self, console=console, refresh_per_second=8, transient=False)

    def __enter__(self) -> LiveView:
        # The clock starts with the run, not as the view is made: building the run's
        # models (importing openai, loading a GGUF file) comes in between.
        self.state.started = time.perf_counter()
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed = True  # the frame left on the terminal: the table, without the answer
        self._live.refresh()
        self._live.__exit__(None, None, None)

    def handle(self, event: Event) -> None:
        self.state.apply(event)

    def asked(self, approver: Approver) -> Approver:
        """``approver``, with the worker whose call it is asked about shown as needing
        approval until it decides (its events, which come through the run's stream,
        may not have been handled yet when it asks)."""

        async def asking(request: ApprovalRequest) -> Decision:
            worker = request.worker or ""
            self.state.asking.add(worker)
            try:
                return await approver(request)
            finally:
                self.state.asking.discard(worker)

        return asking

    def _asked_of(self, subtask: str) -> bool:
        """Whether a call of ``subtask``'s worker is asked about, or of a worker it
        waits on: a nested worker it called (``s1/call_1``), or a worker of a hive it
        called as a tool (``s1/call_1/s1``)."""
        return any(w == subtask or w.startswith(f"{subtask}/") for w in self.state.asking)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The live table stops redrawing while the block asks something on the
        terminal, and goes on after it."""
        self._live.stop()
        try:
            yield
        finally:
            self._live.start()

    def __rich__(self) -> Panel:
        now = time.perf_counter()
        table = Table(expand=True, box=None, pad_edge=False)
        for column in ("subtask", "role", "after", "state", "turn", "tools", "elapsed"):
            table.add_column(
                column, justify="right" if column in ("turn", "tools", "elapsed") else "left"
            )
        for row in self.state.rows.values():
            end = row.ended or now
            elapsed = f"{end - row.started:5.2f}s" if row.started is not None else ""
            state = "needs approval" if self._asked_of(row.id) else row.state
            shown = f"{state}: {row.error}" if state == "model error" else state
            table.add_row(
                row.id,
                row.role,
                ", ".join(row.depends_on) or "-",
                Text(shown, style=_STYLE.get(state, "")),
                str(row.turn or ""),
                str(row.tool_calls or ""),
                elapsed,
            )
        wall = now - self.state.started
        header = Text(f"{self.state.phase} · {wall:5.2f}s", style="bold")
        progress = planning_progress(self.state)
        if progress:
            header.append(f" · {progress}", style="magenta")
        parts: list[Any] = [header, table]
        if self.state.answer and not self._closed:
            lines = self.state.answer.splitlines()[-ANSWER_LINES:]
            shown = printable("\n".join(lines))  # the model's text, inert
            parts.append(Panel(Text(shown), title="answer", border_style="green"))
        return Panel(Group(*parts), title=self.title, border_style="blue")


def planning_progress(state: _RunState) -> str:
    """``planner turn 1 · ~340 tokens so far``: the planner's call under way (its
    tokens counted as they stream), while the run plans; else nothing."""
    if not state.planner or not state.phase.startswith("planning"):
        return ""
    streamed = f" · ~{state.planner_pieces} tokens so far" if state.planner_pieces else ""
    failed = f" · model error: {state.planner_error}" if state.planner_error else ""
    return f"{state.planner} turn {state.planner_turn}{streamed}{failed}"


class PlainView:
    """One line per event, for logs and pipes."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.started = time.perf_counter()
        self._turns: dict[str | None, int] = {}  # each worker's last turn
        self._attempts: dict[str | None, int] = {}  # a worker that started over: the planner
        self._retried: dict[tuple[str | None, int], list[str]] = {}  # statuses, by call

    def __enter__(self) -> PlainView:
        self.started = time.perf_counter()  # with the run, as the live view's clock
        return self

    def __exit__(self, *exc: object) -> None:
        self.out.flush()

    def handle(self, event: Event) -> None:
        if isinstance(event, RoundStarted):  # the lead starts again: not an attempt
            self._turns.clear()
            self._attempts.clear()
        if isinstance(event, ModelCallStarted):
            line = self._started(event)
        elif isinstance(event, ModelCallRetrying):
            self._retried.setdefault((event.worker, event.turn), []).append(event.status)
            line = describe(event)
        elif isinstance(event, ModelCallFinished):
            line = model_finished(event, self._retried.pop((event.worker, event.turn), []))
        elif isinstance(event, CompactionFinished):
            self._retried.pop((event.worker, event.turn), None)  # its retries are its own
            line = describe(event)
        else:
            line = describe(event)
        if line:
            line = printable(line, lines=False)  # names and errors the model wrote, inert
            self.out.write(f"[{time.perf_counter() - self.started:6.2f}s] {line}\n")
            self.out.flush()

    def _started(self, event: ModelCallStarted) -> str:
        """A line when a worker starts over from its first turn: a planner trying again
        for a valid plan is one worker of the same name, once per attempt."""
        last = self._turns.get(event.worker)
        self._turns[event.worker] = event.turn
        if last is None or event.turn > last:
            return ""
        attempt = self._attempts[event.worker] = self._attempts.get(event.worker, 1) + 1
        return f"{event.worker or 'model'} attempt {attempt}"


class JsonView:
    """Every event as one JSON object per line."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def __enter__(self) -> JsonView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.out.flush()

    def handle(self, event: Event) -> None:
        record: dict[str, Any] = {"event": event.kind, **event.fields()}
        try:
            line = pydantic_core.to_json(record, fallback=_jsonable)
        except pydantic_core.PydanticSerializationError:  # text JSON cannot hold as it is
            # Lone surrogates (a file name that is not UTF-8 ...): replaced, as stored.
            builtins = pydantic_core.to_jsonable_python(record, fallback=_jsonable)
            line = pydantic_core.to_json(valid_data(builtins))
        self.out.write(line.decode() + "\n")
        self.out.flush()


def _jsonable(value: object) -> object:
    """What pydantic does not write as JSON itself: a value of ours (a msgspec struct:
    an event's ``usage``) as its fields, anything else as its text."""
    if isinstance(value, msgspec.Struct):
        return msgspec.to_builtins(value, enc_hook=_jsonable)
    return str(value)


def found(result: RunResult) -> list[str]:
    """The lines of what a run that gave no answer had found: the answers of its
    subtasks that finished, each under its id and role (none: no lines)."""
    done = [r for r in result.subtasks.values() if r.ok and r.text.strip()]
    parts = [f"## {r.subtask.id} ({r.subtask.role})\n{r.text.strip()}" for r in done]
    if not parts:
        return []
    return ["", "Found before it stopped:", printable("\n\n".join(parts)), ""]  # made inert


def summary(result: RunResult) -> list[str]:
    """The closing lines: wall time, critical path, speedup, tokens and calls."""
    t, u = result.timings, result.usage
    lines = [
        f"wall time      {t.wall_s:7.2f}s   (plan {t.plan_s:.2f}s, workers {t.workers_s:.2f}s, "
        f"aggregate {t.aggregate_s:.2f}s)",
        f"critical path  {t.critical_path_s:7.2f}s",
        f"serial would   {t.serial_s:7.2f}s   speedup x{t.speedup:.2f} over serial",
        f"tokens         {u.total_tokens:7d}    {token_detail(u)}",
        f"calls          {u.model_calls:7d} model, {u.tool_calls} tool",
        f"cost           {format_cost(u.cost):>7}",
    ]
    count, at_once = len(result.subtasks), result.max_workers
    if at_once is not None and count > at_once:  # they ran in waves: say why it took longer
        lines.insert(
            0, f"subtasks       {count:7d}    ({at_once} at a time: the policy's max_workers)"
        )
    if result.failures:
        lines.append(
            "failed         " + "; ".join(f"{f.subtask.id}: {f.error}" for f in result.failures)
        )
    cut = [r.subtask.id for r in result.subtasks.values() if r.worker and r.worker.cut_off]
    if result.answer_cut_off:
        cut.append("the answer")
    if cut:
        lines.append(
            f"cut off        {', '.join(cut)}: answers that end at the output limit "
            "(max_output_tokens)"
        )
    return lines
