"""Spans: what ran when, what it waited on, and what it cost.

A run is a tree of spans: ``run`` → ``plan`` / ``worker`` / ``aggregate`` → ``turn`` →
``model_call`` / ``tool_call`` / ``compaction`` (the summary call that folded old turns
before the turn's model call); a worker's ``recall`` of its memory at its start is a
span of the worker too, and each call its memory made to its embeddings model an
``embedding`` span with what it cost (of the turn whose tool call made it, or of the
worker: its recall at its start, its answer kept), and each check of a ``guard`` is a
span of what it checked (the worker before its first turn, the turn of the answer or
calls it checked, or the plan or aggregate phase for a run's own guards), with what a
judge's call cost, and that call as a ``model_call`` span of its own under it. A
call's wait for a person's decision is an ``approval`` span of its turn, from when it
is asked about until the decision the worker goes on with (in the life that asked). A
nested worker (a role called as a tool, ``agent:ROLE``) is a ``worker`` span under the
``tool_call`` it runs for; the calls of a hive called as a tool (a sub-run, see
:meth:`SpanRecorder.nested`) are spans under its ``tool_call`` too, their workers
named ``CALLER/CALL/WORKER``, in every recorder of the run's spans
(:class:`SubRunSpans`). A call cut off ends no later than its worker, with the status
that says why.
:class:`SpanRecorder` builds them from the run's events as they happen (it is an event
handler). A run with a store keeps its spans there (``honeycomb trace RUN_ID``), and
:func:`to_jsonl` exports them.

The recorder knows the run's own events (``run.started``, ``worker.finished`` ...) by
their documented kind and fields (docs/events.md): they are defined by the package
that runs plans, which stands above this one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from itertools import count
from typing import Any, Literal, Protocol, runtime_checkable

import msgspec

from runtime import (
    ApprovalDecided,
    ApprovalRequested,
    CompactionFinished,
    CompactionStarted,
    Event,
    ModelCallFinished,
    ModelCallStarted,
    ToolCallFinished,
    ToolCallsAnswered,
    ToolCallStarted,
)
from runtime.events import event_time
from runtime.text import encode_json
from runtime.value import Value

__all__ = [
    "FAILURES",
    "FIELDS",
    "Span",
    "SpanKind",
    "SpanRecorder",
    "SubRunSpans",
    "from_jsonl",
    "to_jsonl",
]

SpanKind = Literal[
    "run",
    "plan",
    "worker",
    "aggregate",
    "turn",
    "model_call",
    "tool_call",
    "compaction",
    "recall",
    "guard",
    "embedding",
    "approval",
]


# benchmark F: made every call when tracing, never walked by the GC
class Span(Value, frozen=True, gc=False, kw_only=True, array_like=True):
    """One timed piece of a run. In JSON (a run store) it is an array of its fields in
    order, so spans written before a field was added still read, with its default.

    Attributes:
        span_id: Unique in its run (16 hex digits: the first 8 are its life's, drawn
            at random as the life starts, the rest count its spans).
        parent_id: The enclosing span (None for the run).
        kind: What it is.
        name: The task (run), subtask id (worker), model (model call, embedding), tool
            (tool call, approval), ``recall`` (a recall).
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
        detail: The tool call id (tool calls), the role (workers), the namespace
            (recalls), the kind and the call id checked (guards: ``arguments call_1``),
            ``memory`` (embeddings), the call id and who decided (approvals:
            ``call_1 by ann``).
        attempts: Attempts the model call took, retries included (1 for other spans).
        reasoning_tokens: Of the output tokens, those spent reasoning (summed as
            tokens are).
        cached_input_tokens: Of the input tokens, those read from the provider's cache
            (summed as tokens are).
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
    cached_input_tokens: int = 0

    @property
    def duration_s(self) -> float:
        return self.end - self.start


FIELDS = Span.__struct_fields__
"""Span attributes in order (a stored span's array)."""

FAILURES = frozenset(
    {"error", "failed", "timeout", "unknown", "cancelled", "interrupted", "over_budget"}
)
"""The statuses of spans that did not do what they were for (drawn as errors, ERROR in
OpenTelemetry). The others are outcomes: ``ok``, ``partial``, ``skipped`` (a repeat
not run again) and ``waiting`` (for a person's decision)."""


class _Open(msgspec.Struct, kw_only=True):
    """A span being recorded; it gathers the usage of what it encloses, which reaches
    the enclosing spans as it closes (every span closes before its parent)."""

    span_id: str
    kind: SpanKind
    name: str
    start: float
    parent: _Open | None
    worker: str | None = None
    turn: int | None = None
    detail: str = ""
    via: str | None = None  # the tool call a nested worker runs for: its span's parent
    calls: int = 0  # a turn's calls in flight: those its end cuts off, if it comes first
    end: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_input_tokens: int = 0
    cost: float = 0.0


# benchmark F: made every call when tracing, never walked by the GC
class _Call(msgspec.Struct, gc=False, kw_only=True):
    """A model or tool call in flight: when it started, its span's parent, its name,
    and its span's id (known from its start: a nested worker's span names it)."""

    start: float
    parent: _Open  # its turn
    name: str
    span_id: str = ""


class _RunEvent(Protocol):
    """What the recorder reads of ``run.started`` and ``run.finished``."""

    @property
    def task(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def error(self) -> str | None: ...


class _WorkerEvent(Protocol):
    """What the recorder reads of ``worker.started`` and ``worker.finished``."""

    @property
    def worker(self) -> str | None: ...
    @property
    def role(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def error(self) -> str | None: ...


class _NestedEvent(_WorkerEvent, Protocol):
    """What the recorder reads of ``worker.started`` for a nested worker: the call
    of its caller it runs for (all None for a subtask's worker)."""

    @property
    def parent(self) -> str | None: ...
    @property
    def call_id(self) -> str | None: ...
    @property
    def turn(self) -> int | None: ...


class _RecallEvent(Protocol):
    """What the recorder reads of ``memory.recalled``."""

    @property
    def worker(self) -> str | None: ...
    @property
    def namespace(self) -> str: ...
    @property
    def duration_s(self) -> float: ...
    @property
    def error(self) -> str | None: ...


class _EmbeddedEvent(Protocol):
    """What the recorder reads of ``memory.embedded``."""

    @property
    def worker(self) -> str | None: ...
    @property
    def model(self) -> str: ...
    @property
    def duration_s(self) -> float: ...
    @property
    def input_tokens(self) -> int: ...
    @property
    def cost(self) -> float: ...
    @property
    def error(self) -> str | None: ...


class _GuardEvent(Protocol):
    """What the recorder reads of ``guard.checked``."""

    @property
    def worker(self) -> str | None: ...
    @property
    def guard(self) -> str: ...
    @property
    def guard_kind(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def turn(self) -> int: ...
    @property
    def call_id(self) -> str: ...
    @property
    def duration_s(self) -> float: ...
    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def cost(self) -> float: ...
    @property
    def model(self) -> str: ...
    @property
    def model_calls(self) -> int: ...
    @property
    def attempts(self) -> int: ...


class SubRunSpans:
    """Where the spans of a run's sub-runs (hives called as tools) go: into every
    recorder of the run's spans, each a ``place`` (a recorder, and the prefix that
    names the run's workers there: ``''`` for its own run, ``CALLER/CALL/`` for the
    run of a sub-run's caller), under the call that runs each; the sub-runs they run
    in turn go there too, however deep."""

    def __init__(
        self, places: Iterable[tuple[SpanRecorder, str]], keepers: Iterable[object] = ()
    ) -> None:
        self.places = tuple(places)
        self.keepers = tuple(keepers)
        """The event handlers whose recorders the places are (the run's listeners, and
        its callers'): a sub-run gives them none of its events itself, as a handler of
        its own Executor too, for its spans reach them from here (else twice: a trace
        of their own, and the caller's corrupted by events of another run)."""

    @classmethod
    def of(
        cls,
        run_id: str,
        listeners: Iterable[object],
        spans: SpanRecorder | SubRunSpans | None = None,
    ) -> SubRunSpans:
        """Those of run ``run_id``: the recorders of its spans among the handlers of
        its events, ``listeners`` (its store's, and each span recorder and
        OpenTelemetry exporter it was given), and, for a sub-run, where its own
        spans go in its callers' runs (its ``spans``)."""
        above = spans if isinstance(spans, SubRunSpans) else None
        places = dict.fromkeys(above.places if above is not None else ())
        keepers = list(above.keepers if above is not None else ())
        for listener in listeners:
            if isinstance(listener, _KeepsSpans):
                recorder = listener.recorder_for(run_id)
                if recorder is not None:
                    places[recorder, ""] = None
                    keepers.append(listener)
        return cls(places, keepers)

    def nested(self, caller: str, turn: int, call_id: str) -> Callable[[Event], None]:
        """:meth:`SpanRecorder.nested` of every place, for a call of the run's worker
        ``caller``."""
        handlers = [r.nested(f"{prefix}{caller}", turn, call_id) for r, prefix in self.places]

        def handle(event: Event) -> None:
            for each in handlers:
                each(event)

        return handle

    def under(self, caller: str, call_id: str) -> SubRunSpans:
        """Where the spans of the sub-run that call ``call_id`` of the run's worker
        ``caller`` runs go, in turn, when it runs sub-runs of its own."""
        under = ((r, f"{prefix}{caller}/{call_id}/") for r, prefix in self.places)
        return SubRunSpans(under, self.keepers)


@runtime_checkable
class _KeepsSpans(Protocol):
    """An event handler that records the spans of the runs it is told of."""

    def recorder_for(self, run_id: str) -> SpanRecorder | None:
        """The recorder of run ``run_id``'s spans (None: it records none)."""
        ...


class SpanRecorder:
    """An event handler that turns one run's events into spans.

    Args:
        on_close: Called with each span as it ends (a run store keeps them).
        clock: Seconds since the epoch (default: when the event recorded happened,
            now, or, for a worker's in a Ray actor, told later, when it did there).
    """

    def __init__(
        self,
        on_close: Callable[[Span], None] | None = None,
        *,
        clock: Callable[[], float] = event_time,
    ) -> None:
        self.spans: list[Span] = []
        """The spans that have ended, in the order they ended."""
        self._rows: list[Span] = []  # of them, those a run's timings are made of
        self._on_close = on_close
        # Ids: 16 hex digits, a random prefix for the run and then a counter.
        self._ids = map(f"{os.urandom(4).hex()}%08x".__mod__, count(1))
        self._clock = clock
        self._end: float | None = None  # when the run ends, if it said so (times_until)
        self._run: _Open | None = None
        self._phase: _Open | None = None  # the plan or aggregate span, while open
        self._workers: dict[str, _Open] = {}
        self._turns: dict[str, _Open] = {}  # each worker's current turn
        # The workers whose current turn did not get to its end: it has tool calls whose
        # answers it has not yet, or a call of it was cut off.
        self._unfinished: set[str] = set()
        # The workers whose current turn's model call failed (its error): the turn did.
        self._failed: dict[str, str | None] = {}
        self._calls: dict[tuple[str, int, str], _Call] = {}  # by (worker, turn, call id)
        # The tool calls that run sub-runs (by span id), and their workers' names.
        self._anchors: dict[str, _Open] = {}
        self._foreign: dict[str, _Open] = {}
        self._handlers: dict[str, Callable[[Any], None]] = {
            "run.started": self._run_started,
            "run.plan_ready": self._plan_ready,
            "run.round_started": self._round_started,
            "run.round_planned": self._round_planned,
            "worker.started": self._worker_started,
            "worker.finished": self._worker_finished,
            ModelCallStarted.kind: self._model_started,
            ModelCallFinished.kind: self._model_finished,
            CompactionStarted.kind: self._compaction_started,
            CompactionFinished.kind: self._compaction_finished,
            ToolCallStarted.kind: self._tool_started,
            ToolCallFinished.kind: self._tool_finished,
            ToolCallsAnswered.kind: self._answered,
            "run.aggregation_started": self._aggregation_started,
            "run.aggregation_finished": self._aggregation_finished,
            "run.finished": self._run_finished,
            "memory.recalled": self._recalled,
            "memory.embedded": self._embedded,
            "guard.checked": self._guarded,
            ApprovalRequested.kind: self._approval_asked,
            ApprovalDecided.kind: self._approval_decided,
        }

    def __call__(self, event: Event) -> None:
        handle = self._handlers.get(event.kind)
        if handle is not None:
            handle(event)

    def handler_for(self, kind: str) -> Callable[[Any], None] | None:
        """What takes the events of ``kind`` (a tracer calls it in place of the
        recorder: :class:`~runtime.events.Routed`)."""
        return self._handlers.get(kind)

    def recorder_for(self, run_id: str) -> SpanRecorder:
        """Itself, the recorder of the one run whose events it is given: the sub-runs
        of that run (hives called as tools) record their spans here too."""
        return self

    def _open(
        self,
        kind: SpanKind,
        name: str,
        start: float,
        parent: _Open | None,
        *,
        worker: str | None = None,
        turn: int | None = None,
        detail: str = "",
    ) -> _Open:
        return _Open(
            span_id=next(self._ids),
            kind=kind,
            name=name,
            start=start,
            end=start,
            parent=parent,
            worker=worker,
            turn=turn,
            detail=detail,
        )

    # --- the run and its phases -----------------------------------------------------

    def _run_started(self, event: _RunEvent) -> None:
        now = self._clock()
        self._run = self._open("run", event.task, now, None)
        self._phase = self._open("plan", "plan", now, self._run)

    def _plan_ready(self, event: Event) -> None:
        if self._phase is not None and self._phase.kind == "plan":
            self._close_phase(self._clock())

    def _round_started(self, event: Any) -> None:
        """A lead plans a later round: a plan span of its own, ``round N``."""
        self._phase = self._open("plan", f"round {event.round}", self._clock(), self._run)

    def _round_planned(self, event: Any) -> None:
        if self._phase is not None and self._phase.kind == "plan":
            failed = event.error is not None
            self._close_phase(self._clock(), "error" if failed else "ok", event.error)

    def _aggregation_started(self, event: Event) -> None:
        self._phase = self._open("aggregate", "aggregate", self._clock(), self._run)

    def _aggregation_finished(self, event: Event) -> None:
        self._close_phase(self._clock())

    def _close_phase(self, now: float, status: str = "ok", error: str | None = None) -> None:
        """The plan or aggregate phase ends, ``status``; its turns end with it."""
        phase, self._phase = self._phase, None
        if phase is None:
            return
        for name in [n for n, turn in self._turns.items() if turn.parent is phase]:
            self._end_turn(name, now, status)
        self._close(phase, now, status, error)

    def times_until(self, end: float | None = None) -> list[Span]:
        """The run's spans as they will be when it ends at ``end`` (default: now),
        their usage aside, and that is when it ends: what a run says of its times as
        it ends (its result) is what its spans will say (``honeycomb trace``)."""
        end = self._ending(end)
        return [
            *self.spans,
            *(self._cut(key, call, end) for key, call in self._calls.items()),
            *self._still(end),
        ]

    def rows_until(self, end: float | None = None) -> list[Span]:
        """Of :meth:`times_until`, the spans a run's timings are made of: the run's,
        its phases' and its subtasks' workers' (their turns and calls, and nested
        workers, lie inside those; a run's end measures a few hundred spans, kept
        apart as they end, not every call's: benchmark F)."""
        end = self._ending(end)
        return [*self._rows, *(s for s in self._still(end) if self._is_row(s))]

    def _ending(self, end: float | None) -> float:
        """``end`` (default: now), when the run ends."""
        self._end = end = self._clock() if end is None else end
        return end

    def _still(self, end: float) -> list[Span]:
        """The spans still open, as they would end at ``end``."""
        still = [self._run, self._phase, *self._workers.values(), *self._turns.values()]
        return [self._closed(s, end, "running") for s in still if s is not None]

    def _is_row(self, span: Span) -> bool:
        """Whether ``span`` is one a run's timings are made of (:meth:`rows_until`)."""
        return span.kind in _OUTER or (span.kind == "worker" and span.parent_id == _id(self._run))

    def _run_finished(self, event: _RunEvent) -> None:
        """The run ends: what is still open ends with it, innermost first (what a span
        encloses adds its usage to it before it ends), as its end made it: a phase
        failed with a failed run (its error the run's), and the calls, turns and
        workers it cut off wait with it, were stopped by the budget, or cancelled."""
        now = self._end if self._end is not None else self._clock()
        self._end = None
        cut = _CUT_AS.get(event.status, "cancelled")
        for key in list(self._calls):
            if key in self._calls:  # (a sub-run's are cut off with the call that runs it)
                self._cut_off(key, now, cut)
        for name in reversed(list(self._workers)):  # nested workers before their callers
            self._end_turn(name, now, cut)
            self._close(self._workers.pop(name), now, cut)
        failed = event.status == "failed"
        self._close_phase(now, "error" if failed else cut, event.error if failed else None)
        for name in list(self._turns):
            self._end_turn(name, now, cut)
        self._anchors.clear()
        self._foreign.clear()
        if self._run is not None:
            self._close(self._run, now, event.status, event.error)
            self._run = None

    def _cut_off(self, key: tuple[str, int, str], end: float, status: str) -> None:
        """The call ``key`` in flight ends at ``end``, ``status``, without its own end
        (it never said how it ended): its turn did not get to its end either, and a
        sub-run it ran ends with it, what that spent being the call's."""
        call = self._calls.pop(key)
        span = self._cut(key, call, end, status)
        call.parent.calls -= 1
        self._unfinished.add(key[0])
        anchor = self._anchors.pop(call.span_id, None)
        if anchor is not None:  # it ran a sub-run: what that spent, it spent
            self._sub_run_ended(anchor, end, status)
        self._keep(span, call.parent, anchor)

    def _cut(
        self, key: tuple[str, int, str], call: _Call, end: float, status: str = "cancelled"
    ) -> Span:
        """The span of a call cut off at ``end`` (by its worker's end, or the run's)."""
        worker, turn, call_id = key
        kind: SpanKind = "tool_call" if call_id else "model_call"
        if call_id == _COMPACTION:
            kind, call_id = "compaction", ""
        elif call_id.startswith(_APPROVAL):
            kind, call_id = "approval", call_id.removeprefix(_APPROVAL)
        return Span(
            span_id=call.span_id or next(self._ids),
            parent_id=call.parent.span_id,
            kind=kind,
            name=call.name,
            start=call.start,
            end=end,
            status=status,
            worker=worker,
            turn=turn,
            detail=call_id,
        )

    # --- workers, turns and calls ---------------------------------------------------

    def _worker_started(self, event: _NestedEvent) -> None:
        """A worker starts: a subtask's, under the run; or a nested one, under the
        tool call of its caller it runs for (its usage counts on the caller's turn)."""
        name = event.worker or "?"
        parent, via = self._run, None
        caller = getattr(event, "parent", None)
        if caller is not None:
            call = self._calls.get((caller, event.turn or 0, event.call_id or ""))
            if call is not None:
                parent, via = call.parent, call.span_id
        span = self._open("worker", name, self._clock(), parent, worker=name, detail=event.role)
        span.via = via
        self._workers[name] = span

    def _worker_finished(self, event: _WorkerEvent) -> None:
        name = event.worker or "?"
        now = self._clock()
        self._end_turn(name, now, event.status)
        span = self._workers.pop(name, None)
        if span is None:  # skipped, or finished in an earlier life: no time of its own
            span = self._open("worker", name, now, self._run, worker=name, detail=event.role)
        self._close(span, now, event.status, event.error)

    def _owner(self, worker: str) -> _Open | None:
        """The span a worker's turns belong to: its own, the tool call of a sub-run's
        worker, or the plan or aggregate."""
        return self._workers.get(worker) or self._foreign.get(worker) or self._phase or self._run

    def _turn(self, name: str, turn: int, now: float) -> _Open:
        """The span of the worker's turn ``turn``, opened by its first call."""
        span = self._turns.get(name)
        if span is None or span.turn != turn:
            if span is not None:  # (most turns ended as their answers came)
                self._end_turn(name, now)
            span = self._turns[name] = self._open(
                "turn", f"turn {turn}", now, self._owner(name), worker=name, turn=turn
            )
        return span

    def _model_started(self, event: ModelCallStarted) -> None:
        """A model call started (its first in a turn starts the turn's span)."""
        name, turn, now = event.worker or "?", event.turn, self._clock()
        parent = self._turn(name, turn, now)
        parent.calls += 1
        self._calls[name, turn, ""] = _Call(start=now, parent=parent, name="model")

    def _compaction_started(self, event: CompactionStarted) -> None:
        """A summary call started, before the turn's model call (in the turn's span)."""
        name, turn, now = event.worker or "?", event.turn, self._clock()
        parent = self._turn(name, turn, now)
        parent.calls += 1
        self._calls[name, turn, _COMPACTION] = _Call(start=now, parent=parent, name="model")

    def _compaction_finished(self, event: CompactionFinished) -> None:
        """A summary call ended: its span, and its usage counted on its turn."""
        detail = f"{event.messages} messages folded"
        self._model_call_ended(event, _COMPACTION, "compaction", detail)

    def _model_finished(self, event: ModelCallFinished) -> None:
        """A model call ended: its span, and its usage counted on its turn."""
        self._model_call_ended(event, "", "model_call", "")

    def _model_call_ended(
        self, event: ModelCallFinished | CompactionFinished, key: str, kind: SpanKind, detail: str
    ) -> None:
        name = event.worker or "?"
        call = self._calls.pop((name, event.turn, key), None)
        if call is not None:
            call.parent.calls -= 1
            if event.status == "cancelled":  # its worker was: the turn ends unfinished
                self._unfinished.add(name)
            elif isinstance(event, ModelCallFinished):  # (a summary call's turn goes on)
                if event.status == "error":  # the turn has no answer
                    self._failed[name] = event.error
                elif event.tool_calls:  # the turn ends once the worker has their answers
                    self._unfinished.add(name)
            span = Span(
                span_id=next(self._ids),
                parent_id=call.parent.span_id,
                kind=kind,
                name=event.model or "model",
                start=call.start,
                end=self._clock(),
                status=event.status,
                error=event.error,
                worker=name,
                turn=event.turn,
                attempts=event.attempts,
                detail=detail,
            )
            self._keep(span, call.parent, event)

    def _tool_started(self, event: ToolCallStarted) -> None:
        """A tool call started, in its worker's turn (opened by it in a life that
        runs the calls a turn of an earlier life asked for)."""
        name, now = event.worker or "?", self._clock()
        parent = self._turn(name, event.turn, now)
        parent.calls += 1
        self._unfinished.add(name)
        self._calls[name, event.turn, event.call_id] = _Call(
            start=now, parent=parent, name=event.tool, span_id=next(self._ids)
        )

    def _tool_finished(self, event: ToolCallFinished) -> None:
        """A tool call ended: its span (named by the tool its start named). One that
        never started was answered without running (denied, refused by a guard, its
        arguments invalid, a repeat skipped): a span of no length, for it was a call
        all the same."""
        name, now = event.worker or "?", self._clock()
        call = self._calls.pop((name, event.turn, event.call_id), None)
        if call is None:
            parent = self._turn(name, event.turn, now)
            call = _Call(start=now, parent=parent, name=event.tool, span_id=next(self._ids))
        else:
            call.parent.calls -= 1
        self._unfinished.add(name)
        span = Span(
            span_id=call.span_id,
            parent_id=call.parent.span_id,
            kind="tool_call",
            name=call.name,
            start=call.start,
            end=now,
            status=event.status,
            error=event.error,
            worker=name,
            turn=event.turn,
            detail=event.call_id,
        )
        anchor = self._anchors.pop(call.span_id, None)
        if anchor is not None:  # it ran a sub-run: what that spent, it spent
            self._sub_run_ended(anchor, now)
        self._keep(span, call.parent, anchor)

    def _approval_asked(self, event: ApprovalRequested) -> None:
        """A call of the worker's turn waits for a person's decision: a wait in flight in
        the turn, cut off with it if it ends first (as the run ends ``waiting``)."""
        name, now = event.worker or "?", self._clock()
        parent = self._turn(name, event.turn, now)
        parent.calls += 1
        self._calls[name, event.turn, _APPROVAL + event.call_id] = _Call(
            start=now, parent=parent, name=event.tool, span_id=next(self._ids)
        )

    def _approval_decided(self, event: ApprovalDecided) -> None:
        """The worker goes on with a decision: the wait's span ends, ``approved`` or
        ``denied`` (the reason its error). A call asked about in an earlier life has no
        span of this life: the time it waited is not this life's."""
        key = (event.worker or "?", event.turn, _APPROVAL + event.call_id)
        call = self._calls.pop(key, None)
        if call is None:
            return
        call.parent.calls -= 1
        ended = self._cut(key, call, self._clock(), "approved" if event.approved else "denied")
        span = msgspec.structs.replace(
            ended,
            error=None if event.approved else event.reason,
            detail=f"{event.call_id} by {event.by}",
        )
        self._keep(span, call.parent)

    def _answered(self, event: ToolCallsAnswered) -> None:
        """The worker has its turn's answers: the turn is done, and its tool calls are
        calls (:func:`honeycomb.trace.lives.lives_of` counts those of a turn done)."""
        name = event.worker or "?"
        turn = self._turns.get(name)
        if turn is not None and turn.turn == event.turn:
            self._unfinished.discard(name)
            self._end_turn(name, self._clock())

    def _end_turn(self, name: str, now: float, worker: str = "ok") -> None:
        """The worker's current turn ends (if it has one): ``ok``, or, if it did not
        get to its end (its tool calls' answers never reached the worker, or a call of
        it was cut off), ``cancelled`` (or the status the worker ended with, as
        ``waiting``). Its calls still in flight end with it (``cancelled``, or as they
        wait or were stopped by the budget with it): they never said how they ended (an
        actor that died), and none ends after its worker."""
        span = self._turns.pop(name, None)
        failed, error = name in self._failed, self._failed.pop(name, None)
        if span is None:
            return
        if span.calls:
            cut = _CUT_AS.get(worker, "cancelled")
            for key in [k for k, call in self._calls.items() if call.parent is span]:
                self._cut_off(key, now, cut)
        status = "error" if failed else "ok"
        if name in self._unfinished:
            self._unfinished.discard(name)
            status = worker if worker != "ok" else "cancelled"
        self._close(span, now, status, error)

    def _recalled(self, event: _RecallEvent) -> None:
        """A worker searched its memory at its start: a span of the worker, as long as
        the search took."""
        name, now = event.worker or "?", self._clock()
        parent = self._owner(name)
        span = Span(
            span_id=next(self._ids),
            parent_id=_id(parent),
            kind="recall",
            name="recall",
            start=now - event.duration_s,
            end=now,
            status="error" if event.error else "ok",
            error=event.error,
            worker=name,
            detail=event.namespace,
        )
        self._keep(span, parent)

    def _embedded(self, event: _EmbeddedEvent) -> None:
        """A worker's memory called its embeddings model: a span, as long as the call
        took, with what it spent (the run's budget counts it), of the worker's turn
        whose tool call made it (a turn with calls in flight), else of the worker."""
        name, now = event.worker or "?", self._clock()
        turn = self._turns.get(name)
        if turn is not None and not turn.calls:  # its recall or answer, not a tool's
            turn = None
        parent = turn if turn is not None else self._owner(name)
        span = Span(
            span_id=next(self._ids),
            parent_id=_id(parent),
            kind="embedding",
            name=event.model,
            start=now - event.duration_s,
            end=now,
            status="error" if event.error else "ok",
            error=event.error,
            worker=name,
            turn=turn.turn if turn is not None else None,
            detail="memory",
            input_tokens=event.input_tokens,
            cost=event.cost,
        )
        self._keep(span, parent, span)

    def _guarded(self, event: _GuardEvent) -> None:
        """A guard checked an instruction, an answer or a call: a span of the worker's
        turn (or of the worker, or the phase), as long as the check took."""
        name, now = event.worker or "?", self._clock()
        turn = self._turns.get(name)
        parent = turn if turn is not None and turn.turn == event.turn else self._owner(name)
        detail = f"{event.guard_kind} {event.call_id}".strip()
        span = Span(
            span_id=next(self._ids),
            parent_id=_id(parent),
            kind="guard",
            name=event.guard,
            start=now - event.duration_s,
            end=now,
            status=event.status,
            error=event.reason,
            worker=event.worker,
            turn=event.turn or None,
            detail=detail,
            input_tokens=event.input_tokens,
            output_tokens=event.output_tokens,
            cost=event.cost,
        )
        if event.model_calls:  # a judge's call: a model call, its usage the guard's
            cut = event.status == "cancelled"  # its worker was, with its call
            answered = "ok" if event.model else "cancelled" if cut else "error"
            judged = msgspec.structs.replace(
                span,
                span_id=next(self._ids),
                parent_id=span.span_id,
                kind="model_call",
                name=event.model or "model",
                status=answered,
                error=None,
                detail="",
                attempts=event.attempts,
            )
            self._keep(judged, None)  # its usage reaches the guard's parent through it
        self._keep(span, parent, span)

    # --- sub-runs (a hive called as a tool) -----------------------------------------

    def nested(self, caller: str, turn: int, call_id: str) -> Callable[[Event], None]:
        """The event handler of a sub-run that the tool call ``call_id`` of worker
        ``caller`` in turn ``turn`` runs (a hive called as a tool): the sub-run's
        calls (model, summary, tool, guard, recall, embedding) and nested workers become spans
        under that call, its workers named ``CALLER/CALL/WORKER`` (``CALLER/CALL`` for
        its own guards), and what they spend is the call's (its turn's, its worker's,
        the run's). The sub-run's phases and workers have no spans of their own."""
        call = self._calls.get((caller, turn, call_id))
        if call is None:  # not a call this recorder saw start
            return lambda event: None
        anchor = self._anchors.setdefault(
            call.span_id,
            _Open(
                span_id=call.span_id,
                kind="tool_call",
                name=call.name,
                start=call.start,
                parent=call.parent,
            ),
        )
        prefix = f"{caller}/{call_id}"

        def handle(event: Event) -> None:
            if event.kind not in _NESTED or anchor.span_id not in self._anchors:
                return
            own = getattr(event, "worker", None)
            name = f"{prefix}/{own}" if own else prefix
            changes: dict[str, Any] = {"worker": name}
            parent = getattr(event, "parent", None)
            if parent is not None:
                changes["parent"] = f"{prefix}/{parent}"
            self._foreign.setdefault(name, anchor)
            if event.kind == "worker.finished" and name not in self._workers:
                ended = getattr(event, "status", "ok")
                self._end_turn(name, self._clock(), ended)  # a sub-run's own worker
                return
            if event.kind == "worker.started" and parent is None:
                return  # a sub-run's own worker: its spans go under the call
            self(msgspec.structs.replace(event, **changes))

        return handle

    def _sub_run_ended(self, anchor: _Open, now: float, status: str = "ok") -> None:
        """A sub-run's call ended (``status``, if it was cut off): the turns of its
        workers end with it."""
        for name in [n for n, turn in self._turns.items() if turn.parent is anchor]:
            self._end_turn(name, now, status)
        for name in [n for n, owner in self._foreign.items() if owner is anchor]:
            del self._foreign[name]

    # --- spans that end -------------------------------------------------------------

    def _close(self, span: _Open, end: float, status: str = "ok", error: str | None = None) -> None:
        kept = self._keep(self._closed(span, end, status, error), span.parent, span)
        if self._is_row(kept):
            self._rows.append(kept)

    @staticmethod
    def _closed(span: _Open, end: float, status: str, error: str | None = None) -> Span:
        """``span`` as it ends at ``end`` (or later, where what it encloses did)."""
        return Span(
            span_id=span.span_id,
            parent_id=span.via or _id(span.parent),
            kind=span.kind,
            name=span.name,
            start=span.start,
            end=max(end, span.end),
            status=status,
            error=error,
            worker=span.worker,
            turn=span.turn,
            detail=span.detail,
        )

    def _keep(self, span: Span, parent: _Open | None, usage: _Usage | None = None) -> Span:
        """A span that ended, with the usage of what it stood for (``usage``: a model
        call's event, an open span's; None: it spent nothing, as a tool call): it
        stretches its parent's end and adds its usage to the parent's, and is kept.
        Returns it as kept."""
        if usage is not None and (
            usage.input_tokens
            or usage.output_tokens
            or usage.cost
            or usage.reasoning_tokens
            or usage.cached_input_tokens
        ):
            if usage is not span:  # (apart from its other fields: a call of sixteen
                # keywords or more builds a dict, which costs more than two calls)
                span = msgspec.structs.replace(
                    span,
                    input_tokens=usage.input_tokens,
                    output_tokens=usage.output_tokens,
                    cost=usage.cost,
                    reasoning_tokens=usage.reasoning_tokens,
                    cached_input_tokens=usage.cached_input_tokens,
                )
            if parent is not None:
                parent.input_tokens += span.input_tokens
                parent.output_tokens += span.output_tokens
                parent.reasoning_tokens += span.reasoning_tokens
                parent.cached_input_tokens += span.cached_input_tokens
                parent.cost += span.cost
        if parent is not None and span.end > parent.end:
            parent.end = span.end
        self.spans.append(span)
        if self._on_close is not None:
            self._on_close(span)
        return span


_NESTED = frozenset(
    {
        ModelCallStarted.kind,
        ModelCallFinished.kind,
        CompactionStarted.kind,
        CompactionFinished.kind,
        ToolCallStarted.kind,
        ToolCallFinished.kind,
        ToolCallsAnswered.kind,
        "guard.checked",
        "memory.recalled",
        "memory.embedded",
        ApprovalRequested.kind,
        ApprovalDecided.kind,
        "worker.started",
        "worker.finished",
    }
)
"""The events of a sub-run that make spans in its caller's run (:meth:`SpanRecorder.nested`)."""

_CUT_AS = {"waiting": "waiting", "over_budget": "over_budget"}
"""What the end of a run (or of a worker) makes of what it cuts off, by its status:
it waits with it, or the budget stopped it; else it was cancelled."""

_OUTER = frozenset({"run", "plan", "aggregate"})
"""The kinds of span of a run and its phases (a later round's plan too)."""

_COMPACTION = "\0compaction"
"""The key of a summary call in flight among the calls (no tool call has this id)."""

_APPROVAL = "\0approval "
"""Before a call's id, the key of its wait for a decision among the calls in flight."""


def _id(span: _Open | None) -> str | None:
    return span.span_id if span is not None else None


class _Usage(Protocol):
    """What a span's usage is read from: a model call's event, an open span, or the
    span itself."""

    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def cost(self) -> float: ...
    @property
    def reasoning_tokens(self) -> int: ...
    @property
    def cached_input_tokens(self) -> int: ...


def to_jsonl(spans: Iterable[Span]) -> str:
    """Spans as JSON lines, one object per span (lone surrogates in their text replaced
    by U+FFFD: JSON is UTF-8)."""
    return "".join(encode_json(msgspec.structs.asdict(s)).decode() + "\n" for s in spans)


_DEFAULTS = {f.name: f.default for f in msgspec.structs.fields(Span)}


def from_jsonl(text: str) -> list[Span]:
    """Spans back from :func:`to_jsonl`.

    Raises:
        msgspec.ValidationError: (a ``ValueError``) naming the line and what is wrong.
    """
    spans: list[Span] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            found = msgspec.json.decode(line, type=dict[str, Any])
            missing = [n for n, d in _DEFAULTS.items() if d is msgspec.NODEFAULT and n not in found]
            if missing:
                raise msgspec.ValidationError(f"missing {', '.join(missing)}")
            spans.append(msgspec.convert([found.get(n, d) for n, d in _DEFAULTS.items()], Span))
        except msgspec.ValidationError as exc:
            raise msgspec.ValidationError(f"line {number}: {exc}") from exc
    return spans
