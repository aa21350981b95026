"""The one interface of the databases a :class:`~honeycomb.store.RunStore` keeps runs in:
an SQLite file (:mod:`honeycomb.store.sqlite`, the default) or a PostgreSQL server
(:mod:`honeycomb.store.postgres`, which many processes on many machines share).

The store's SQL is written once, in what both speak: ``?`` placeholders, ``INSERT ...
ON CONFLICT ... DO UPDATE``, types SQLite names (PostgreSQL's tables are made with its
own). A :class:`Connection` runs it as its database needs, and says what differs: which
tables and columns there are, how a row is locked, how a run is locked while its
lease is taken. A new table is one ``CREATE TABLE`` in :mod:`honeycomb.store.schema`,
which both databases make (see :data:`~honeycomb.store.schema.CREATED`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

# Which URLs name a store is said once, where a hive's check reads it too.
from runtime.config.stores import is_url, store_problem

if TYPE_CHECKING:
    from honeycomb.store.silence import Knock

__all__ = ["Connection", "Database", "Rows", "is_url", "store_problem"]

T = TypeVar("T")


class Rows(Protocol):
    """What a statement gives back (a DB-API cursor)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """One connection to a store's database, used by one thread at a time."""

    row_lock: str
    """What a ``SELECT`` ends with to hold the rows it reads until the transaction
    ends ('' where a transaction holds the whole database, as SQLite's do)."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        """Run one statement (``?`` placeholders)."""

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement for each row."""

    def columns(self, table: str) -> frozenset[str]:
        """The columns of ``table`` (none: there is no such table)."""

    def lock_run(self, run_id: str) -> None:
        """Hold run ``run_id`` until the transaction ends: of the transactions that
        take a run's lease, one at a time."""

    def json_number(self, column: str, *keys: str) -> str:
        """An SQL expression: the number at ``keys`` in the JSON text of ``column``
        (NULL when there is none)."""


class Database(Protocol):
    """Where a store's rows are: how its writer connects, and how it is read."""

    where: str
    """What errors and commands name it by: the file, or the URL without a password."""
    away: bool
    """The writer gave up connecting to it (it stayed away for the writer's tries, or a
    run that stops could not wait for it), or a wait for the writer found it silent
    (:mod:`honeycomb.store.silence`), and the writer has not connected nor committed
    since: reads do not wait for it either. Cleared by :meth:`connect`, by the writer
    as it commits, and by a knock let in."""

    def connect(self) -> WriteConnection:
        """The writer's connection, to a store made or brought up to the current schema.

        Raises:
            StoreError: when it cannot be opened, or is not a Honeycomb run store.
        """

    def knock(self) -> Knock:
        """Whether the server answers now (a new connection, let in or refused), known
        within its window (:class:`~honeycomb.store.silence.Knocker`): a knock under
        way or just heard, or a new one. A file always answers."""

    def kept(self, text: str) -> str:
        """``text`` as a column of text keeps it, and reads it back."""

    def read(self, read: Callable[[Connection], T], empty: T) -> T:
        """``read(connection)`` in one snapshot of the store (``empty``: no store there
        yet), creating nothing.

        Raises:
            StoreError: when it cannot be read.
        """

    def close(self) -> None:
        """Close what it keeps open for reading."""


class WriteConnection(Connection, Protocol):
    """The writer thread's connection: its transactions, and how they fail."""

    errors: tuple[type[Exception], ...]
    """The database's own errors (what a failed transaction raises)."""

    def begin(self) -> None:
        """Start a transaction that writes (in SQLite, holding the file's write lock)."""

    def commit(self) -> None: ...

    def rollback(self) -> None:
        """End a transaction that failed, if one is open; never raises."""

    def checkpoint(self, final: bool) -> None:
        """Make what was committed cheap to read (SQLite: move its WAL into the file,
        as far as readers allow; ``final``: all of it, the WAL emptied, as the writer
        stops and after a deletion). Never raises."""

    def lost(self) -> bool:
        """Whether the connection is gone (the server restarted, or the network
        dropped it): the next transaction needs a new one."""

    def retryable(self, error: Exception) -> bool:
        """Whether a transaction that failed with ``error`` was rolled back by the
        database for another's sake (a deadlock), and is to be made again."""

    def of_one_write(self, error: Exception) -> bool:
        """Whether ``error`` is of the statement that raised it (a value the database
        does not take, or cannot be given), not of the database (a lock, a full disk):
        the other writes of its transaction can be made without it."""

    def close(self) -> None: ...
