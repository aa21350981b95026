"""Spans: what ran when, what it waited on, and what it cost.

A run is a tree of spans: ``run`` → ``plan`` / ``worker`` / ``aggregate`` → ``turn`` →
``model_call`` / ``tool_call``. :class:`SpanRecorder` builds them from the run's
events as they happen (it is an event handler), so tracing needs no hook anywhere
else. A run with a store keeps its spans there (``honeycomb trace RUN_ID``), and
:func:`to_jsonl` exports them.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from itertools import count
from typing import Any, Literal, NamedTuple

from honeycomb.events import (
    AggregationFinished,
    AggregationStarted,
    PlanReady,
    RunFinished,
    RunStarted,
    WorkerFinished,
    WorkerStarted,
)
from runtime import (
    Event,
    ModelCallFinished,
    ModelCallStarted,
    ToolCallFinished,
    ToolCallStarted,
)

__all__ = ["Span", "SpanKind", "SpanRecorder", "SpanRow", "from_jsonl", "to_jsonl"]

SpanKind = Literal["run", "plan", "worker", "aggregate", "turn", "model_call", "tool_call"]


class Span(NamedTuple):
    """One timed piece of a run (an immutable tuple: one is made per model and tool
    call, so it must be cheap).

    Attributes:
        span_id: Unique in its run (16 hex digits).
        parent_id: The enclosing span (None for the run).
        kind: What it is.
        name: The task (run), subtask id (worker), model (model call), tool (tool call).
        start: Seconds since the epoch.
        end: Seconds since the epoch.
        status: ``ok``, ``error``, ``failed``, ``timeout``, ``skipped``, ``unknown``,
            ``cancelled`` ... as its event said.
        error: What went wrong, when something did.
        worker: The worker it belongs to (planner and aggregator calls name their role).
        turn: The worker's turn (turns, model and tool calls).
        input_tokens: Tokens in (model calls; summed on turns, workers and the run).
        output_tokens: Tokens out (idem).
        cost: Dollars (idem), from the model's price.
        detail: The tool call id (tool calls), the role (workers).
    """

    span_id: str
    parent_id: str | None
    kind: SpanKind
    name: str
    start: float
    end: float
    status: str = "ok"
    error: str | None = None
    worker: str | None = None
    turn: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    detail: str = ""

    @property
    def duration_s(self) -> float:
        return self.end - self.start


FIELDS = Span._fields
"""Span attributes in order (the store's columns)."""


class _Open:
    """A span being recorded; it gathers the usage of what it encloses."""

    __slots__ = (
        "cost",
        "detail",
        "end",
        "input_tokens",
        "kind",
        "name",
        "output_tokens",
        "parent",
        "span_id",
        "start",
        "turn",
        "worker",
    )  # fmt: skip

    def __init__(
        self,
        span_id: str,
        kind: SpanKind,
        name: str,
        start: float,
        parent: _Open | None,
        *,
        worker: str | None = None,
        turn: int | None = None,
        detail: str = "",
    ) -> None:
        self.span_id = span_id
        self.kind, self.name, self.start, self.parent = kind, name, start, parent
        self.worker, self.turn, self.detail = worker, turn, detail
        self.end = start
        self.input_tokens = self.output_tokens = 0
        self.cost = 0.0

    def add_usage(self, input_tokens: int, output_tokens: int, cost: float) -> None:
        """Count usage here; it reaches the enclosing spans as this one closes (every
        span closes before its parent)."""
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.cost += cost

    def closed(self, end: float, status: str, error: str | None) -> SpanRow:
        return (
            self.span_id,
            self.parent.span_id if self.parent is not None else None,
            self.kind,
            self.name,
            self.start,
            max(end, self.end),
            status,
            error,
            self.worker,
            self.turn,
            self.input_tokens,
            self.output_tokens,
            self.cost,
            self.detail,
        )


SpanRow = tuple[Any, ...]
"""A span's fields in :class:`Span`'s order, as a plain tuple: what a
:class:`SpanRecorder` keeps and gives ``on_close``. The garbage collector stops tracking
a plain tuple of plain values once it has seen it, so a run's thousands of spans cost
it nothing; a named tuple it would walk in every full collection."""

_END = Span._fields.index("end")


class SpanRecorder:
    """An event handler that turns one run's events into spans.

    Args:
        on_close: Called with each span as it ends (a run store keeps them).
        clock: Seconds since the epoch.
    """

    def __init__(
        self,
        on_close: Callable[[SpanRow], None] | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._rows: list[SpanRow] = []
        self._on_close = on_close
        # Ids: a random prefix for the run, then a counter (no system call per span).
        self._prefix = os.urandom(4).hex()
        self._counter = count(1)
        self._clock = clock
        self._run: _Open | None = None
        self._phase: _Open | None = None  # the plan or aggregate span, while open
        self._workers: dict[str, _Open] = {}
        self._turns: dict[str, _Open] = {}  # each worker's current turn
        # Model and tool calls in flight: (start, parent, tool name) by (worker, turn, call id).
        self._calls: dict[tuple[str, int, str], tuple[float, _Open | None, str]] = {}
        self._handlers: dict[type[Event], Callable[[Any], None]] = {
            RunStarted: self._run_started,
            PlanReady: self._plan_ready,
            WorkerStarted: self._worker_started,
            WorkerFinished: self._worker_finished,
            ModelCallStarted: self._model_started,
            ModelCallFinished: self._model_finished,
            ToolCallStarted: self._tool_started,
            ToolCallFinished: self._tool_finished,
            AggregationStarted: self._aggregation_started,
            AggregationFinished: self._aggregation_finished,
            RunFinished: self._run_finished,
        }

    @property
    def spans(self) -> list[Span]:
        """The spans that have ended, in the order they ended."""
        return [Span._make(row) for row in self._rows]

    def _next_id(self) -> str:
        return f"{self._prefix}{next(self._counter):08x}"

    def __call__(self, event: Event) -> None:
        handle = self._handlers.get(type(event))
        if handle is not None:
            handle(event)

    # --- the run and its phases -----------------------------------------------------

    def _run_started(self, event: RunStarted) -> None:
        now = self._clock()
        self._run = _Open(self._next_id(), "run", event.task, now, None)
        self._phase = _Open(self._next_id(), "plan", "plan", now, self._run)

    def _plan_ready(self, event: PlanReady) -> None:
        if self._phase is not None and self._phase.kind == "plan":
            self._close_phase(self._clock())

    def _aggregation_started(self, event: AggregationStarted) -> None:
        self._phase = _Open(self._next_id(), "aggregate", "aggregate", self._clock(), self._run)

    def _aggregation_finished(self, event: AggregationFinished) -> None:
        self._close_phase(self._clock())

    def _close_phase(self, now: float) -> None:
        phase, self._phase = self._phase, None
        if phase is None:
            return
        for name in [n for n, turn in self._turns.items() if turn.parent is phase]:
            self._close(self._turns.pop(name), now)
        self._close(phase, now)

    def _run_finished(self, event: RunFinished) -> None:
        now = self._clock()
        status = event.status
        for key, (start, parent, name) in list(self._calls.items()):
            kind: SpanKind = "model_call" if not key[2] else "tool_call"
            self._call_span(key, kind, name, start, parent, "cancelled", None)
        for turn in list(self._turns.values()):
            self._close(turn, now, "cancelled")
        for worker in list(self._workers.values()):
            self._close(worker, now, "cancelled")
        self._calls.clear()
        self._turns.clear()
        self._workers.clear()
        self._close_phase(now)
        if self._run is not None:
            self._close(self._run, now, status, event.error)
            self._run = None

    # --- workers, turns and calls ---------------------------------------------------

    def _worker_started(self, event: WorkerStarted) -> None:
        name = event.worker or "?"
        self._workers[name] = _Open(
            self._next_id(),
            "worker",
            name,
            self._clock(),
            self._run,
            worker=name,
            detail=event.role,
        )

    def _worker_finished(self, event: WorkerFinished) -> None:
        name = event.worker or "?"
        now = self._clock()
        turn = self._turns.pop(name, None)
        if turn is not None:
            self._close(turn, now)
        span = self._workers.pop(name, None)
        if span is None:  # skipped, or finished in an earlier life: no time of its own
            span = _Open(
                self._next_id(), "worker", name, now, self._run, worker=name, detail=event.role
            )
        self._close(span, now, event.status, event.error)

    def _owner(self, worker: str) -> _Open | None:
        """The span a worker's turns belong to: its own, or the plan or aggregate."""
        return self._workers.get(worker) or self._phase or self._run

    def _model_started(self, event: ModelCallStarted) -> None:
        worker, now = event.worker or "?", self._clock()
        turn = self._turns.get(worker)
        if turn is None or turn.turn != event.turn:
            if turn is not None:
                self._close(turn, now)
            turn = self._turns[worker] = _Open(
                self._next_id(),
                "turn", f"turn {event.turn}", now, self._owner(worker), worker=worker,
                turn=event.turn,
            )  # fmt: skip
        self._calls[worker, event.turn, ""] = (now, turn, "model")

    def _model_finished(self, event: ModelCallFinished) -> None:
        key = (event.worker or "?", event.turn, "")
        started = self._calls.pop(key, None)
        if started is not None:
            start, parent, _ = started
            if parent is not None:
                parent.add_usage(event.input_tokens, event.output_tokens, event.cost)
            self._call_span(
                key, "model_call", event.model or "model", start, parent, event.status,
                event.error, event.input_tokens, event.output_tokens, event.cost,
            )  # fmt: skip

    def _tool_started(self, event: ToolCallStarted) -> None:
        worker = event.worker or "?"
        parent = self._turns.get(worker) or self._owner(worker)
        self._calls[worker, event.turn, event.call_id] = (self._clock(), parent, event.tool)

    def _tool_finished(self, event: ToolCallFinished) -> None:
        key = (event.worker or "?", event.turn, event.call_id)
        started = self._calls.pop(key, None)
        if started is not None:
            start, parent, tool = started
            self._call_span(key, "tool_call", tool, start, parent, event.status, event.error)

    def _call_span(
        self,
        key: tuple[str, int, str],
        kind: SpanKind,
        name: str,
        start: float,
        parent: _Open | None,
        status: str,
        error: str | None,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost: float = 0.0,
    ) -> None:
        """A model or tool call's span: made once, when it ends (the common case is
        cheap: no open span object per call)."""
        end = self._clock()
        worker, turn, call_id = key
        row = (
            self._next_id(),
            parent.span_id if parent is not None else None,
            kind, name, start, end, status, error, worker, turn, input_tokens, output_tokens,
            cost, call_id,
        )  # fmt: skip
        self._keep(row, parent)

    def _close(self, span: _Open, end: float, status: str = "ok", error: str | None = None) -> None:
        parent = span.parent
        if parent is not None:
            parent.add_usage(span.input_tokens, span.output_tokens, span.cost)
        self._keep(span.closed(end, status, error), parent)

    def _keep(self, row: SpanRow, parent: _Open | None) -> None:
        """A span that ended: it stretches its parent's end, and is kept."""
        end = row[_END]
        if parent is not None and end > parent.end:
            parent.end = end
        self._rows.append(row)
        if self._on_close is not None:
            self._on_close(row)


def to_jsonl(spans: Iterable[Span]) -> str:
    """Spans as JSON lines, one object per span."""
    return "".join(json.dumps(s._asdict()) + "\n" for s in spans)


def from_jsonl(text: str) -> list[Span]:
    """Spans back from :func:`to_jsonl`."""
    return [Span(**json.loads(line)) for line in text.splitlines() if line.strip()]
