"""A run's lives: each time it was started or resumed, until it stopped (finished,
waited for a person, was interrupted, or its process died), and what each spent.

The spans of one life have ids of one prefix (each life records its own), so the
spans a run store keeps tell the lives apart, even a life whose process died before
its ``run`` span was written (then its extent is that of the spans it left). An
:class:`Axis` lays the lives side by side across a drawing, each in a band of its own
and the time between them a narrow strip whatever its length, so a run resumed an
hour later is drawn as two lives and the hour said, not as a line across the page.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from operator import attrgetter

from msgspec.structs import replace

from honeycomb.trace.spans import Span
from runtime.value import Value

__all__ = ["IN_TIME", "Axis", "Life", "life_of", "lives_of"]


class Life(Value, frozen=True, kw_only=True):
    """One life of a run.

    Attributes:
        number: Its number (1: the first start).
        start: When it started, in seconds since the run first started.
        end: When it stopped.
        status: How it stopped: its ``run`` span's status (``waiting``, ``ok`` ...),
            or ``cut off`` when its process died before it could say.
        gap_s: Time between the end of the life before and its start (0 for the
            first).
        workers_s: Its worker phase: first worker start to last worker end.
        model_calls: Model calls it made (summary calls included).
        tool_calls: Tool calls it answered: every call the model had the
            observation of from this life, from the tool or a refusal (denied, refused
            by a guard, its arguments invalid), but a repeat skipped, as the run's
            budget counts them (a call of a turn a life left unfinished is the next
            life's, which dispatches it again).
        input_tokens: Tokens in (summary calls, judges and the memory's embeddings
            included).
        output_tokens: Tokens out.
        cost: Dollars (the memory's embeddings included).
        cached_input_tokens: Of the tokens in, those read from the provider's cache.
    """

    number: int
    start: float
    end: float
    status: str
    gap_s: float = 0.0
    workers_s: float = 0.0
    model_calls: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    cached_input_tokens: int = 0

    @property
    def wall_s(self) -> float:
        return self.end - self.start

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


_CALLS = frozenset({"model_call", "compaction"})
_UNCOUNTED = frozenset({"skipped", "cancelled"})
"""Tool calls a budget does not count (nor do the lives): a repeat skipped, and a call
the end of its life cut off before it was answered; nor any call of a turn that did
not end ``ok`` (its worker never had its answers, see :class:`runtime.ToolCallsAnswered`)."""


def lives_of(spans: Sequence[Span], origin: float) -> tuple[Life, ...]:
    """The lives of the run whose spans are ``spans`` (in order of start, as
    :data:`IN_TIME` puts them), in order; ``origin``: when it first started (seconds
    since the epoch), what the lives' times count from."""
    by_id = {s.span_id: s for s in spans}
    grouped: dict[str, list[Span]] = {}
    own_id = _OWN_ID.fullmatch
    for span in spans:
        sid = span.span_id
        key = life_of(sid) if own_id(sid) else _foreign_life(span, by_id)
        grouped.setdefault(key, []).append(span)
    answered = _answered(spans, by_id)
    found = sorted(
        (_life(own, origin, answered) for own in grouped.values()),
        key=lambda life: (life.start, life.end),
    )
    lives: list[Life] = []
    for number, life in enumerate(found, start=1):
        gap = max(life.start - lives[-1].end, 0.0) if lives else 0.0
        lives.append(replace(life, number=number, gap_s=gap))
    return tuple(lives)


def _answered(spans: Sequence[Span], by_id: Mapping[str, Span]) -> set[str]:
    """The tool calls the model had the observations of, a span each, as the run's
    budget counts them: those of a turn that ended ``ok`` (its worker had its
    answers), a repeat skipped aside, each of them: a call made again in a later life
    (a hive tool's sub-run run again, its workers under the same names) was answered
    again. A turn a life left unfinished (it paused for a person, or was cut off)
    counts none, whatever of it had ended: the next life dispatches its calls again,
    in a turn of its own. A span under no turn (as runs recorded before turns said so
    have them) counts as the last of the spans of its call (its worker, turn and id)."""
    answered: set[str] = set()
    last: dict[tuple[str | None, int | None, str], str] = {}
    for span in spans:  # in order of start
        if span.kind != "tool_call" or span.status in _UNCOUNTED:
            continue
        turn = by_id.get(span.parent_id or "")
        if turn is None or turn.kind != "turn":
            last[span.worker, span.turn, span.detail] = span.span_id
        elif turn.status == "ok":
            answered.add(span.span_id)
    return answered | set(last.values())


IN_TIME = attrgetter("start", "end")
"""What spans are put in order of: their start, then their end."""

_LIFE_DIGITS = 8
"""The digits a span's id begins with that are its life's (see :class:`Span`)."""

_OWN_ID = re.compile("[0-9a-fA-F]{16}")
"""A span id as Honeycomb makes them: its life's digits first."""


def life_of(span_id: str) -> str:
    """The digits of a span id as Honeycomb makes them that are its life's."""
    return span_id[:_LIFE_DIGITS]


def _foreign_life(span: Span, by_id: Mapping[str, Span]) -> str:
    """What tells the life of a span made otherwise than Honeycomb makes them (by
    hand, by another tool), whose id does not begin with its life's digits: the
    ``run`` span above it, kept or not."""
    for _ in range(256):  # a broken tree must not loop
        parent = by_id.get(span.parent_id or "")
        if parent is None:
            break
        span = parent
    return span.span_id if span.kind == "run" else (span.parent_id or "")


_COUNTED = frozenset({"worker", "turn", "model_call", "tool_call"})
"""The spans under which a worker is a nested one (a sub-run's)."""


def _life(own: Sequence[Span], origin: float, answered: set[str]) -> Life:
    """One life's extent and what it spent, from its spans (in order of start), in
    one pass over them."""
    run: Span | None = None
    first, last = own[0].start, own[0].end
    calls: list[Span] = []
    checks: list[Span] = []  # guards' checks
    embedded: list[Span] = []  # the memory's embeddings calls
    workers: list[Span] = []
    ids: set[str] = set()
    tool_calls = 0
    for span in own:
        kind = span.kind
        if span.end > last:
            last = span.end
        if kind == "run" and run is None:
            run = span
        elif kind in _CALLS:
            calls.append(span)
        elif kind == "guard":
            checks.append(span)
        elif kind == "embedding":
            embedded.append(span)
        elif kind == "worker":
            workers.append(span)
        if kind in _COUNTED:
            ids.add(span.span_id)
        if kind == "tool_call" and span.span_id in answered:
            tool_calls += 1
    start, end = (run.start, run.end) if run is not None else (first, last)
    # A judge's call is a model call under its guard's span, which holds its usage too;
    # a trace written before kept the usage on the guard's span alone.
    judged = {s.parent_id for s in calls}
    spent = [*calls, *embedded, *(s for s in checks if s.span_id not in judged)]
    outer = [s for s in workers if s.parent_id not in ids]  # not nested
    phase = max(s.end for s in outer) - min(s.start for s in outer) if outer else 0.0
    return Life(
        number=0,
        start=start - origin,
        end=end - origin,
        status=run.status if run is not None else "cut off",
        workers_s=phase,
        model_calls=len(calls),
        tool_calls=tool_calls,
        input_tokens=sum(s.input_tokens for s in spent),
        output_tokens=sum(s.output_tokens for s in spent),
        cost=sum(s.cost for s in spent),
        cached_input_tokens=sum(s.cached_input_tokens for s in calls),
    )


class Axis:
    """Where a moment of a run goes across a drawing (0: the left edge, 1: the
    right): the time its lives ran, each life in proportion to its length, and
    between two lives a strip of ``gap_share`` of the width, whatever the time
    between them (said beside it).

    Args:
        lives: The run's lives (none: the axis is ``length_s`` long, plainly).
        length_s: The run's length, first start to last end.
        gap_share: The width of the strip between two lives.
    """

    def __init__(self, lives: Sequence[Life], length_s: float, gap_share: float = 0.04) -> None:
        # The stretches of time something ran: the lives, those that overlap (a
        # process taken over while its old one still wrote) as one.
        stretches: list[list[float]] = []
        for life in sorted(lives, key=lambda life: life.start):
            if stretches and life.start <= stretches[-1][1]:
                stretches[-1][1] = max(stretches[-1][1], life.end)
            else:
                stretches.append([life.start, life.end])
        if not stretches:
            stretches = [[0.0, length_s]]
        gaps = len(stretches) - 1
        share = min(gap_share, 0.5 / gaps) if gaps else 0.0
        ran = sum(end - start for start, end in stretches)
        room = 1.0 - share * gaps
        self._pieces: list[tuple[float, float, float, float]] = []  # start, end, left, width
        left = 0.0
        for start, end in stretches:
            width = room * ((end - start) / ran if ran > 0 else 1.0 / len(stretches))
            self._pieces.append((start, end, left, width))
            left += width + share
        self.gaps: tuple[tuple[float, float, float], ...] = tuple(
            (a[2] + a[3], b[2], b[0] - a[1]) for a, b in itertools.pairwise(self._pieces)
        )
        """Each strip between lives: its left and right edges, and the time it stands for."""

    def at(self, t: float) -> float:
        """Where moment ``t`` (seconds since the run first started) is drawn."""
        for start, end, left, width in self._pieces:
            if t <= end:
                if t <= start:
                    return left
                return left + width * (t - start) / (end - start)
        return 1.0

    def extent(self, start: float, end: float) -> tuple[float, float]:
        """Where a piece of time is drawn: its left edge and its width."""
        left = self.at(start)
        return left, max(self.at(end) - left, 0.0)
