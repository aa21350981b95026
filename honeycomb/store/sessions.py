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
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from honeycomb.store.database import Connection
from honeycomb.store.lease import Lease, carried_on, ended, new_lease, take
from honeycomb.store.runs import read_summaries
from runtime.errors import SessionBusy

if TYPE_CHECKING:
    from honeycomb.store.store import RunStore
    from honeycomb.store.writer import Statement

__all__ = [
    "SESSION_COLUMNS",
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
_DROP = "DELETE FROM session_turns WHERE session_id = ? AND turn > ?"
_COPY = (
    "INSERT INTO session_turns (session_id, turn, run_id, message, started_at, summary, "
    "summarized, answer, results) SELECT ?, turn, run_id, message, started_at, summary, "
    "summarized, answer, results FROM session_turns WHERE session_id = ? AND turn <= ?"
)
_RUN_TABLES = ("runs", "workers", "messages", "journal", "spans", "leases", "approvals", "lives")
"""The tables that hold a run's rows, each by its ``run_id``."""


def _begin(db: Connection, row: Sequence[Any], lease: Lease, ttl_s: float, path: str) -> None:
    """Insert a turn's first row and lease its run, in the writer's transaction; a turn
    of that number taken meanwhile (by another process) refuses it (nothing written: a
    statement that failed would end a PostgreSQL transaction, the rest of the batch
    with it)."""
    if db.execute(_BEGIN, row).rowcount:
        take(db, lease, steal=False, ttl_s=ttl_s, path=path)
    else:
        session_id, turn, run_id = row[0], row[1], row[2]
        raise SessionBusy(
            f"session {session_id!r} took turn {turn} meanwhile, in another process: "
            "send the message again once that turn has ended",
            session_id=session_id,
            turn=turn,
            run_id=run_id,
        )


def _forget(db: Connection, session_ids: Sequence[str]) -> None:
    """Delete the sessions' turns and their runs (those no other session's turns
    link: a fork shares the runs of the turns it was made from)."""
    if not session_ids:
        return
    marks = ", ".join("?" * len(session_ids))
    runs = (
        f"SELECT run_id FROM session_turns WHERE session_id IN ({marks}) EXCEPT "
        f"SELECT run_id FROM session_turns WHERE session_id NOT IN ({marks})"
    )
    for table in _RUN_TABLES:
        if db.columns(table):  # a store of an earlier schema lacks some
            db.execute(f"DELETE FROM {table} WHERE run_id IN ({runs})", (*session_ids,) * 2)
    db.execute(f"DELETE FROM session_turns WHERE session_id IN ({marks})", tuple(session_ids))


def _read_turns(db: Connection, session_id: str) -> list[tuple[Any, ...]]:
    if not _has_sessions(db):
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
    if not _has_sessions(db):
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
    if not _has_sessions(db):
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


def _expired(db: Connection, before: float | None, keep: int | None) -> list[str]:
    """The sessions retention forgets: those whose last turn started ``before``, and
    those past the newest ``keep``; never one a process answers now (its run would be
    deleted under it)."""
    if not _has_sessions(db):
        return []
    found: set[str] = set()
    if before is not None:
        found |= {
            sid
            for (sid,) in db.execute(
                "SELECT session_id FROM session_turns GROUP BY session_id "
                "HAVING max(started_at) < ?",
                (before,),
            )
        }
    if keep is not None:
        newest_first = db.execute(
            "SELECT session_id FROM session_turns GROUP BY session_id ORDER BY max(started_at) DESC"
        ).fetchall()
        found |= {sid for (sid,) in newest_first[keep:]}
    return sorted(sid for sid in found if not _answering(db, sid))


def _answering(db: Connection, session_id: str) -> bool:
    """Whether a process answers the session's last turn now: its run is carried on."""
    last = db.execute(
        "SELECT run_id FROM session_turns WHERE session_id = ? ORDER BY turn DESC LIMIT 1",
        (session_id,),
    ).fetchone()
    return last is not None and carried_on(db, last[0])


def _has_sessions(db: Connection) -> bool:
    """Whether the store has the table (a store of schema 5 or before, read as it is,
    does not)."""
    return bool(db.columns("session_turns"))


class StoredSessions:
    """The sessions of a :class:`~honeycomb.store.RunStore` (``store.sessions``).

    Writes are committed before they return; reads see every write made before them.
    """

    def __init__(self, store: RunStore) -> None:
        self.store = store

    async def turns(self, session_id: str) -> list[tuple[Any, ...]]:
        """The session's turns in order (rows of :data:`TURN_COLUMNS`)."""
        return await self.store.reading(functools.partial(_read_turns, session_id=session_id), [])

    async def begin(self, row: Sequence[Any]) -> None:
        """Keep a new turn: ``(session_id, turn, run_id, message, started_at, summary,
        summarized)``. Its run is leased to this process as it is kept, until the run
        takes the lease over as it starts (this process's run takes it at once): for
        another process, the turn is answered from now on, not cut off before its run
        started (which it may clear, or answer again).

        Raises:
            SessionBusy: when the session has a turn of that number already (another
                process took it meanwhile).
        """
        await self.store.open()
        lease, store = new_lease(row[2]), self.store
        try:
            await store.act(
                functools.partial(
                    _begin, row=tuple(row), lease=lease, ttl_s=store.lease_ttl_s, path=store.where
                )
            )
        finally:
            ended(lease)  # its run, of this very process, takes the lease over

    async def fitted(self, session_id: str, turn: int, summary: str, summarized: int) -> None:
        """Keep the rolling summary the turn's run was given."""
        await self.store.commit((_FITTED, (summary, summarized, session_id, turn)))

    async def ended(self, session_id: str, turn: int, answer: str, results: str) -> None:
        """Keep the turn's answer and its subtasks' results (a JSON array)."""
        await self.store.commit((_ENDED, (answer, results, session_id, turn)))

    async def drop(self, session_id: str, after: int) -> None:
        """Delete the session's turns after turn ``after`` (their runs stay)."""
        await self.store.open()
        await self.store.commit((_DROP, (session_id, after)))

    async def copy(self, source: str, target: str, upto: int) -> None:
        """Make ``target`` a session of ``source``'s first ``upto`` turns (sharing
        their runs), in place of whatever ``target`` held."""
        await self.store.open()
        statements: list[Statement] = [(_DROP, (target, 0)), (_COPY, (target, source, upto))]
        await self.store.commit(*statements)

    async def forget(self, session_ids: Sequence[str]) -> None:
        """Delete the sessions' turns and their runs (those no other session links)."""
        await self.store.open()
        await self.store.act(functools.partial(_forget, session_ids=tuple(session_ids)))

    async def prune(self, *, before: float | None, keep: int | None) -> list[str]:
        """Forget the sessions whose last turn started ``before`` (``time.time()``),
        and those past the newest ``keep``; the ones forgotten.

        Raises:
            ValueError: for a ``keep`` below 1 (as the policy's ``max_sessions``): it
                would forget every session, or slice from the wrong end.
        """
        if keep is not None and keep < 1:
            raise ValueError(f"keep is at least 1 (the newest sessions kept), not {keep}")
        empty: list[str] = []
        expired = await self.store.reading(
            functools.partial(_expired, before=before, keep=keep), empty
        )
        if expired:
            await self.forget(expired)
        return expired

    def sessions(self, limit: int = 50) -> list[tuple[Any, ...]]:
        """The latest sessions, newest first (rows of :data:`SESSION_COLUMNS`; a quick
        read, fine to call from a CLI)."""
        return self.store.read_now(functools.partial(_read_sessions, limit=limit), [])

    async def session_of(self, run_id: str) -> str | None:
        """The session whose turn run ``run_id`` answers (None: no session's)."""
        found: list[str] = await self.store.reading(
            functools.partial(_session_of, run_id=run_id), []
        )
        return found[0] if found else None

    def turns_now(self, session_id: str) -> list[tuple[Any, ...]]:
        """:meth:`turns`, from sync code (a CLI)."""
        return self.store.read_now(functools.partial(_read_turns, session_id=session_id), [])
