"""A run's timeline: its spans laid out as one row per worker, with the critical path.

:func:`build_timeline` turns the spans a run store keeps (:mod:`honeycomb.trace.spans`) and
the run's plan into a :class:`Timeline`: a row for the planner, one per subtask and
one for the aggregator (in a run planned in rounds, a row for each round's planning
before that round's subtasks), each with its model and tool calls as bars (seconds since
the run started), the chain of workers that bounds the run (the critical path), and
the totals. :mod:`honeycomb.trace.terminal` draws it in a terminal and
:mod:`honeycomb.trace.html` as a web page (``honeycomb trace RUN_ID``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from honeycomb.trace.critical import Figures, figures
from honeycomb.trace.lives import IN_TIME, Life, lives_of
from honeycomb.trace.rows import Gather, PlannedSubtask, RowKind, group_rows
from honeycomb.trace.spans import FAILURES, Span
from runtime.value import Value

__all__ = [
    "Bar",
    "Measured",
    "PlannedSubtask",
    "Row",
    "RowKind",
    "Timeline",
    "build_timeline",
    "measure",
]

_PHASES: tuple[RowKind, ...] = ("plan", "aggregate")


class Bar(Value, frozen=True, kw_only=True):
    """One model or tool call on a row.

    Attributes:
        kind: ``model_call``, ``tool_call``, or ``compaction`` (a summary call).
        name: The model or the tool.
        start: Seconds since the run started.
        end: Seconds since the run started.
        status: As its span said (``ok``, ``error``, ``timeout`` ...).
        error: What went wrong, if something did.
        turn: The worker's turn.
        input_tokens: Tokens in (model calls).
        output_tokens: Tokens out (model calls).
        cost: Dollars (model calls).
        cached_input_tokens: Of the tokens in, those read from the provider's cache.
        lane: Where on its row it is drawn: 0, or, for a call that overlaps calls
            drawn before it (tool calls run in parallel), the first lane below them
            that is free (a row has :attr:`Row.lanes` of them).
    """

    kind: Literal["model_call", "tool_call", "compaction"]
    name: str
    start: float
    end: float
    status: str = "ok"
    error: str | None = None
    turn: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    cached_input_tokens: int = 0
    lane: int = 0

    @property
    def duration_s(self) -> float:
        return self.end - self.start

    @property
    def outcome(self) -> Literal["done", "failed", "timeout", "waiting"]:
        """How it is drawn: done (``ok``, or a repeat ``skipped``), failed, timed out,
        or waiting for a person's decision."""
        if self.status == "timeout":
            return "timeout"
        if self.status in FAILURES:
            return "failed"
        return "waiting" if self.status == "waiting" else "done"


class Row(Value, frozen=True, kw_only=True):
    """The planner, one worker, or the aggregator.

    Attributes:
        name: The subtask id, or ``plan`` / ``aggregate``.
        kind: ``plan``, ``worker`` or ``aggregate``.
        role: The worker's role ('' for the phases).
        start: First moment it ran, in seconds since the run started.
        end: Last moment it ran.
        duration_s: Time it ran (the sum over the run's lives).
        status: How it ended (``not started`` for a subtask with no span).
        error: What went wrong, if something did.
        depends_on: The subtasks it waited for.
        critical: Whether it is on the critical path.
        bars: Its model and tool calls, by start.
        round: The planning round it belongs to (1 unless the run planned in rounds;
            the aggregator's is the last).
        parent: For a nested worker (a role called as a tool), the row of its
            caller; it comes right after its caller's row (and its earlier nested
            ones).
        depth: How deep it is nested (0: a subtask's worker, or a phase).
        periods: The stretches it ran (one a life it ran in), each a start and an
            end in seconds since the run started.
    """

    name: str
    kind: RowKind
    role: str
    start: float
    end: float
    duration_s: float
    status: str
    error: str | None = None
    depends_on: tuple[str, ...] = ()
    critical: bool = False
    bars: tuple[Bar, ...] = ()
    round: int = 1
    parent: str | None = None
    depth: int = 0
    periods: tuple[tuple[float, float], ...] = ()

    @property
    def lanes(self) -> int:
        """How many lanes its calls take: the most of them that ran at once."""
        return 1 + max((b.lane for b in self.bars), default=0)

    @property
    def label(self) -> str:
        """How the row is named on screen: a nested worker indented under its
        caller, by its role."""
        if not self.depth:
            return self.name
        return f"{'  ' * (self.depth - 1)}↳ {self.role or self.name}"

    @property
    def input_tokens(self) -> int:
        return sum(b.input_tokens for b in self.bars)

    @property
    def output_tokens(self) -> int:
        return sum(b.output_tokens for b in self.bars)

    @property
    def cost(self) -> float:
        return sum(b.cost for b in self.bars)


class Timeline(Value, frozen=True, kw_only=True):
    """A run laid out in time.

    Attributes:
        run_id: The run.
        task: Its task.
        status: How it ended.
        rows: Planner, workers in plan order, aggregator (phases only if they ran);
            a later round's planning row (``round N``) comes before its workers.
        critical_path: The chain of subtask ids that bounds the run, first to last
            (of the workers that ran).
        length_s: The time axis: first span start to last span end.
        wall_s: Time the run ran (the sum over its lives).
        plan_s: Planning.
        aggregate_s: Aggregation.
        critical_path_s: Planning, the critical chain of workers, and aggregation.
        sum_worker_s: Every worker's time added up.
        serial_s: Planning, every worker one after another, and aggregation.
        speedup: ``serial_s / wall_s``.
        lives: Each time the run was started or resumed, with what it spent;
            ``model_calls``, ``tool_calls``, ``input_tokens`` (summary calls,
            judges and the memory's embeddings included), ``output_tokens``, ``cost`` and
            ``cached_input_tokens`` add them up.
        compactions: How many of the model calls were summary calls.
        workers_s: The worker phases, first worker start to last worker end (the
            sum over the lives).
    """

    run_id: str
    task: str
    status: str
    rows: tuple[Row, ...]
    critical_path: tuple[str, ...]
    length_s: float
    wall_s: float
    plan_s: float
    aggregate_s: float
    critical_path_s: float
    sum_worker_s: float
    serial_s: float
    speedup: float
    lives: tuple[Life, ...] = ()
    compactions: int = 0
    workers_s: float = 0.0

    @property
    def so_far(self) -> str | None:
        """What a view says of a run still going (None: it ended): its figures are
        those of the calls that ended, as a run's spans are kept as they close."""
        if self.status != "running":
            return None
        return "still running: only the calls that have ended are drawn and counted"

    @property
    def model_calls(self) -> int:
        return sum(life.model_calls for life in self.lives)

    @property
    def tool_calls(self) -> int:
        return sum(life.tool_calls for life in self.lives)

    @property
    def input_tokens(self) -> int:
        return sum(life.input_tokens for life in self.lives)

    @property
    def output_tokens(self) -> int:
        return sum(life.output_tokens for life in self.lives)

    @property
    def cost(self) -> float:
        return sum(life.cost for life in self.lives)

    @property
    def cached_input_tokens(self) -> int:
        return sum(life.cached_input_tokens for life in self.lives)

    @property
    def cached_share(self) -> float:
        """The share of the tokens in read from the provider's cache (0 to 1)."""
        return self.cached_input_tokens / self.input_tokens if self.input_tokens else 0.0

    @property
    def workers(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if r.kind == "worker")

    @property
    def subtask_workers(self) -> tuple[Row, ...]:
        """The subtasks' workers, not those nested in them (called as tools)."""
        return tuple(r for r in self.rows if r.kind == "worker" and not r.depth)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def path(self) -> tuple[str, ...]:
        """The critical path with the phases that ran: ``plan``, workers, ``aggregate``."""
        ran = {r.kind for r in self.rows if r.kind != "worker" and r.duration_s > 0}
        return (
            *(("plan",) if "plan" in ran else ()),
            *self.critical_path,
            *(("aggregate",) if "aggregate" in ran else ()),
        )


class Measured(Value, frozen=True, kw_only=True):
    """A run's figures as its spans tell them, before its rows are laid out: what
    :func:`build_timeline` shows, and what a run's result says at its end
    (:func:`measure`, which lays out no rows: a traced run measures itself as it ends).

    Attributes:
        spans: The spans, in order of start.
        groups: Each row's spans.
        lives: Each time the run was started or resumed.
        found: How its time adds up.
        origin: When it first started (seconds since the epoch).
        length_s: First span start to last span end.
    """

    spans: tuple[Span, ...]
    groups: tuple[Gather, ...]
    lives: tuple[Life, ...]
    found: Figures
    origin: float
    length_s: float

    @property
    def workers_s(self) -> float:
        """The worker phases, first worker start to last worker end (over the lives)."""
        return sum(life.workers_s for life in self.lives)


def measure(
    spans: Iterable[Span],
    subtasks: Sequence[PlannedSubtask] = (),
    *,
    calls: bool = False,
    phases: Mapping[str, str] | None = None,
) -> Measured:
    """One run's figures from its spans (every life of it) and its plan; ``calls``:
    its groups hold the calls each row shows too (what a timeline lays out);
    ``phases``: the planner's and aggregator's workers under way, as
    :func:`~honeycomb.trace.rows.group_rows` takes them."""
    ordered = sorted(spans, key=IN_TIME)
    origin = min((s.start for s in ordered), default=0.0)
    length = max((s.end for s in ordered), default=origin) - origin
    lives = lives_of(ordered, origin)
    groups = group_rows(ordered, subtasks, calls=calls, phases=phases)
    # A nested worker's time is inside its caller's: only subtasks' workers count.
    durations = {g.name: _busy(g.own) for g in groups if g.kind == "worker" and not g.depth}
    plan_s, aggregate_s = (sum(_busy(g.own) for g in groups if g.kind == k) for k in _PHASES)
    found = figures(
        wall_s=sum(life.wall_s for life in lives),
        plan_s=plan_s,
        aggregate_s=aggregate_s,
        durations=durations,
        subtasks=subtasks,
    )
    return Measured(
        spans=tuple(ordered),
        groups=tuple(groups),
        lives=lives,
        found=found,
        origin=origin,
        length_s=length,
    )


def build_timeline(
    spans: Iterable[Span],
    subtasks: Sequence[PlannedSubtask] = (),
    *,
    run_id: str = "",
    task: str | None = None,
    status: str | None = None,
    statuses: Mapping[str, str] | None = None,
    phases: Mapping[str, str] | None = None,
) -> Timeline:
    """Lay out one run's spans (every life of it) with its plan's dependencies.

    Args:
        spans: The run's spans, as ``RunStore.spans`` gives them.
        subtasks: The run's plan (its subtasks); without it workers count as
            independent.
        run_id: The run's id, to show.
        task: The run's task (default: the run span's name).
        status: How the run ended (default: the last run span's status).
        statuses: What each worker is at, by name, where something knows better
            than its spans (a stored run: :func:`honeycomb.run.shown.worker_statuses`).
        phases: The planner's and aggregator's workers under way (their names in
            the run's store, and the row of each: ``plan``, ``round 2``,
            ``aggregate``), whose calls' spans are kept before their phase's: a
            stored run's, :func:`honeycomb.run.shown.stored_timeline`.
    """
    measured = measure(spans, subtasks, calls=True, phases=phases)
    found, origin = measured.found, measured.origin
    runs = [s for s in measured.spans if s.kind == "run"]
    depends_on = {s.id: s.depends_on for s in subtasks}
    on_path = set(found.critical_path)
    told = statuses or {}
    status = status or (runs[-1].status if runs else "unknown")
    rows = tuple(
        _row(
            g,
            origin,
            depends_on.get(g.name, ()),
            g.kind != "worker" or g.name in on_path,
            _status(g, told.get(g.name) if g.kind == "worker" else None, status),
        )
        for g in measured.groups
    )
    calls = [s for s in measured.spans if s.kind in ("model_call", "compaction")]
    return Timeline(
        run_id=run_id,
        task=task if task is not None else (runs[0].name if runs else ""),
        status=status,
        rows=rows,
        critical_path=found.critical_path,
        length_s=measured.length_s,
        wall_s=found.wall_s,
        plan_s=found.plan_s,
        aggregate_s=found.aggregate_s,
        critical_path_s=found.critical_path_s,
        sum_worker_s=found.sum_worker_s,
        serial_s=found.serial_s,
        speedup=found.speedup,
        lives=measured.lives,
        compactions=sum(1 for s in calls if s.kind == "compaction"),
        workers_s=measured.workers_s,
    )


def _busy(own: Sequence[Span]) -> float:
    return sum(s.duration_s for s in own)


def _row(
    group: Gather, origin: float, depends: tuple[str, ...], critical: bool, status: str
) -> Row:
    timed = group.own or group.calls
    start = min((s.start for s in timed), default=origin) - origin
    end = max((s.end for s in timed), default=origin) - origin
    last = group.own[-1] if group.own else None
    periods = tuple((s.start - origin, s.end - origin) for s in group.own if s.end > s.start)
    if not group.own and end > start:  # calls outside any phase: the stretch they span
        periods = ((start, end),)
    return Row(
        name=group.name,
        kind=group.kind,
        role=group.role,
        start=start,
        end=end,
        duration_s=_busy(group.own) if group.own else end - start,
        status=status,
        error=last.error if last is not None else None,
        depends_on=depends if group.kind == "worker" else (),
        critical=critical and not group.depth and bool(timed),
        bars=_in_lanes(group.calls, origin),
        round=group.round,
        parent=group.parent,
        depth=group.depth,
        periods=periods,
    )


def _status(group: Gather, told: str | None, run: str) -> str:
    """What ``group``'s row is at: as ``told`` (a worker's, if known), else as its
    last span ended; one whose calls are kept after that span, or with none (a span
    is kept as it ends), is at what its ``run`` is (``running``); one with neither
    has ``not started``."""
    last = group.own[-1] if group.own else None
    if told is not None:
        return told
    if last is not None and last.end >= max((c.end for c in group.calls), default=0):
        return last.status  # (a span ends after the calls it encloses)
    return run if group.calls else "not started"


_BAR_KINDS: dict[str, Literal["model_call", "tool_call", "compaction"]] = {
    "model_call": "model_call",
    "compaction": "compaction",
}


def _in_lanes(calls: Sequence[Span], origin: float) -> tuple[Bar, ...]:
    """A row's calls (in order of start) as bars, each in the first lane where the
    calls before it have ended: calls that ran at once are drawn one under another,
    not one over another."""
    ends: list[float] = []  # where each lane is free from
    bars: list[Bar] = []
    for span in calls:
        lane = next((i for i, end in enumerate(ends) if end <= span.start), len(ends))
        if lane == len(ends):
            ends.append(span.end)
        else:
            ends[lane] = span.end
        bars.append(_bar(span, origin, lane))
    return tuple(bars)


def _bar(span: Span, origin: float, lane: int) -> Bar:
    return Bar(
        kind=_BAR_KINDS.get(span.kind, "tool_call"),
        name=span.name,
        start=span.start - origin,
        end=span.end - origin,
        status=span.status,
        error=span.error,
        turn=span.turn,
        input_tokens=span.input_tokens,
        output_tokens=span.output_tokens,
        cost=span.cost,
        cached_input_tokens=span.cached_input_tokens,
        lane=lane,
    )
