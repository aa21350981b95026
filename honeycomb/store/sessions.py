"""The run store's ``session_turns`` table: the turns of each session, one row a turn,
each linking the run that answered it (see :mod:`honeycomb.run.session`).

A turn's row is written when its message is taken (its number, its run, the message,
and the conversation's rolling summary it starts from), again once the run has fitted
the conversation into its budget (the summary then), and once the run ends (its
answer and what its subtasks found). How the turn went and what it cost are its run's:
they are read from the ``runs`` table, so a turn whose run is resumed elsewhere
(``honeycomb resume``) reads as its run ended.

Everything here is a statement or a read on one connection; :class:`StoredSessions`
runs them through its :class:`~honeycomb.store.RunStore`. The rows are plain tuples in
the order of :data:`TURN_COLUMNS` (the values they make are ``honeycomb.run``'s).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from honeycomb.store.database import Connection
from honeycomb.store.forgetting import Pruned, forget_held, known, prune
from honeycomb.store.held import answered_now, has_sessions, hold, last_turn, not_answering
from honeycomb.store.lease import Lease, carried_on, handed
from honeycomb.store.runs import read_summaries
from runtime.errors import SessionBusy

if TYPE_CHECKING:
    from honeycomb.store.store import RunStore

__all__ = [
    "SESSION_COLUMNS",
    "TAKEN_BACK_BY",
    "TURN_COLUMNS",
    "StoredSessions",
]

TURN_COLUMNS = (
    "session_id",
    "turn",
    "run_id",
    "message",
    "started_at",
    "summary",
    "summarized",
    "answer",
    "results",
    "status",
    "cost",
)
"""What :meth:`StoredSessions.turns` gives of each turn, in order: its row, then its
run's status (``running`` while a live process carries it on, ``interrupted`` once
none does, or when the store holds no run of it and it has no answer; ``forgotten``
when it has one) and cost."""

SESSION_COLUMNS = ("session_id", "turns", "started_at", "last_at", "last_message")
"""What :meth:`StoredSessions.sessions` gives of each session, in order."""

_BEGIN = (
    "INSERT INTO session_turns (session_id, turn, run_id, message, started_at, summary, "
    "summarized) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (session_id, turn) DO NOTHING"
)
_FITTED = "UPDATE session_turns SET summary = ?, summarized = ? WHERE session_id = ? AND turn = ?"
_ENDED = "UPDATE session_turns SET answer = ?, results = ? WHERE session_id = ? AND turn = ?"
_OF_RUN = " AND run_id = ?"
"""What keeps a write to a turn to the turn of its run: one read before the turn was
taken back (by another process) is not the turn of that number taken since."""
_DROP = "DELETE FROM session_turns WHERE session_id = ? AND turn > ?"
_KEEP_TAKEN_BACK = (
    "INSERT INTO session_taken_back (session_id, started_at, run_id) SELECT session_id, "
    "started_at, run_id FROM session_turns WHERE session_id = ? AND turn > ? "
    "ON CONFLICT DO NOTHING"
)
_COPY = (
    "INSERT INTO session_turns (session_id, turn, run_id, message, started_at, summary, "
    "summarized, answer, results) SELECT ?, turn, run_id, message, started_at, summary, "
    "summarized, answer, results FROM session_turns WHERE session_id = ? AND turn <= ?"
)
TAKEN_BACK_BY = "the session: its turn was taken back"
"""Who denied the calls a run waited on when its turn was taken back (``pop``,
``clear``, a fork over it, a message that drops it): no one may approve them."""

_TAKEN_BACK = (
    "UPDATE approvals SET approved = 0, reason = ?, decided_at = ?, decided_by = ? "
    "WHERE approved IS NULL AND run_id IN ("
    "SELECT run_id FROM session_turns AS t WHERE session_id = ? AND turn > ? AND NOT EXISTS "
    "(SELECT 1 FROM session_turns AS o WHERE o.run_id = t.run_id "
    "AND (o.session_id <> ? OR o.turn <= ?)))"
)


def _begin(db: Connection, row: Sequence[Any], follows: str | None, kept: list[bool]) -> None:
    """Insert a turn's first row, in the writer's transaction, if the session's last
    turn is still the one it follows (the run ``follows`` answers; None: it has none),
    as ``kept`` then says: a turn taken back, a session cleared, forgotten or forked
    over meanwhile (by another process, or retention) changed the conversation the
    message read. A turn of that number taken meanwhile refuses it (nothing written: a
    statement that failed would end a PostgreSQL transaction, the rest of the batch
    with it).

    Raises:
        SessionBusy: when another process took that turn.
    """
    session_id, turn, run_id = row[0], row[1], row[2]
    hold(db, (session_id,))
    last = last_turn(db, session_id)
    if last is not None and last[0] >= turn:
        raise _taken(session_id, turn, run_id)
    if (tuple(last) if last is not None else None) != ((turn - 1, follows) if follows else None):
        return
    if not db.execute(_BEGIN, row).rowcount:
        raise _taken(session_id, turn, run_id)
    kept.append(True)


def _taken(session_id: str, turn: int, run_id: str) -> SessionBusy:
    """The error for a turn another process took meanwhile."""
    return SessionBusy(
        f"session {session_id!r} took turn {turn} meanwhile, in another process: "
        "send the message again once that turn has ended",
        session_id=session_id,
        turn=turn,
        run_id=run_id,
    )


def _drop(db: Connection, session_id: str, after: int, idle: bool) -> None:
    hold(db, (session_id,))
    if idle:
        not_answering(db, session_id)
    _cut(db, session_id, after)


def _cut(db: Connection, session_id: str, after: int) -> None:
    """Take back the session's turns after ``after``: the calls their runs wait on
    denied, and the runs (which stay) kept as the session's, for forgetting it to
    delete them too."""
    _taken_back(db, session_id, after)
    if db.columns("session_taken_back"):  # a store of schema 6 or before has none
        db.execute(_KEEP_TAKEN_BACK, (session_id, after))
    db.execute(_DROP, (session_id, after))


def _taken_back(db: Connection, session_id: str, after: int) -> None:
    """Deny the calls the runs of the session's turns after ``after`` wait on (but a
    run another turn links, a fork's): approved later, they would act for messages the
    conversation took back."""
    if db.columns("approvals"):  # a store of an earlier schema has none
        why = "its message was taken back from the conversation"
        db.execute(
            _TAKEN_BACK, (why, time.time(), TAKEN_BACK_BY, session_id, after, session_id, after)
        )


def _copy(db: Connection, source: str, target: str, upto: int) -> None:
    """Make ``target`` a session of ``source``'s first ``upto`` turns: its own
    truncated to them when it is ``source``; never while ``target`` is answering, nor
    with a turn that is being answered.

    Raises:
        SessionBusy: when it is.
    """
    hold(db, (source, target))
    not_answering(db, target)
    answered = answered_now(db, source, upto)
    if answered is not None:
        turn, run_id = answered
        raise SessionBusy(
            f"session {source!r} is answering message {turn} (run {run_id}): a fork "
            "holds only turns that have ended",
            session_id=source,
            turn=turn,
            run_id=run_id,
        )
    _cut(db, target, upto if source == target else 0)
    if source != target:
        db.execute(_COPY, (target, source, upto))


def _of_run(sql: str, given: tuple[Any, ...], run_id: str | None) -> tuple[str, tuple[Any, ...]]:
    """The statement that writes to a turn, kept to the turn of ``run_id`` if given."""
    return (sql, given) if run_id is None else (sql + _OF_RUN, (*given, run_id))


def _read_turns(db: Connection, session_id: str) -> list[tuple[Any, ...]]:
    if not has_sessions(db):
        return []
    rows = db.execute(
        f"SELECT {', '.join(TURN_COLUMNS[:-2])} FROM session_turns WHERE session_id = ? "
        "ORDER BY turn",
        (session_id,),
    ).fetchall()
    if not rows:
        return []
    marks = ", ".join("?" * len(rows))
    runs = {
        run.run_id: run
        for run in read_summaries(db, f"WHERE run_id IN ({marks})", tuple(r[2] for r in rows))
    }
    found = []
    for row in rows:
        run = runs.get(row[2])
        status = run.status if run else _no_run(db, row[2], row[7])
        found.append((*row, status, run.cost if run else 0.0))
    return found


def _session_of(db: Connection, run_id: str) -> list[str]:
    if not has_sessions(db):
        return []
    rows = db.execute("SELECT session_id FROM session_turns WHERE run_id = ?", (run_id,))
    return [session_id for (session_id,) in rows]


def _no_run(db: Connection, run_id: str, answer: str | None) -> str:
    """The status of a turn whose run the store does not hold: ``running`` while its
    run's lease is live (the run is starting), ``interrupted`` when it has no answer
    (cut off before its run was kept: resuming it runs it), else ``forgotten`` (its
    run was deleted since)."""
    if answer is not None:
        return "forgotten"
    return "running" if carried_on(db, run_id) else "interrupted"


def _read_sessions(db: Connection, limit: int) -> list[tuple[Any, ...]]:
    """The latest ``limit`` sessions (all of them, below 0)."""
    if not has_sessions(db):
        return []
    rows: list[tuple[Any, ...]] = db.execute(
        "SELECT session_id, count(*), min(started_at), max(started_at), "
        "(SELECT message FROM session_turns AS last WHERE last.session_id = t.session_id "
        "ORDER BY turn DESC LIMIT 1) "
        "FROM session_turns AS t GROUP BY session_id ORDER BY max(started_at) DESC"
        + (" LIMIT ?" if limit >= 0 else ""),
        (limit,) if limit >= 0 else (),
    ).fetchall()
    return rows


class StoredSessions:
    """The sessions of a :class:`~honeycomb.store.RunStore` (``store.sessions``).

    Writes are committed before they return; reads see every write made before them.
    """

    def __init__(self, store: RunStore) -> None:
        self.store = store

    async def turns(self, session_id: str) -> list[tuple[Any, ...]]:
        """The session's turns in order (rows of :data:`TURN_COLUMNS`)."""
        return await self.store.reading(functools.partial(_read_turns, session_id=session_id), [])

    async def begin(self, row: Sequence[Any], follows: str | None = None) -> Lease | None:
        """Keep a new turn: ``(session_id, turn, run_id, message, started_at, summary,
        summarized)``, following the turn whose run is ``follows`` (None: the first),
        its run leased to this process first. The lease is held (and renewed) until
        the run, of this process, takes it over as it starts, and lets it go as it
        ends, or until :meth:`let_go`: for any process, the turn is answered from the
        moment it is kept, not cut off before its run started (which it may clear,
        forget, or answer again). The lease; None, nothing kept, when the session's
        last turn is no longer the one it follows (taken back, or the session
        cleared, forgotten or forked over, meanwhile).

        Raises:
            SessionBusy: when the session has a turn of that number already (another
                process took it meanwhile).
        """
        store = self.store
        await store.open()
        lease = handed(row[2])
        kept: list[bool] = []
        try:
            await store.take_lease(lease.run_id)  # the handed lease: no other has it
            await store.act(functools.partial(_begin, row=tuple(row), follows=follows, kept=kept))
        except BaseException:
            self.let_go(lease)
            raise
        if not kept:
            self.let_go(lease)
            return None
        return lease

    def let_go(self, lease: Lease) -> None:
        """Let go of the lease :meth:`begin` took, if its run has not: the turn's run
        has ended, or will not start."""
        self.store.write(self.store.released(lease))
        self.store.let_go(lease)

    async def fitted(
        self,
        session_id: str,
        turn: int,
        summary: str,
        summarized: int,
        *,
        run_id: str | None = None,
    ) -> None:
        """Keep the rolling summary the turn's run was given (the turn's, if it is
        still the turn of ``run_id``)."""
        given = (summary, summarized, session_id, turn)
        await self.store.commit(_of_run(_FITTED, given, run_id))

    async def ended(
        self,
        session_id: str,
        turn: int,
        answer: str | None,
        results: str,
        *,
        run_id: str | None = None,
    ) -> None:
        """Keep the turn's answer (None: it ended without one) and its subtasks'
        results (a JSON array); the turn's, if it is still the turn of ``run_id``."""
        await self.store.commit(_of_run(_ENDED, (answer, results, session_id, turn), run_id))

    async def drop(self, session_id: str, after: int, *, idle: bool = True) -> None:
        """Delete the session's turns after turn ``after`` (their runs stay).

        Raises:
            SessionBusy: when its last turn is being answered, unless not ``idle``
                (this process's own turn, which its run will not answer).
        """
        await self.store.open()
        await self.store.act(
            functools.partial(_drop, session_id=session_id, after=after, idle=idle)
        )

    async def copy(self, source: str, target: str, upto: int) -> None:
        """Make ``target`` a session of ``source``'s first ``upto`` turns (sharing
        their runs), in place of whatever ``target`` held; ``source`` itself is cut
        to them.

        Raises:
            SessionBusy: when ``target`` is answering a message, or turn ``upto`` of
                ``source`` is being answered.
        """
        await self.store.open()
        await self.store.act(functools.partial(_copy, source=source, target=target, upto=upto))

    async def forget(self, session_ids: Sequence[str]) -> None:
        """Delete the sessions' turns and their runs (those no other session links).

        Raises:
            SessionBusy: when one of them is answering a message (none is deleted).
        """
        await self.store.open()
        await self.store.act(functools.partial(forget_held, session_ids=tuple(session_ids)))
        await self.store.scrub()

    async def prune(self, *, before: float | None, keep: int | None) -> list[str]:
        """Forget the sessions whose last turn started ``before`` (``time.time()``),
        and those past the newest ``keep``, but those answering a message; the ones
        forgotten.

        Raises:
            ValueError: for a ``keep`` below 1 (as the policy's ``max_sessions``): it
                would forget every session, or slice from the wrong end.
        """
        if keep is not None and keep < 1:
            raise ValueError(f"keep is at least 1 (the newest sessions kept), not {keep}")
        await self.store.open()
        forgotten: list[str] = []
        after: str | None = ""
        while after is not None:
            out: list[Pruned] = []
            batch = functools.partial(prune, before=before, keep=keep, after=after, out=out)
            await self.store.act(batch)
            some, after = out[0] if out else ([], None)
            forgotten += some
        if forgotten:
            await self.store.scrub()
        return forgotten

    def sessions(self, limit: int = 50) -> list[tuple[Any, ...]]:
        """The latest sessions, newest first (rows of :data:`SESSION_COLUMNS`; a quick
        read, fine to call from a CLI)."""
        return self.store.read_now(functools.partial(_read_sessions, limit=limit), [])

    def known(self, session_ids: Sequence[str]) -> list[str]:
        """Those of ``session_ids`` the store holds something of (a turn, or the run of
        a turn taken back: a session cleared is still one to forget); from sync code."""
        return self.store.read_now(functools.partial(known, session_ids=tuple(session_ids)), [])

    async def session_of(self, run_id: str) -> str | None:
        """The session whose turn run ``run_id`` answers (None: no session's)."""
        found: list[str] = await self.store.reading(
            functools.partial(_session_of, run_id=run_id), []
        )
        return found[0] if found else None

    def turns_now(self, session_id: str) -> list[tuple[Any, ...]]:
        """:meth:`turns`, from sync code (a CLI)."""
        return self.store.read_now(functools.partial(_read_turns, session_id=session_id), [])
