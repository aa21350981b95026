"""Which sessions are held: the one turn a process answers now, and the lock of a
session that the transactions taking its turns or editing it hold, one at a time
(see :mod:`honeycomb.store.sessions`)."""

from __future__ import annotations

from collections.abc import Sequence

from honeycomb.store.database import Connection
from honeycomb.store.lease import carried_on
from runtime.errors import SessionBusy

__all__ = ["Turned", "answered_now", "has_sessions", "hold", "last_turn", "not_answering"]

Turned = tuple[int, str]
"""A turn's number and its run's id."""


def last_turn(db: Connection, session_id: str, upto: int | None = None) -> Turned | None:
    """The number and run of the session's last turn (of those up to ``upto``)."""
    within, given = ("", (session_id,)) if upto is None else (" AND turn <= ?", (session_id, upto))
    last: Turned | None = db.execute(
        f"SELECT turn, run_id FROM session_turns WHERE session_id = ?{within} "
        "ORDER BY turn DESC LIMIT 1",
        given,
    ).fetchone()
    return last


def hold(db: Connection, session_ids: Sequence[str]) -> None:
    """Hold the sessions until the transaction ends (in order, so that no two wait on
    each other): of the transactions that take a session's turn or edit it, one at a
    time. SQLite's writer holds the whole file already; PostgreSQL's writers run at
    once, and one would change the turns another has read (a turn taken as the
    session is forgotten, deleted by the forget)."""
    for session_id in sorted(set(session_ids)):
        db.lock_run(f"session {session_id}")  # a name of its own, whose run is none


def not_answering(db: Connection, session_id: str) -> None:
    """Refuse to edit a session whose last turn a process answers now (in the
    transaction that edits it, so that none begins answering in between).

    Raises:
        SessionBusy: naming that turn.
    """
    answered = answered_now(db, session_id)
    if answered is not None:
        turn, run_id = answered
        raise SessionBusy(
            f"session {session_id!r} is answering message {turn} (run {run_id}), in "
            "this process or another: try again once it has ended",
            session_id=session_id,
            turn=turn,
            run_id=run_id,
        )


def answered_now(db: Connection, session_id: str, upto: int | None = None) -> Turned | None:
    """The number and run of the session's last turn (of those up to ``upto``), when
    a process answers it now (its run is carried on); else None."""
    last = last_turn(db, session_id, upto)
    return last if last is not None and carried_on(db, last[1]) else None


def has_sessions(db: Connection) -> bool:
    """Whether the store has the table (a store of schema 5 or before, read as it is,
    does not)."""
    return bool(db.columns("session_turns"))
