"""The run store in one SQLite file: the default (see :mod:`honeycomb.store.schema` for
how a file is known to be a store, made and upgraded, and read without being changed)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from honeycomb.store.database import Connection, Rows
from honeycomb.store.schema import connect, reader
from honeycomb.store.silence import Knock
from runtime import StoreError
from runtime.text import valid_text

__all__ = ["SQLiteConnection", "SQLiteDatabase"]

T = TypeVar("T")


class SQLiteConnection:
    """A connection to a store's file (see :class:`~honeycomb.store.database.Connection`).
    A transaction that writes holds the whole file: no row needs a lock of its own."""

    row_lock = ""
    errors: tuple[type[Exception], ...] = (sqlite3.Error,)

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        return self.db.execute(sql, params)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.db.executemany(sql, rows)

    def columns(self, table: str) -> frozenset[str]:
        return frozenset(row[1] for row in self.db.execute(f"PRAGMA table_info({table})"))

    def lock_run(self, run_id: str) -> None:
        pass  # the transaction holds the file's write lock already

    def json_number(self, column: str, *keys: str) -> str:
        path = "$." + ".".join(keys)
        return f"CASE WHEN json_valid({column}) THEN json_extract({column}, '{path}') END"

    def begin(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")  # one writer at a time, across processes

    def commit(self) -> None:
        self.db.execute("COMMIT")

    def rollback(self) -> None:
        with contextlib.suppress(sqlite3.Error):  # a failed rollback leaves it to SQLite
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")

    def checkpoint(self, final: bool) -> None:
        # What is committed is durable either way; a checkpoint that cannot finish is
        # left to the next one (or to the next open).
        with contextlib.suppress(sqlite3.Error):
            self.db.execute(f"PRAGMA wal_checkpoint({'TRUNCATE' if final else 'PASSIVE'})")

    def lost(self) -> bool:
        return False  # a file is not a server: it does not go away between two writes

    def retryable(self, error: Exception) -> bool:
        return False  # one writer at a time: no deadlock (a busy file is waited for)

    def of_one_write(self, error: Exception) -> bool:
        # A value SQLite refuses (too big, a constraint) or cannot bind (an integer
        # past 64 bits); an OperationalError is the file's (locked, full).
        return not isinstance(error, sqlite3.Error) or isinstance(
            error, sqlite3.DataError | sqlite3.IntegrityError | sqlite3.InterfaceError
        )

    def close(self) -> None:
        self.db.close()


class SQLiteDatabase:
    """A store's SQLite file (see :class:`~honeycomb.store.database.Database`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = str(path)
        self.away = False  # a file does not go away: its reads never wait for it

    def connect(self) -> SQLiteConnection:
        db = connect(self.path, write=True)
        assert db is not None  # None only for reading
        return SQLiteConnection(db)

    def close(self) -> None:
        pass  # each read opens its own connection

    def knock(self) -> Knock:
        return Knock(None, self.where)  # a file is never silent: its writes are waited for

    def kept(self, text: str) -> str:
        return valid_text(text)  # as the writer stores it

    def read(self, read: Callable[[Connection], T], empty: T) -> T:
        """``read(db)`` on a read-only connection, in one snapshot. A store no process
        has open is read as it is, creating no file; if a run opens it meanwhile, it
        is read again as a store in use (see :func:`~honeycomb.store.schema.reader`)."""
        for shared in (False, True):
            opened = reader(self.path, shared=shared)
            if opened is None:
                return empty
            db, unchanged = opened
            try:
                db.execute("BEGIN")  # one snapshot for the whole read
                found = read(SQLiteConnection(db))
            except Exception as exc:
                # Read as an immutable file while it changed, a page of it torn between
                # two writes fails in SQLite or in what is made of its rows (a value
                # decoded): read it again, as a store in use.
                if unchanged is not None and not unchanged():
                    continue
                if not isinstance(exc, sqlite3.Error):
                    raise
                raise StoreError(f"cannot read the run store: {exc}", path=self.where) from exc
            finally:
                db.close()
            if unchanged is None or unchanged():
                return found
        raise AssertionError("unreachable: a shared read is never read again")  # pragma: no cover
