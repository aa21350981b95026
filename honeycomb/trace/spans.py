"""Spans: what ran when, what it waited on, and what it cost.

A run is a tree of spans: ``run`` → ``plan`` / ``worker`` / ``aggregate`` → ``turn`` →
``model_call`` / ``tool_call``. :class:`SpanRecorder` builds them from the run's
events as they happen: it is an event handler, and a run's own recorder is its
tracer's ``recorder`` (:class:`runtime.events.CallRecorder`), which is given the model
and tool calls as plain arguments instead of their event objects (the same spans,
made for less). A run with a store keeps its spans there (``honeycomb trace RUN_ID``),
and :func:`to_jsonl` exports them.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from itertools import count
from typing import Any, Literal, NamedTuple, Protocol

from runtime import (
    Event,
    ModelCallFinished,
    ModelCallStarted,
    ToolCallFinished,
    ToolCallStarted,
)

__all__ = ["Span", "SpanKind", "SpanRecorder", "SpanRow", "from_jsonl", "to_jsonl"]


class _RunEvent(Protocol):
    """What the recorder reads of a run's own events (``honeycomb.run.events``), which
    it knows by their documented kind and fields."""

    @property
    def task(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def error(self) -> str | None: ...


class _WorkerEvent(Protocol):
    @property
    def worker(self) -> str | None: ...
    @property
    def role(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def error(self) -> str | None: ...


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
        attempts: Attempts the model call took, retries included (1 for other spans).
        reasoning_tokens: Of the output tokens, those spent reasoning (summed as
            tokens are).
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
    attempts: int = 1
    reasoning_tokens: int = 0

    @property
    def duration_s(self) -> float:
        return self.end - self.start


FIELDS = Span._fields
"""Span attributes in order (the store's columns)."""


class _Open:
    """A span being recorded; it gathers the usage of what it encloses, which reaches
    the enclosing spans as it closes (every span closes before its parent)."""

    __slots__ = (
        "cost",
        "detail",
        "end",
        "input_tokens",
        "kind",
        "name",
        "output_tokens",
        "parent",
        "reasoning_tokens",
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
        worker: str | None = None,
        turn: int | None = None,
        detail: str = "",
    ) -> None:
        # Called positionally: a class called with keywords costs twice as much on
        # Python 3.11, and one is made per turn.
        self.span_id = span_id
        self.kind, self.name, self.start, self.parent = kind, name, start, parent
        self.worker, self.turn, self.detail = worker, turn, detail
        self.end = start
        self.input_tokens = self.output_tokens = self.reasoning_tokens = 0
        self.cost = 0.0


SpanRow = tuple[Any, ...]
"""A span's fields in :class:`Span`'s order, as a plain tuple: what a
:class:`SpanRecorder` keeps and gives ``on_close``. The garbage collector stops tracking
a plain tuple of plain values once it has seen it, so a run's thousands of spans cost
it nothing; a named tuple it would walk in every full collection."""


class SpanRecorder:
    """An event handler that turns one run's events into spans; also a
    :class:`~runtime.events.CallRecorder`, whose call methods make the same spans as
    the events of those calls.

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
        # Ids: 16 hex digits, a random prefix for the run and then a counter, each made
        # by builtins alone (no system call, no Python code).
        prefix = int.from_bytes(os.urandom(4), "big")
        self._ids = map("%016x".__mod__, count(prefix << 32 | 1))
        self._clock = clock
        self._run: _Open | None = None
        self._phase: _Open | None = None  # the plan or aggregate span, while open
        self._workers: dict[str, _Open] = {}
        self._turns: dict[str, _Open] = {}  # each worker's current turn
        # Model and tool calls in flight: (start, parent, tool name) by (worker, turn, call id).
        self._calls: dict[tuple[str, int, str], tuple[float, _Open | None, str]] = {}
        # By kind: the run's own events are documented by kind (docs/events.md), and
        # this module stands below the package that defines them.
        self._handlers: dict[str, Callable[[Any], None]] = {
            "run.started": self._run_started,
            "run.plan_ready": self._plan_ready,
            "worker.started": self._worker_started,
            "worker.finished": self._worker_finished,
            ModelCallStarted.kind: self._model_started,
            ModelCallFinished.kind: self._model_finished,
            ToolCallStarted.kind: self._tool_started,
            ToolCallFinished.kind: self._tool_finished,
            "run.aggregation_started": self._aggregation_started,
            "run.aggregation_finished": self._aggregation_finished,
            "run.finished": self._run_finished,
        }

    @property
    def spans(self) -> list[Span]:
        """The spans that have ended, in the order they ended."""
        return [Span._make(row) for row in self._rows]

    def __call__(self, event: Event) -> None:
        handle = self._handlers.get(event.kind)
        if handle is not None:
            handle(event)

    # --- the run and its phases -----------------------------------------------------

    def _run_started(self, event: _RunEvent) -> None:
        now = self._clock()
        self._run = _Open(next(self._ids), "run", event.task, now, None)
        self._phase = _Open(next(self._ids), "plan", "plan", now, self._run)

    def _plan_ready(self, event: Event) -> None:
        if self._phase is not None and self._phase.kind == "plan":
            self._close_phase(self._clock())

    def _aggregation_started(self, event: Event) -> None:
        self._phase = _Open(next(self._ids), "aggregate", "aggregate", self._clock(), self._run)

    def _aggregation_finished(self, event: Event) -> None:
        self._close_phase(self._clock())

    def _close_phase(self, now: float) -> None:
        phase, self._phase = self._phase, None
        if phase is None:
            return
        for name in [n for n, turn in self._turns.items() if turn.parent is phase]:
            self._close(self._turns.pop(name), now)
        self._close(phase, now)

    def _run_finished(self, event: _RunEvent) -> None:
        now = self._clock()
        for (worker, turn, call_id), (start, parent, name) in self._calls.items():
            kind: SpanKind = "tool_call" if call_id else "model_call"
            self._keep(
                next(self._ids), parent, kind, name, start, now, "cancelled", None, worker, turn,
                0, 0, 0.0, call_id, 1, 0,
            )  # fmt: skip
        for turn_span in self._turns.values():
            self._close(turn_span, now, "cancelled")
        for worker_span in self._workers.values():
            self._close(worker_span, now, "cancelled")
        self._calls.clear()
        self._turns.clear()
        self._workers.clear()
        self._close_phase(now)
        if self._run is not None:
            self._close(self._run, now, event.status, event.error)
            self._run = None

    # --- workers, turns and calls ---------------------------------------------------

    def _worker_started(self, event: _WorkerEvent) -> None:
        name = event.worker or "?"
        self._workers[name] = _Open(
            next(self._ids), "worker", name, self._clock(), self._run, name, None, event.role
        )

    def _worker_finished(self, event: _WorkerEvent) -> None:
        name = event.worker or "?"
        now = self._clock()
        turn = self._turns.pop(name, None)
        if turn is not None:
            self._close(turn, now)
        span = self._workers.pop(name, None)
        if span is None:  # skipped, or finished in an earlier life: no time of its own
            span = _Open(next(self._ids), "worker", name, now, self._run, name, None, event.role)
        self._close(span, now, event.status, event.error)

    def _owner(self, worker: str) -> _Open | None:
        """The span a worker's turns belong to: its own, or the plan or aggregate."""
        return self._workers.get(worker) or self._phase or self._run

    # The model and tool calls' events, and the same as plain arguments, as a Tracer
    # gives them to its recorder (runtime.events.CallRecorder).

    def _model_started(self, event: ModelCallStarted) -> None:
        self.model_call_started(event.worker, event.turn)

    def _model_finished(self, event: ModelCallFinished) -> None:
        self.model_call_finished(
            event.worker, event.turn, event.model, event.status, event.error,
            event.input_tokens, event.output_tokens, event.cost, event.attempts,
            event.reasoning_tokens,
        )  # fmt: skip

    def _tool_started(self, event: ToolCallStarted) -> None:
        self.tool_call_started(event.worker, event.turn, event.call_id, event.tool)

    def _tool_finished(self, event: ToolCallFinished) -> None:
        self.tool_call_finished(event.worker, event.turn, event.call_id, event.status, event.error)

    def model_call_started(self, worker: str | None, turn: int) -> None:
        """A model call started (its first in a turn starts the turn's span)."""
        name, now = worker or "?", self._clock()
        span = self._turns.get(name)
        if span is None or span.turn != turn:
            if span is not None:
                self._close(span, now)
            span = self._turns[name] = _Open(
                next(self._ids), "turn", f"turn {turn}", now, self._owner(name), name, turn
            )
        self._calls[name, turn, ""] = (now, span, "model")

    def model_call_finished(
        self,
        worker: str | None,
        turn: int,
        model: str,
        status: str,
        error: str | None,
        input_tokens: int,
        output_tokens: int,
        cost: float,
        attempts: int = 1,
        reasoning_tokens: int = 0,
    ) -> None:
        """A model call ended: its span, and its usage counted on its turn."""
        name = worker or "?"
        started = self._calls.pop((name, turn, ""), None)
        if started is not None:
            start, parent, _ = started
            self._keep(
                next(self._ids), parent, "model_call", model or "model", start, self._clock(),
                status, error, name, turn, input_tokens, output_tokens, cost, "", attempts,
                reasoning_tokens,
            )  # fmt: skip

    def tool_call_started(self, worker: str | None, turn: int, call_id: str, tool: str) -> None:
        """A tool call started (in its worker's current turn)."""
        name = worker or "?"
        parent = self._turns.get(name) or self._owner(name)
        self._calls[name, turn, call_id] = (self._clock(), parent, tool)

    def tool_call_finished(
        self, worker: str | None, turn: int, call_id: str, status: str, error: str | None
    ) -> None:
        """A tool call ended: its span (named by the tool its start named)."""
        name = worker or "?"
        started = self._calls.pop((name, turn, call_id), None)
        if started is not None:
            start, parent, tool = started
            self._keep(
                next(self._ids), parent, "tool_call", tool, start, self._clock(), status, error,
                name, turn, 0, 0, 0.0, call_id, 1, 0,
            )  # fmt: skip

    # --- spans that end -------------------------------------------------------------

    def _close(self, span: _Open, end: float, status: str = "ok", error: str | None = None) -> None:
        self._keep(
            span.span_id, span.parent, span.kind, span.name, span.start,
            end if end > span.end else span.end, status, error, span.worker, span.turn,
            span.input_tokens, span.output_tokens, span.cost, span.detail, 1,
            span.reasoning_tokens,
        )  # fmt: skip

    def _keep(
        self,
        span_id: str,
        parent: _Open | None,
        kind: SpanKind,
        name: str,
        start: float,
        end: float,
        status: str,
        error: str | None,
        worker: str | None,
        turn: int | None,
        input_tokens: int,
        output_tokens: int,
        cost: float,
        detail: str,
        attempts: int,
        reasoning_tokens: int,
    ) -> None:
        """A span that ended: it stretches its parent's end and adds its usage to the
        parent's, and is kept. (One function, called positionally, for every span: a
        traced run ends several per model turn.)"""
        if parent is None:
            parent_id = None
        else:
            parent_id = parent.span_id
            if end > parent.end:
                parent.end = end
            parent.input_tokens += input_tokens
            parent.output_tokens += output_tokens
            parent.cost += cost
            parent.reasoning_tokens += reasoning_tokens
        row = (
            span_id, parent_id, kind, name, start, end, status, error, worker, turn,
            input_tokens, output_tokens, cost, detail, attempts, reasoning_tokens,
        )  # fmt: skip
        self._rows.append(row)
        if self._on_close is not None:
            self._on_close(row)


def to_jsonl(spans: Iterable[Span]) -> str:
    """Spans as JSON lines, one object per span."""
    return "".join(json.dumps(s._asdict()) + "\n" for s in spans)


def from_jsonl(text: str) -> list[Span]:
    """Spans back from :func:`to_jsonl`."""
    return [Span(**json.loads(line)) for line in text.splitlines() if line.strip()]
