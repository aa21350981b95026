"""Which row of a timeline each span of a run belongs to: the planner's, a worker's
(a nested worker's right after its caller's), or the aggregator's; in a run planned
in rounds, each round's planning before that round's workers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, Protocol

import msgspec

from honeycomb.trace.lives import IN_TIME, life_of
from honeycomb.trace.spans import Span

__all__ = ["Gather", "PlannedSubtask", "RowKind", "group_rows"]


class PlannedSubtask(Protocol):
    """What a timeline reads of a plan's subtask (``honeycomb.Subtask`` is one)."""

    @property
    def id(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def depends_on(self) -> tuple[str, ...]: ...


RowKind = Literal["plan", "worker", "aggregate"]


class Gather(msgspec.Struct, kw_only=True):
    """The spans of one row, while the timeline is built."""

    kind: RowKind
    name: str
    role: str = ""
    round: int = 1
    own: list[Span] = msgspec.field(default_factory=list)  # its plan/worker/aggregate spans
    calls: list[Span] = msgspec.field(default_factory=list)
    parent: str | None = None  # the caller's row, for a nested worker
    depth: int = 0


def group_rows(
    spans: Sequence[Span],
    subtasks: Sequence[PlannedSubtask],
    *,
    calls: bool = True,
    phases: Mapping[str, str] | None = None,
) -> list[Gather]:
    """Each span's row: the plan, worker or aggregate span it is under (``calls``:
    with the calls shown on each row; without, the rows' own spans alone, all their
    figures need).

    A span is kept as it ends, so in a run under way (or a life cut off) the calls of
    a phase, worker or nested worker that has not ended are under spans not kept yet:
    each is placed by its worker's name. A phase's calls name its role: they go on
    the row of the phase under way, which ``phases`` tells (the planner's and the
    aggregator's workers under way, by the names their nested workers' start with:
    ``aggregate:0b7d44e2``, and the row of each: ``aggregate``, ``plan``, ``round
    2``); a nested worker's (``CALLER/CALL``) go on its own row, after its caller's;
    a hive's called as a tool (``CALLER/CALL/WORKER``) on its caller's, as they will.
    """
    by_id = {s.span_id: s for s in spans}
    if not calls:
        spans = [s for s in spans if s.kind in _OWNED]
    place = _Places(spans, subtasks, by_id, phases or {})
    groups: dict[tuple[RowKind, str], Gather] = {("plan", "plan"): Gather(kind="plan", name="plan")}
    for subtask in subtasks:
        groups["worker", subtask.id] = Gather(
            kind="worker", name=subtask.id, role=subtask.role, round=getattr(subtask, "round", 1)
        )
    for span in spans:
        if span.kind == "run":
            continue
        top = _top(span, by_id)
        key = place.row(top)
        group = groups.get(key) or groups.setdefault(
            key, Gather(kind=key[0], name=key[1], round=_round_of(key[1]) or 1)
        )
        if group.parent is None and key[0] == "worker":
            group.parent = place.caller(top, key[1])
        if span is top and span.kind in _OWNED:
            group.own.append(span)
            group.role = group.role or (span.detail if span.kind == "worker" else "")
        elif span.kind in (
            "model_call",
            "tool_call",
            "compaction",
            "recall",
            "guard",
        ) and not _judged(span, by_id):  # a recall or a guard's check shows as a call
            group.calls.append(span)
    last = max((g.round for g in groups.values()), default=1)
    aggregate = groups.get(("aggregate", "aggregate"))
    if aggregate is not None:
        aggregate.round = last
    order = ("plan", "worker", "aggregate")
    ordered = sorted(groups.values(), key=lambda g: (g.round, order.index(g.kind)))
    return _nested_after_callers([g for g in ordered if g.kind == "worker" or g.own or g.calls])


class _Places:
    """Which row a span belongs to, by the span that is its row's own (or, in a run
    under way, the outermost kept: :func:`group_rows`)."""

    def __init__(
        self,
        spans: Sequence[Span],
        subtasks: Sequence[PlannedSubtask],
        by_id: Mapping[str, Span],
        phases: Mapping[str, str],
    ) -> None:
        self.by_id, self.phases = by_id, phases
        self.workers = {s.id for s in subtasks} | {s.name for s in spans if s.kind == "worker"}
        # The last phase's row.
        self.under_way = max(map(_phase_key, phases.values()), key=_in_run, default=None)
        self.last_life = life_of(max(by_id.values(), key=IN_TIME).span_id) if by_id else ""
        # The phases each role's turns are kept under, and those each life ended.
        self.roles: dict[str, list[tuple[RowKind, str]]] = {}
        self.ended: set[tuple[str, tuple[RowKind, str]]] = set()
        for span in by_id.values():
            above = by_id.get(span.parent_id or "")
            if span.kind in _PHASE:
                self.ended.add((life_of(span.span_id), _key(span)))
            elif span.kind == "turn" and above is not None and above.kind in _PHASE:
                self.roles.setdefault(span.worker or "", []).append(_key(above))

    def row(self, top: Span) -> tuple[RowKind, str]:
        """The row of ``top``, the outermost kept span that encloses a span."""
        name = top.worker or top.name
        if top.kind in _OWNED or not self._cut_off(top) or name in self.workers:
            return _key(top)
        if "/" not in name:  # a phase's call (its role's name), or a worker's unknown
            return self._phase(top, name) or _key(top)
        caller = self._named(name.rpartition("/")[0])
        if caller is not None:  # a nested worker's, on its own row
            return ("worker", name)
        for prefix in _prefixes(name):  # a hive's called as a tool: its caller's
            found = self._named(prefix)
            if found is not None:
                return found
        return _key(top)

    def caller(self, top: Span, name: str) -> str | None:
        """The row of the caller of the nested worker ``name``, whose row ``top`` is
        on (None: a subtask's worker, or a caller not known)."""
        enclosing = self.by_id.get(top.parent_id or "")
        if enclosing is not None:
            above = _top(enclosing, self.by_id)
            return None if above.kind == "run" else self.row(above)[1]
        if "/" not in name:
            return None
        found = self._named(name.rpartition("/")[0])
        return found[1] if found is not None else None

    def _phase(self, top: Span, role: str) -> tuple[RowKind, str] | None:
        """The phase whose call ``top``, of ``role``, is: the phase under way, in the
        last life; in a life cut off, the first in which the role's turns are kept
        that its life did not end (None: not known)."""
        life = life_of(top.span_id)
        if life == self.last_life and self.under_way is not None:
            return self.under_way
        rows = sorted(self.roles.get(role, ()), key=_in_run)
        return next((r for r in rows if (life, r) not in self.ended), self.under_way)

    def _cut_off(self, top: Span) -> bool:
        """Whether a span that encloses ``top`` is not kept (it has not ended)."""
        return top.parent_id is not None and top.parent_id not in self.by_id

    def _named(self, name: str) -> tuple[RowKind, str] | None:
        """The row of the worker kept as ``name``: a subtask's, a nested one's, or
        the planner's or aggregator's under way (None: none of them)."""
        if name in self.workers:
            return ("worker", name)
        row = self.phases.get(name)
        return _phase_key(row) if row is not None else None


_PHASE = frozenset({"plan", "aggregate"})


def _in_run(key: tuple[RowKind, str]) -> tuple[bool, int]:
    """Where the phase ``key`` comes in a run."""
    return (key[0] == "aggregate", _round_of(key[1]))


def _phase_key(row: str) -> tuple[RowKind, str]:
    return ("aggregate", "aggregate") if row == "aggregate" else ("plan", row)


def _prefixes(name: str) -> list[str]:
    """``a/b/c``'s callers, nearest first: ``a/b``, ``a``."""
    parts = name.split("/")
    return ["/".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]


_OWNED = frozenset({"plan", "worker", "aggregate"})
"""The kinds of span that are a row's own (the others are calls shown on a row)."""


def _key(top: Span) -> tuple[RowKind, str]:
    """The row of a span that is (or encloses others as) a row's own."""
    if top.kind == "plan":  # the first plan, or a later round's (``round N``)
        return ("plan", top.name if _round_of(top.name) else "plan")
    if top.kind == "aggregate":
        return ("aggregate", "aggregate")
    return ("worker", top.worker or top.name)  # a worker, or a call outside any phase


def _nested_after_callers(groups: list[Gather]) -> list[Gather]:
    """The rows in order, each nested worker's right after its caller's (and the
    earlier nested ones), its depth one more than its caller's."""
    by_name = {g.name: g for g in groups}
    children: dict[str, list[Gather]] = {}
    roots: list[Gather] = []
    for group in groups:
        if group.parent in by_name and group.parent != group.name:
            children.setdefault(group.parent or "", []).append(group)
        else:
            group.parent = None
            roots.append(group)
    ordered: list[Gather] = []
    stack = [(g, 0) for g in reversed(roots)]
    while stack:
        group, depth = stack.pop()
        if depth > 64:
            continue  # a broken tree must not loop
        group.depth = depth
        ordered.append(group)
        stack += [(c, depth + 1) for c in reversed(children.get(group.name, []))]
    return ordered


def _judged(span: Span, by_id: Mapping[str, Span]) -> bool:
    """Whether ``span`` is a judge's model call, which its guard's check shows."""
    above = by_id.get(span.parent_id or "")
    return span.kind == "model_call" and above is not None and above.kind == "guard"


def _round_of(name: str) -> int:
    """The round a later round's plan span names (``round 2``: 2); 0 for others."""
    number = name.removeprefix("round ")
    return int(number) if number != name and number.isdigit() else 0


def _top(span: Span, by_id: Mapping[str, Span]) -> Span:
    """The nearest span that is a row's own (a plan, worker or aggregate span) and
    encloses ``span`` (or is it); the outermost under the run when there is none."""
    for _ in range(64):  # a few levels a nesting; a broken tree must not loop
        if span.kind in ("plan", "worker", "aggregate"):
            break
        parent = by_id.get(span.parent_id or "")
        if parent is None or parent.kind == "run":
            break
        span = parent
    return span
