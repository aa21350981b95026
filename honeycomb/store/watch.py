"""The reads under way on a PostgreSQL store's connections, ended when its server is
silent.

A read of a server gone silent as its host paused (its kernel still takes and
acknowledges what is sent, so no keepalive nor ``tcp_user_timeout`` ever fails) would
wait for it for ever, in the pool's check of an idle connection or in its query. A
:class:`Watch` asks, once a read has gone on for a moment, whether the server answers
(a knock, :mod:`honeycomb.store.silence`): one that answers is asked again a moment
later, for as long as the read goes on (a slow query is waited for); one that answers
nothing has the read's connection shut (its socket: the read fails at once, and the
pool drops the connection), and the read says so.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from runtime import StoreError

if TYPE_CHECKING:
    import psycopg

    from honeycomb.store.silence import Knock

__all__ = ["Watch"]


class _Read:
    """One read under way: its connection, when it is looked at next, and why it was
    cut (None: it was not)."""

    def __init__(self, conn: psycopg.Connection[Any], due: float) -> None:
        self.conn = conn
        self.due = due
        self.cut: StoreError | None = None


class Watch:
    """The reads under way of one store, and a thread that looks at them while there
    are some.

    Args:
        knock: Whether the server answers now (see :mod:`honeycomb.store.silence`).
        silent: Called once a knock found the server silent (the store is away).
        moment: How long a read goes on before the server is asked.
    """

    def __init__(self, knock: Callable[[], Knock], silent: Callable[[], None], moment: float):
        self._knock = knock
        self._silent = silent
        self._moment = moment
        self._reads: set[_Read] = set()
        self._changed = threading.Condition()
        self._looking = False  # a thread looks at the reads

    @contextlib.contextmanager
    def over(self, conn: psycopg.Connection[Any]) -> Iterator[None]:
        """Watch a read on ``conn`` while the block runs.

        Raises:
            StoreError: when the server answered nothing as the read went on (its
                connection was shut), saying so.
        """
        read = _Read(conn, time.monotonic() + self._moment)
        with self._changed:
            self._reads.add(read)
            if not self._looking:
                self._looking = True
                name = "honeycomb-store-watch"
                threading.Thread(target=self._look, name=name, daemon=True).start()
        try:
            yield
        except Exception as exc:
            if read.cut is not None:
                raise read.cut from exc
            raise
        finally:
            with self._changed:
                self._reads.discard(read)

    def _look(self) -> None:
        """Until no read is under way: wait for the first one due, and ask the server."""
        while True:
            with self._changed:
                if not self._reads:
                    self._looking = False
                    return
                due = [read for read in self._reads if read.due <= time.monotonic()]
                if not due:
                    first = min(read.due for read in self._reads)
                    self._changed.wait(max(0.0, first - time.monotonic()))
                    continue
            heard = self._knock().heard()  # (within a knock's time: not under the lock)
            if heard.silent:
                self._silent()
            with self._changed:
                for read in due:
                    if read not in self._reads:
                        continue  # it ended meanwhile
                    if heard.silent:
                        read.cut = heard.error()
                        _shut(read.conn)
                    else:
                        read.due = time.monotonic() + self._moment


def _shut(conn: psycopg.Connection[Any]) -> None:
    """Shut ``conn``'s socket, as a reset would: a wait on it ends at once (its
    descriptor stays its own, closed as the connection is)."""
    with contextlib.suppress(Exception):  # closed, or lost already: nothing to shut
        sock = socket.socket(fileno=os.dup(conn.pgconn.socket))
        with sock:
            sock.shutdown(socket.SHUT_RDWR)
