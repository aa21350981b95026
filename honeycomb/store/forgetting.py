"""Forgetting sessions (``session.forget()``, retention, ``honeycomb sessions
forget``): what of a session the store holds, and its deletion, each a statement or a
read on one connection, in a transaction that :mod:`honeycomb.store.sessions` runs.

A session holds its turns (``session_turns``) and the runs of the turns it took back
(``session_taken_back``: ``pop``, ``clear``, a fork over them, a message refused),
which stay in the store as runs until the session is forgotten. Forgetting it deletes
both, and each of those runs whole, but a run another session links (a fork shares the
runs of the turns it was made from).
"""

from __future__ import annotations

from collections.abc import Sequence

from honeycomb.store.database import Connection
from honeycomb.store.held import answered_now, has_sessions, hold, not_answering
from honeycomb.store.lease import carried_on
from runtime.errors import SessionBusy

__all__ = [
    "LAST",
    "PRUNED_AT_ONCE",
    "RUN_TABLES",
    "Expired",
    "Pruned",
    "expired",
    "forget",
    "forget_held",
    "forgotten_now",
    "known",
    "last_at",
    "prune",
    "runs_of",
]

RUN_TABLES = ("runs", "workers", "messages", "journal", "spans", "leases", "approvals", "lives")
"""The tables that hold a run's rows, each by its ``run_id``."""

_AT_ONCE = 500
"""Runs deleted by one statement (SQLite takes at most 32,766 values in one)."""

LAST = (
    "SELECT session_id, max(started_at) FROM (SELECT session_id, started_at FROM "
    "session_turns UNION ALL SELECT session_id, started_at FROM session_taken_back) AS t "
    "GROUP BY session_id"
)
"""Each session, grouped for the start of its last turn, kept or taken back (a
session whose turns were all taken back still holds their runs); read from the
indexes of when each session's turns started (schema 7), not from the turns."""


def forget(db: Connection, session_ids: Sequence[str]) -> None:
    """Delete the sessions: their turns, and the runs of those turns and of the turns
    they took back, each run whole (its workers, messages, journal, spans, approvals,
    lease and lives), but those another session links; none of them when a run of
    theirs is carried on (``honeycomb resume`` of a turn taken back: it would write
    its rows again).

    Raises:
        SessionBusy: naming the run carried on (nothing deleted).
    """
    if not session_ids:
        return
    runs = runs_of(db, session_ids)
    carried = next((run_id for run_id in runs if carried_on(db, run_id)), None)
    if carried is not None:
        raise SessionBusy(
            f"run {carried} of session {session_ids[0]!r} is carried on (resumed), in "
            "this process or another: try again once it has ended",
            session_id=session_ids[0],
            turn=0,
            run_id=carried,
        )
    for start in range(0, len(runs), _AT_ONCE):
        some = runs[start : start + _AT_ONCE]
        marks = ", ".join("?" * len(some))
        for table in RUN_TABLES:
            if db.columns(table):  # a store of an earlier schema lacks some
                db.execute(f"DELETE FROM {table} WHERE run_id IN ({marks})", some)
    marks = ", ".join("?" * len(session_ids))
    for table in ("session_turns", "session_taken_back"):
        if db.columns(table):
            db.execute(f"DELETE FROM {table} WHERE session_id IN ({marks})", tuple(session_ids))


def runs_of(db: Connection, session_ids: Sequence[str]) -> list[str]:
    """The runs of the sessions' turns, and of those they took back, that no other
    session links (by a turn, or a turn it took back)."""
    marks = ", ".join("?" * len(session_ids))
    mine = f"SELECT run_id FROM session_turns WHERE session_id IN ({marks})"
    others = (
        "SELECT 1 FROM session_turns AS o WHERE o.run_id = m.run_id "
        f"AND o.session_id NOT IN ({marks})"
    )
    times = 2
    if db.columns("session_taken_back"):  # a store of schema 6 or before has none
        mine += f" UNION SELECT run_id FROM session_taken_back WHERE session_id IN ({marks})"
        others += (
            " UNION ALL SELECT 1 FROM session_taken_back AS b WHERE b.run_id = m.run_id "
            f"AND b.session_id NOT IN ({marks})"
        )
        times = 4
    rows = db.execute(
        f"SELECT run_id FROM ({mine}) AS m WHERE NOT EXISTS ({others})",
        tuple(session_ids) * times,
    )
    return sorted(run_id for (run_id,) in rows)


Expired = tuple[str, float]
"""A session past retention, and when its last turn (kept, or taken back) started."""


def expired(db: Connection, before: float | None, keep: int | None) -> list[Expired]:
    """The sessions past retention, in the order of their ids: those whose last turn
    started ``before``, and those past the newest ``keep``."""
    found: dict[str, float] = {}
    if before is not None:
        found |= dict(db.execute(f"{LAST} HAVING max(started_at) < ?", (before,)).fetchall())
    if keep is not None:
        newest_first = db.execute(f"{LAST} ORDER BY max(started_at) DESC").fetchall()
        found |= dict(newest_first[keep:])
    return sorted(found.items())


def last_at(db: Connection, session_id: str) -> float | None:
    """When the session's last turn (kept, or taken back) started; None: it has none."""
    row = db.execute(
        "SELECT max(started_at) FROM (SELECT started_at FROM session_turns WHERE "
        "session_id = ? UNION ALL SELECT started_at FROM session_taken_back WHERE "
        "session_id = ?) AS t",
        (session_id, session_id),
    ).fetchone()
    found: float | None = row[0] if row is not None else None
    return found


def known(db: Connection, session_ids: Sequence[str]) -> list[str]:
    """Those of the sessions that the store holds something of: a turn, or the run of
    a turn taken back."""
    if not db.columns("session_turns") or not session_ids:
        return []
    marks = ", ".join("?" * len(session_ids))
    sql = f"SELECT session_id FROM session_turns WHERE session_id IN ({marks})"
    given = tuple(session_ids)
    if db.columns("session_taken_back"):
        sql += f" UNION SELECT session_id FROM session_taken_back WHERE session_id IN ({marks})"
        given *= 2
    return sorted(session_id for (session_id,) in db.execute(sql, given))


def forget_held(db: Connection, session_ids: Sequence[str]) -> None:
    """Delete the sessions, held, as :func:`forget` does; none of them when one is
    answering.

    Raises:
        SessionBusy: naming the session answering, or a run of theirs carried on.
    """
    hold(db, session_ids)
    for session_id in session_ids:
        not_answering(db, session_id)
    forget(db, session_ids)


Pruned = tuple[list[str], str | None]
"""The sessions a transaction of retention forgot, and the id it went up to when more
may follow."""


PRUNED_AT_ONCE = 200
"""Sessions one transaction of retention holds and forgets (PostgreSQL keeps a lock of
each until it ends, in a table of a few thousand for every connection)."""


def prune(
    db: Connection, before: float | None, keep: int | None, after: str, out: list[Pruned]
) -> None:
    """Forget the next sessions retention forgets, in one transaction: of those
    :func:`~honeycomb.store.forgetting.expired` names, the first
    :data:`PRUNED_AT_ONCE` whose ids come after ``after``, each held, and still as it
    was read (no turn taken since); never one a process answers now, nor one with a
    run carried on (its run would be deleted under it). ``out`` is made those
    forgotten, and the last id considered when more may follow (else None)."""
    if not has_sessions(db):
        return
    found = [(sid, at) for sid, at in expired(db, before, keep) if sid > after]
    batch = found[:PRUNED_AT_ONCE]
    hold(db, [sid for sid, _ in batch])
    forgotten = [sid for sid, at in batch if last_at(db, sid) == at and forgotten_now(db, sid)]
    out[:] = [(forgotten, batch[-1][0] if len(found) > len(batch) else None)]


def forgotten_now(db: Connection, session_id: str) -> bool:
    """Forget the session, unless it is answering or has a run carried on: whether
    it was forgotten."""
    if answered_now(db, session_id) is not None:
        return False
    try:
        forget(db, (session_id,))
    except SessionBusy:  # raised before anything is deleted
        return False
    return True
