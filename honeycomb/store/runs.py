"""What a run store holds of a run, and the reads that give it back: a run's line
(:class:`RunSummary`), its workers' rows (:class:`StoredWorker`) and the whole of it
(:class:`StoredRun`), each read in one transaction of :class:`~honeycomb.store.RunStore`."""

from __future__ import annotations

from typing import Any

import msgspec

from honeycomb.store import lease as _lease
from honeycomb.store.approvals import read_approvals
from honeycomb.store.database import Connection
from honeycomb.store.evals import eval_of
from honeycomb.store.schema import columns
from honeycomb.trace.spans import Span
from runtime import JournalEntry, Usage
from runtime.tools.approvals import ApprovalEntry
from runtime.value import Value

__all__ = [
    "PROGRESS",
    "STATE_FIELDS",
    "RunSummary",
    "StoredRun",
    "StoredWorker",
    "last_life",
    "most",
    "read_run",
    "read_spans",
    "read_summaries",
]


class RunSummary(Value, frozen=True, kw_only=True):
    """One line of ``honeycomb runs``.

    ``status`` is how the run ended (``ok``, ``partial``, ``failed``, ``over_budget``,
    ``interrupted``, ``waiting`` for approvals), or ``running`` while a live process
    carries it on: one stored as running whose process is gone, or whose lease
    expired, is ``interrupted``. The counters are all the run has spent, in every life
    of it: of a run under way (or cut off), as far as the store has it.
    ``cached_input_tokens`` are those of the input tokens the providers read from their
    caches. ``wall_s`` is its wall time, the time its lives ran (the pauses between
    them not), as its last result says it (``honeycomb resume`` and ``trace`` say
    the same); None when no result does (a run under way, or cut off).
    """

    run_id: str
    task: str
    status: str
    started_at: float
    finished_at: float | None
    workers: int
    model_calls: int
    input_tokens: int
    output_tokens: int
    tool_calls: int
    source: str | None
    cost: float
    cached_input_tokens: int = 0
    wall_s: float | None = None

    @property
    def duration_s(self) -> float | None:
        """How long it took: its first start to its last end, the pauses between its
        lives (waiting for a person, or cut off and resumed) included."""
        return None if self.finished_at is None else self.finished_at - self.started_at


# The runs table's columns of the same names, and what its result column says.
_SUMMARY = tuple(name for name in RunSummary.__struct_fields__ if name != "wall_s")

STATE_FIELDS = (
    "task",
    "messages",
    "previous",
    "turn",
    "input_tokens",
    "output_tokens",
    "cost",
    "tool_calls",
    "nudged",
    "output_attempts",
    "wrapped_up",
    "repeats",
    "cached_input_tokens",
    "reasoning_tokens",
    "summary",
    "summarized",
    "compactions",
    "context_tokens",
    "context_messages",
)
"""A worker's saved loop state: its columns in the ``workers`` table."""


class StoredWorker(Value, frozen=True, kw_only=True):
    """What a store holds of one worker: its result once finished, else its last
    saved state (the :data:`STATE_FIELDS`) and its messages: ``(seq, JSON array)``
    rows in order, each holding the messages from index ``seq`` on (the lists are
    filled as the store is read)."""

    status: str
    result: str | None
    state: dict[str, Any] | None
    messages: list[tuple[int, str]] = msgspec.field(default_factory=list)
    journal: dict[tuple[int, str], JournalEntry] = msgspec.field(default_factory=dict)
    approvals: dict[tuple[int, str], ApprovalEntry] = msgspec.field(default_factory=dict)


class StoredRun(Value, frozen=True, kw_only=True):
    """Everything a store holds of one run."""

    run_id: str
    task: str
    status: str
    source: str | None
    plan: str | None
    result: str | None
    workers: dict[str, StoredWorker]
    planned_by: str | None = None
    """``given`` (the run was given its subtasks), ``planner``, or None: not known (a
    store of schema 3)."""
    started_at: float = 0.0
    """When its first life started (``time.time()``)."""
    lives: int = 0
    """How many lives of it the store recorded (none before schema 5)."""
    spent: Usage = Usage()
    """What it had spent by the end of its last life, every life before included, as
    the store knows it: its last life's row; of a run no life of which was recorded
    (a store of schema 4), the run's own counters, written when a life ended."""
    error: str | None = None
    """Why it ended as it did, when an error ended it (``failed``, ``over_budget``:
    ``BudgetExceeded: ...``, ``interrupted`` by one); None otherwise, and while it runs."""
    held: str | None = None
    """What it holds back until its output guards pass its answer: ``workers`` (its
    answer is made of its workers' answers); None: nothing (or a store of schema 7)."""
    eval_id: str | None = None
    """The eval it is a run of, when the eval kept it as its own (its calls may wait
    for a person, and nobody decides them: the eval denies them); None: no eval's."""


class _Worker(Value, frozen=True):
    usage: Usage = Usage()


class _Outcome(Value, frozen=True):
    """Of a finished worker's stored result, what it says it spent."""

    worker: _Worker | None = None


_OUTCOME = msgspec.json.Decoder(_Outcome)


def read_summaries(db: Connection, where: str, params: tuple[Any, ...]) -> list[RunSummary]:
    """The runs' lines that ``where`` (a clause after ``FROM runs``) selects; those
    under way with what their workers have spent so far."""
    selected = columns(db, "runs", _SUMMARY)
    wall = db.json_number("result", "timings", "wall_s")  # as its stored result says it
    rows = db.execute(f"SELECT {selected}, {wall} FROM runs {where}", params).fetchall()
    found = [RunSummary(**dict(zip((*_SUMMARY, "wall_s"), row, strict=True))) for row in rows]
    return [_under_way(db, run) if run.status == "running" else run for run in found]


def _under_way(db: Connection, run: RunSummary) -> RunSummary:
    """A run stored as running (its counters are written when it ends): interrupted
    if no live process carries it on any more (killed, or hung past its lease), and
    what it has spent so far, as the store knows it: its life's row, or what its
    workers' own rows say, if more (a store of schema 4 records no lives)."""
    counted = columns(
        db,
        "workers",
        (
            "turn",
            "compactions",
            "input_tokens",
            "output_tokens",
            "tool_calls",
            "cost",
            "cached_input_tokens",
        ),
    )
    spent = Usage()
    for result, *counters in db.execute(
        f"SELECT result, {counted} FROM workers WHERE run_id = ?", (run.run_id,)
    ):
        if result is not None:  # finished: its result says it all
            worker = _OUTCOME.decode(result).worker
            spent += worker.usage if worker is not None else Usage()
        else:  # its last saved turn
            turns, summaries, given, taken, tools, cost, cached = (c or 0 for c in counters)
            spent += Usage(
                model_calls=turns + summaries,
                input_tokens=given,
                output_tokens=taken,
                tool_calls=tools,
                cost=float(cost),
                cached_input_tokens=cached,
            )
    _, recorded = last_life(db, run.run_id)
    if recorded is not None:
        spent = most(recorded, spent)
    return msgspec.structs.replace(
        run,
        status="running" if _lease.carried_on(db, run.run_id) else "interrupted",
        wall_s=None,  # its result, if any, is an earlier life's
        input_tokens=spent.input_tokens,
        output_tokens=spent.output_tokens,
        model_calls=spent.model_calls,
        tool_calls=spent.tool_calls,
        cost=spent.cost,
        cached_input_tokens=spent.cached_input_tokens,
    )


PROGRESS = (
    "SELECT (SELECT count(*) FROM spans WHERE run_id = ?), "
    "(SELECT CAST(coalesce(sum(updated_at), 0) * 1000 AS BIGINT) FROM workers WHERE run_id = ?), "
    "(SELECT count(*) FROM messages WHERE run_id = ?), "
    "(SELECT count(*) FROM journal WHERE run_id = ?)"
)


_SPENT = (
    "model_calls",
    "input_tokens",
    "output_tokens",
    "tool_calls",
    "cost",
    "cached_input_tokens",
)
"""The counters of what a run spent that both its row and its lives' rows have."""


def most(one: Usage, other: Usage) -> Usage:
    """The larger of two counts of one spending (each a count of part of it, or all
    of it as far as one record knows), counter by counter."""
    return Usage(
        input_tokens=max(one.input_tokens, other.input_tokens),
        output_tokens=max(one.output_tokens, other.output_tokens),
        model_calls=max(one.model_calls, other.model_calls),
        tool_calls=max(one.tool_calls, other.tool_calls),
        cost=max(one.cost, other.cost),
        reasoning_tokens=max(one.reasoning_tokens, other.reasoning_tokens),
        cached_input_tokens=max(one.cached_input_tokens, other.cached_input_tokens),
    )


def last_life(db: Connection, run_id: str) -> tuple[int, Usage | None]:
    """How many lives of run ``run_id`` the store recorded, and what the run had spent by
    the end of the last (None: none recorded, as in a store of schema 4)."""
    if not db.columns("lives"):
        return 0, None
    row = db.execute(
        f"SELECT life, reasoning_tokens, {', '.join(_SPENT)} FROM lives WHERE run_id = ? "
        "ORDER BY life DESC LIMIT 1",
        (run_id,),
    ).fetchone()
    if row is None:
        return 0, None
    life, reasoning, *counters = row
    return life, Usage(reasoning_tokens=reasoning, **dict(zip(_SPENT, counters, strict=True)))


def read_run(db: Connection, run_id: str) -> StoredRun | None:
    names = (
        "task",
        "status",
        "source",
        "plan",
        "result",
        "error",
        "planned_by",
        "started_at",
        "held",
    )
    selected = columns(db, "runs", (*names, *_SPENT))
    row = db.execute(f"SELECT {selected} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        return None
    workers: dict[str, StoredWorker] = {}
    state_columns = columns(db, "workers", STATE_FIELDS)
    for name, status, result, *state in db.execute(
        f"SELECT worker, status, result, {state_columns} FROM workers WHERE run_id = ?",
        (run_id,),
    ):
        saved = dict(zip(STATE_FIELDS, state, strict=True))
        kept = saved if state[0] else None
        workers[name] = StoredWorker(status=status, result=result, state=kept)
    for name, seq, messages in db.execute(
        "SELECT worker, seq, messages FROM messages WHERE run_id = ? ORDER BY worker, seq",
        (run_id,),
    ):
        if name in workers:
            workers[name].messages.append((seq, messages))
    for name, turn, call_id, tool, arguments, status, content in db.execute(
        "SELECT worker, turn, call_id, tool, arguments, status, content FROM journal "
        "WHERE run_id = ?",
        (run_id,),
    ):
        found = workers.setdefault(name, StoredWorker(status="running", result=None, state=None))
        found.journal[turn, call_id] = JournalEntry(
            tool=tool, arguments=arguments, status=status, content=content or ""
        )
    for entry in read_approvals(db, run_id):
        name = entry.pending.worker
        found = workers.setdefault(name, StoredWorker(status="running", result=None, state=None))
        found.approvals[entry.pending.turn, entry.pending.call_id] = entry
    task, status, source, plan, result, error, planned_by, started_at, held, *counters = row
    lives, spent = last_life(db, run_id)
    if spent is None:
        spent = Usage(**dict(zip(_SPENT, counters, strict=True)))
    return StoredRun(
        run_id=run_id,
        task=task,
        status=status,
        source=source,
        plan=plan,
        result=result,
        workers=workers,
        planned_by=planned_by,
        started_at=started_at,
        lives=lives,
        spent=spent,
        error=error if status != "running" else None,  # a life before this one's
        held=held,
        eval_id=eval_of(db, run_id),
    )


_SPANS = msgspec.json.Decoder(list[Span])
"""A batch of stored spans: a JSON array of spans, each an array of its fields."""


def read_spans(db: Connection, run_id: str) -> list[Span]:
    """The spans kept for run ``run_id`` (every life of it), in the order kept."""
    rows = db.execute("SELECT spans FROM spans WHERE run_id = ?", (run_id,)).fetchall()
    return [span for (batch,) in rows for span in _SPANS.decode(batch)]
