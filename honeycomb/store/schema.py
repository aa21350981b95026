"""The run store's tables, and how a file is known to hold them.

The tables are written once, in SQLite's words; the PostgreSQL store makes the same
ones in its types (:func:`honeycomb.store.postgres.in_postgres`). A change to the
tables bumps :data:`SCHEMA_VERSION` and adds its step to :data:`ADDED` (and its new
tables to :data:`CREATED`: a new table is one ``CREATE TABLE IF NOT EXISTS`` there, and
both stores make it); :func:`upgrade` brings an SQLite store of any earlier version up
to the current one in one transaction, as the PostgreSQL store does its own. ``CREATE
TABLE IF NOT EXISTS`` adds no column to a table that exists, so a version that adds
columns adds them with ``ALTER TABLE``; reading a store of an earlier version (which
is never changed by reading) gives each column it lacks the default the step adds it
with (:func:`columns`). A store is known by its ``application_id``; stores of schema
1, written before there was one, by their tables.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from honeycomb.store.files import (
    idle,
    not_a_file,
    read_only,
    sidecar,
    unwritable,
    wal_application_id,
)

if TYPE_CHECKING:
    from honeycomb.store.database import Connection
from runtime import StoreError

APPLICATION_ID = 0x48594342  # "HYCB"
SCHEMA_VERSION = 9
TABLES = f"""
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    task TEXT NOT NULL,
    status TEXT NOT NULL,
    source TEXT,
    started_at REAL NOT NULL,
    finished_at REAL,
    plan TEXT,
    result TEXT,
    error TEXT,
    workers INTEGER NOT NULL DEFAULT 0,
    model_calls INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    tool_calls INTEGER NOT NULL DEFAULT 0,
    cost REAL NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS workers (
    run_id TEXT NOT NULL,
    worker TEXT NOT NULL,
    status TEXT NOT NULL,
    result TEXT,
    updated_at REAL NOT NULL,
    task TEXT,
    messages INTEGER,
    previous INTEGER,
    turn INTEGER,
    input_tokens INTEGER,
    output_tokens INTEGER,
    cost REAL,
    tool_calls INTEGER,
    nudged INTEGER,
    output_attempts INTEGER,
    wrapped_up INTEGER,
    repeats INTEGER,
    PRIMARY KEY (run_id, worker)
);
CREATE TABLE IF NOT EXISTS messages (
    run_id TEXT NOT NULL,
    worker TEXT NOT NULL,
    seq INTEGER NOT NULL,
    messages TEXT NOT NULL,
    PRIMARY KEY (run_id, worker, seq)
);
CREATE TABLE IF NOT EXISTS journal (
    run_id TEXT NOT NULL,
    worker TEXT NOT NULL,
    turn INTEGER NOT NULL,
    call_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL,
    status TEXT,
    content TEXT,
    started_at REAL NOT NULL,
    finished_at REAL,
    PRIMARY KEY (run_id, worker, turn, call_id)
);
CREATE TABLE IF NOT EXISTS spans (
    run_id TEXT NOT NULL,
    spans TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS spans_of_run ON spans (run_id);
CREATE TABLE IF NOT EXISTS leases (
    run_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    heartbeat REAL NOT NULL,
    ttl_s REAL NOT NULL
);
PRAGMA application_id = {APPLICATION_ID};
"""
"""The tables as of schema 2 (schema 1 had no leases and no application id): what a
new store, and a store of schema 1, is made up to."""

ADDED: dict[int, dict[str, tuple[tuple[str, str, str], ...]]] = {
    3: {
        # The share of input tokens read from the provider's cache.
        "runs": (("cached_input_tokens", "INTEGER NOT NULL DEFAULT 0", "0"),),
        # The rest of a worker's loop state: its cache and reasoning counters, and
        # its rolling summary (see workers.LoopState).
        "workers": (
            ("cached_input_tokens", "INTEGER", "0"),
            ("reasoning_tokens", "INTEGER", "0"),
            ("summary", "TEXT", "''"),
            ("summarized", "INTEGER", "0"),
            ("compactions", "INTEGER", "0"),
            ("context_tokens", "INTEGER", "0"),
            ("context_messages", "INTEGER", "0"),
        ),
    },
    4: {
        # Who made the plan: 'given' (the run was given its subtasks: it plans once,
        # also when resumed) or 'planner'; NULL in a store of schema 3 (not known).
        # Schema 4 also keeps a run's result without the outcomes of the subtasks that
        # finished (each is in its worker's row), which a reader of schema 3 would
        # take for the whole result.
        "runs": (("planned_by", "TEXT", "NULL"),),
    },
    5: {
        # Who decided a call that asked for approval (a decision is final: the first
        # one stands, and whoever decides after is told who made it).
        "approvals": (("decided_by", "TEXT", "NULL"),),
    },
    6: {},  # tables of their own: evals, and the turns of sessions (CREATED)
    7: {},  # the runs of turns taken back, and the indexes retention reads (CREATED)
    8: {
        # What the run holds back until its output guards pass its answer: 'workers'
        # (its answer is made of its workers' answers: concat, an aggregator function,
        # so no view shows them before); NULL: nothing a view shows.
        "runs": (("held", "TEXT", "NULL"),),
    },
    9: {
        # Whether an eval was interrupted (its report says so too); NULL: kept by an
        # earlier version (its report is read to know).
        "evals": (("interrupted", "INTEGER", "NULL"),),
    },  # and the table of evals' runs (CREATED)
}
"""The columns each version adds, by table: ``(name, declaration, what a store of an
earlier version reads for it)``."""

APPROVALS = """
CREATE TABLE IF NOT EXISTS approvals (
    run_id TEXT NOT NULL,
    worker TEXT NOT NULL,
    turn INTEGER NOT NULL,
    call_id TEXT NOT NULL,
    role TEXT NOT NULL,
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL,
    why TEXT NOT NULL,
    asked_at REAL NOT NULL,
    deadline REAL,
    approved INTEGER,
    reason TEXT,
    edited TEXT,
    decided_at REAL,
    PRIMARY KEY (run_id, worker, turn, call_id)
)
"""
"""Calls that waited for a person's approval, and the decisions. Stores of schema 4
and before made it with the first approval they kept (a store that never kept one
lacks it: readers take a missing table for none); schema 5 makes it with the others."""

LIVES = """
CREATE TABLE IF NOT EXISTS lives (
    run_id TEXT NOT NULL,
    life INTEGER NOT NULL,
    started_at REAL NOT NULL,
    model_calls INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    tool_calls INTEGER NOT NULL DEFAULT 0,
    cost REAL NOT NULL DEFAULT 0,
    reasoning_tokens INTEGER NOT NULL DEFAULT 0,
    cached_input_tokens INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, life)
)
"""
"""One row per life of a run (each ``run`` or ``resume`` that carried it on, from 1):
when it started, and what the whole run had spent, every earlier life included, when
it ended, or, for a life cut off (a crash), at its last spend. Written as the life
spends: a resumed run's budget starts from its last life's row (see
``honeycomb/run/record.py``). A life's own spending is its row less the one before."""

EVALS = """
CREATE TABLE IF NOT EXISTS evals (
    eval_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    started_at REAL NOT NULL,
    passed INTEGER NOT NULL,
    report TEXT NOT NULL
)
"""
"""One row per eval (``honeycomb eval``): its report as JSON, each of its cases' runs
kept as a run of its own (schema 6)."""

SESSION_TURNS = """
CREATE TABLE IF NOT EXISTS session_turns (
    session_id TEXT NOT NULL,
    turn INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    message TEXT NOT NULL,
    started_at REAL NOT NULL,
    summary TEXT NOT NULL DEFAULT '',
    summarized INTEGER NOT NULL DEFAULT 0,
    answer TEXT,
    results TEXT,
    PRIMARY KEY (session_id, turn)
)
"""
"""One row a turn of a session (see :mod:`honeycomb.store.sessions`): its run, its
message, the rolling summary of the turns before it that its run was given (standing
for the first ``summarized`` of them), and, once its run ended with one, its answer
and its subtasks' results (a JSON array of ``{id, role, ok, text}``)."""

SESSION_TURNS_OF_RUN = "CREATE INDEX IF NOT EXISTS session_turns_of_run ON session_turns (run_id)"

SESSION_TURNS_BY_TIME = (
    "CREATE INDEX IF NOT EXISTS session_turns_by_time ON session_turns (session_id, started_at)"
)
"""When each session's turns started: retention and the list of sessions read each
session's last from it alone, not from the turns' rows (their messages, answers and
summaries)."""

TAKEN_BACK = """
CREATE TABLE IF NOT EXISTS session_taken_back (
    session_id TEXT NOT NULL,
    started_at REAL NOT NULL,
    run_id TEXT NOT NULL,
    PRIMARY KEY (session_id, started_at, run_id)
)
"""
"""The runs of the turns a session took back (``pop``, ``clear``, a fork over them, a
message refused), which stay in the store as runs: forgetting the session (or
retention) deletes them with its turns' runs (schema 7)."""

TAKEN_BACK_OF_RUN = (
    "CREATE INDEX IF NOT EXISTS session_taken_back_of_run ON session_taken_back (run_id)"
)

EVAL_RUNS = """
CREATE TABLE IF NOT EXISTS eval_runs (
    run_id TEXT PRIMARY KEY,
    eval_id TEXT NOT NULL
)
"""
"""The runs an eval made whose calls may wait for a person, each with its eval's id,
kept before the run starts: nobody decides on their calls (the eval denies those its
runs leave waiting). A run is an eval's by its row here, not by its id (schema 9)."""

EVAL_RUNS_BEFORE = (
    "INSERT INTO eval_runs (run_id, eval_id) SELECT run_id, "
    "substr(run_id, 6, length(run_id) - 18) FROM runs "
    "WHERE length(run_id) > 18 AND substr(run_id, 1, 5) = 'eval:' "
    "AND substr(run_id, length(run_id) - 12, 1) = ':' "
    "AND rtrim(substr(run_id, length(run_id) - 11), '0123456789abcdef') = '' "
    "AND replace(run_id, '/', '') = run_id"
)
"""The evals' runs of a store of an earlier schema, which knew them by their ids alone:
what the store of schema 9 knows them by. Only an id of the shape an eval gave its runs
(``eval:EVAL_ID:`` and 12 lowercase hex digits, no ``/``), told apart case by case (not
by ``LIKE``, which ignores case in SQLite): a user's own run named ``eval:...`` stays a
run like any other."""

CREATED: dict[int, tuple[str, ...]] = {
    5: (APPROVALS, LIVES),
    6: (EVALS, SESSION_TURNS, SESSION_TURNS_OF_RUN),
    7: (TAKEN_BACK, TAKEN_BACK_OF_RUN, SESSION_TURNS_BY_TIME),
    9: (EVAL_RUNS, EVAL_RUNS_BEFORE),
}
"""The tables each version adds (``IF NOT EXISTS``: made before its columns are), and
the rows it carries into them from a store of an earlier version."""


def upgrade_statements(version: int) -> list[str]:
    """The statements that bring a store of schema ``version`` (0: a new one) up to
    :data:`SCHEMA_VERSION`."""
    steps: list[str] = []
    if version < 2:
        steps += [part.strip() for part in TABLES.split(";") if part.strip()]
    for added in range(max(version, 2) + 1, SCHEMA_VERSION + 1):
        steps += [table.strip() for table in CREATED.get(added, ())]
        for table, new in ADDED[added].items():
            steps += [f"ALTER TABLE {table} ADD COLUMN {name} {kind}" for name, kind, _ in new]
    return [*steps, f"PRAGMA user_version = {SCHEMA_VERSION}"]


def upgrade(db: sqlite3.Connection) -> None:
    """Bring the store in ``db`` up to :data:`SCHEMA_VERSION`, in one transaction (a
    crash leaves all or none of it), under the write lock: the version is read again
    there, for another connection may have just upgraded it."""
    db.execute("BEGIN IMMEDIATE")
    try:
        version = schema_of(db)
        if version is not None and version < SCHEMA_VERSION:
            for statement in upgrade_statements(version):
                db.execute(statement)
        db.execute("COMMIT")
    except BaseException:
        # A COMMIT that failed for the disk (full, or a write error) was rolled back by
        # SQLite already: a ROLLBACK then would raise, and hide why it failed.
        with contextlib.suppress(sqlite3.Error):
            if db.in_transaction:
                db.execute("ROLLBACK")
        raise


def columns(db: Connection, table: str, names: Sequence[str]) -> str:
    """``names`` as a select list of ``table`` in ``db``: a column an earlier schema
    lacks reads as the default its version adds it with."""
    present = db.columns(table)
    defaults = {
        name: default for step in ADDED.values() for name, _, default in step.get(table, ())
    }
    return ", ".join(n if n in present else f"{defaults[n]} AS {n}" for n in names)


_FIRST_TABLES = {"runs", "workers", "messages", "journal", "spans"}
"""The tables of schema 1, which had no application id."""


def schema_of(db: sqlite3.Connection) -> int | None:
    """The schema version of the run store ``db`` holds (0: an empty database, to
    become one), or None when it holds something else. Reads only."""
    application = db.execute("PRAGMA application_id").fetchone()[0]
    version: int = db.execute("PRAGMA user_version").fetchone()[0]
    if application == APPLICATION_ID:
        return version
    if application != 0:
        return None
    entries = db.execute("SELECT type, name FROM sqlite_master").fetchall()
    if not entries and version == 0:
        return 0
    tables = {name for kind, name in entries if kind == "table" and not name.startswith("sqlite_")}
    if version == 1 and tables == _FIRST_TABLES:
        return 1
    return None


def connect(path: Path, *, write: bool) -> sqlite3.Connection | None:
    """A connection to the run store in ``path``, once the file is known to be one.

    To write, a missing file (and its folder) is created, and an empty one made a
    store. To read, see :func:`reader`. A folder, or a file that is not a store, is
    refused before any connection that could change it is opened
    (:func:`refuse_foreign`).

    Raises:
        StoreError: when the file cannot be opened, is a folder or not a Honeycomb
            run store, or was written by a newer Honeycomb.
    """
    if not write:
        opened = reader(path, shared=True)
        return opened[0] if opened is not None else None
    refuse_foreign(path)
    if read_only(path):  # SQLite would open it to read, and refuse its first write
        raise StoreError(
            "cannot open the run store: the file is read-only for this user", path=str(path)
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            _create(path)
        db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=30.0)
    except (OSError, sqlite3.Error) as exc:
        raise _unusable(path, exc) from exc
    try:
        version = _checked(db, path)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        # What is deleted (a forgotten session) leaves no text in its freed pages,
        # whatever this SQLite's build defaults to.
        db.execute("PRAGMA secure_delete=ON")
        if version < SCHEMA_VERSION:
            upgrade(db)
    except sqlite3.Error as exc:
        db.close()
        raise _unusable(path, exc) from exc
    except BaseException:
        db.close()
        raise
    return db


def _unusable(path: Path, exc: Exception) -> StoreError:
    """A store SQLite cannot open or use, in its words, and why, if the file system
    tells (a read-only file or folder: SQLite says only that it cannot)."""
    why = unwritable(path)
    said = f"cannot open the run store: {exc}" + (f" ({why})" if why else "")
    return StoreError(said, path=str(path))


def _create(path: Path) -> None:
    """Make a new store at ``path``, whole, unless another process makes it first.

    The store is made in a file of its own beside ``path``, then linked to ``path`` in
    one step that fails if ``path`` exists: no connection ever sees a half-made store
    (its tables there before its application id), which it would take for another
    application's database. A file system without hard links makes it in place.
    """
    made = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.new")
    try:
        db = sqlite3.connect(str(made), isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")  # kept in the file's header
            upgrade(db)
        finally:
            db.close()  # the last connection: what its -wal holds moves into the file
        with contextlib.suppress(FileExistsError):  # another made it: that is the store
            os.link(made, path)
    except OSError:
        pass  # no hard links here (or no room): the store is made in place, as it opens
    finally:
        for leftover in (made, sidecar(made, "-wal"), sidecar(made, "-shm")):
            leftover.unlink(missing_ok=True)


Unchanged = Callable[[], bool]
"""Whether a file read as immutable is still as it was when the read began."""


def reader(path: Path, *, shared: bool) -> tuple[sqlite3.Connection, Unchanged | None] | None:
    """A read-only connection to the store in ``path`` (None: no store there yet: a
    missing or empty file), which neither creates nor writes any file.

    A store no process has open (no ``-wal`` or ``-shm`` beside it: the ``.db`` holds
    everything) is opened as an immutable file, for SQLite would otherwise create the
    ``-wal`` and ``-shm`` beside it to read it; then the second item tells whether the
    file is still as it was (a run may open it meanwhile: what was read is then to be
    read again). Else, or with ``shared``, it is opened as SQLite shares a file in use,
    through the ``-shm`` of the process that has it open; the second item is None.

    Raises:
        StoreError: as :func:`connect` does.
    """
    refuse_foreign(path)
    if not path.exists():
        return None
    seen = None if shared else idle(path)
    db = _read_only(path, immutable=seen is not None)
    try:
        version = _checked(db, path)
    except StoreError:
        db.close()
        if seen is None or idle(path) == seen:
            raise
        return reader(path, shared=True)  # a run opened it as it was read
    except BaseException:
        db.close()
        raise
    if version == 0:
        db.close()
        return None
    if seen is None:
        return db, None
    return db, lambda: idle(path) == seen


def refuse_foreign(path: Path) -> None:
    """Refuse a folder, and a file that is not a run store (nor empty), without
    changing it or its ``-wal`` and ``-shm`` (see :mod:`honeycomb.store.files`): the
    file is read as an immutable one, and when it holds nothing yet, the first write
    its ``-wal`` holds says whose it is (a store's first transaction gives it its
    application id). Reading and writing a store both pass here first.

    Raises:
        StoreError: when ``path`` is a folder (or sits in a file), a device, a pipe,
            or a file that is not a Honeycomb run store, or one a newer Honeycomb wrote.
    """
    unusable = not_a_file(path)
    if unusable is not None:
        raise StoreError(unusable, path=str(path))
    if not path.exists():
        return  # to be created
    try:
        version = _version_of(path, shared=False)
    except StoreError:
        # Read as an immutable file while a run writes or checkpoints into it, a store
        # in use can look malformed: read it as SQLite shares a file in use instead.
        if idle(path) is not None:
            raise
        version = _version_of(path, shared=True)
    if version == 0:  # nothing in the file itself: its rows may all be in its -wal
        found = wal_application_id(path)
        if found is not None and found != APPLICATION_ID:
            raise _foreign(path, "an SQLite database whose rows are in its -wal")


def _version_of(path: Path, *, shared: bool) -> int:
    """The schema version of the store in ``path``, read as an immutable file, or
    with ``shared`` as SQLite shares a file in use."""
    db = _read_only(path, immutable=not shared)
    try:
        return _checked(db, path)
    finally:
        db.close()


def _read_only(path: Path, *, immutable: bool) -> sqlite3.Connection:
    """A read-only connection to ``path``: as an immutable file (which creates no
    ``-wal`` or ``-shm``), or as SQLite shares a file in use, through the ``-shm`` of
    the process that has it open."""
    options = "mode=ro&immutable=1" if immutable else "mode=ro"
    try:
        return sqlite3.connect(
            f"{path.resolve().as_uri()}?{options}",
            uri=True,
            isolation_level=None,
            check_same_thread=False,
            timeout=30.0,
        )
    except (OSError, sqlite3.Error) as exc:
        raise _unusable(path, exc) from exc


def _checked(db: sqlite3.Connection, path: Path) -> int:
    """The schema version of the store in ``db``, which must be one this Honeycomb
    can use."""
    try:
        version = schema_of(db)
    except sqlite3.OperationalError as exc:  # of the file (locked, read-only), not its rows
        raise _unusable(path, exc) from exc
    except sqlite3.DatabaseError as exc:
        if exc.sqlite_errorname == "SQLITE_CORRUPT":  # an SQLite file, whoever's: damaged
            raise StoreError(
                f"the file is damaged ({exc}); it was left as it was: if it is a run store, "
                "restore it from a copy (its -wal and -shm with it), else give the run "
                "store a file of its own",
                path=str(path),
            ) from exc
        version, why = None, f"{exc}"  # not an SQLite file at all
    else:
        why = "an SQLite database with other tables"
    if version is None:
        raise _foreign(path, why)
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"the store was written by a newer Honeycomb (schema {version}); upgrade "
            "Honeycomb or use another store",
            path=str(path),
        )
    return version


def _foreign(path: Path, why: str) -> StoreError:
    return StoreError(
        f"the file is not a Honeycomb run store ({why}); it was left as it was: give "
        "the run store a file of its own",
        path=str(path),
    )


__all__ = [
    "ADDED",
    "APPLICATION_ID",
    "APPROVALS",
    "CREATED",
    "EVALS",
    "EVAL_RUNS",
    "EVAL_RUNS_BEFORE",
    "LIVES",
    "SCHEMA_VERSION",
    "SESSION_TURNS",
    "SESSION_TURNS_BY_TIME",
    "SESSION_TURNS_OF_RUN",
    "TABLES",
    "TAKEN_BACK",
    "TAKEN_BACK_OF_RUN",
    "Unchanged",
    "columns",
    "connect",
    "reader",
    "refuse_foreign",
    "schema_of",
    "upgrade",
    "upgrade_statements",
]
