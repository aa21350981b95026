"""A try of the writer thread to connect to its database again, in a thread of its own,
which the writer waits for no longer than it may (:func:`connected`): libpq takes 2 s at
least to give up on a server that takes connections and answers none, and a run that
stops waits a moment only, nor a batch whose wait a stopping write cut short."""

from __future__ import annotations

import threading
from collections.abc import Callable

from honeycomb.store.database import Database, WriteConnection
from runtime import StoreError

__all__ = ["connected"]


def connected(
    database: Database,
    within_s: float | None,
    changed: threading.Condition,
    given_up: Callable[[], bool],
) -> WriteConnection:
    """A new connection to ``database``, waited for at most ``within_s`` (None: as long as
    it takes), and no longer once ``given_up()`` (checked as ``changed`` is notified). A
    try given up on goes on in its thread, and closes the connection it gets.

    Raises:
        StoreError: when it could not connect, or was given up on.
    """
    attempt = _Attempt(database, within_s, changed)
    with changed:
        changed.wait_for(lambda: attempt.done or given_up(), within_s)
        if not attempt.done:
            attempt.abandoned = True
            raise StoreError(
                "cannot connect to the run store: the server did not answer in time",
                path=database.where,
            )
    if attempt.error is not None:
        raise attempt.error
    assert attempt.connection is not None  # done, without an error
    return attempt.connection


class _Attempt:
    """One try, in its thread."""

    def __init__(
        self, database: Database, within_s: float | None, changed: threading.Condition
    ) -> None:
        self.connection: WriteConnection | None = None
        self.error: BaseException | None = None
        self.done = False
        self.abandoned = False  # nobody waits for it: it closes what it gets
        self._database = database
        self._within_s = within_s
        self._changed = changed
        threading.Thread(target=self._run, name="honeycomb-store-connect", daemon=True).start()

    def _run(self) -> None:
        connection: WriteConnection | None = None
        error: BaseException | None = None
        try:
            database, within = self._database, self._within_s
            connection = database.connect() if within is None else database.connect(within)
        except BaseException as exc:  # told to the writer, which raises it
            error = exc
        with self._changed:
            self.connection, self.error, self.done = connection, error, True
            abandoned = self.abandoned
            self._changed.notify_all()
        if abandoned and connection is not None:
            connection.close()
