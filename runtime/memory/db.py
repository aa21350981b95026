"""The SQLite side of :class:`~runtime.memory.SQLiteMemory`: which SQLite to use, the
file's tables, and each operation as a function of one connection (run in a thread).

A memory file holds ``memories`` (one row a text, keyed by its content's hash), an
FTS5 index of their text kept in step by triggers, and, once semantic search has
stored a vector, a sqlite-vec ``vec0`` table of vectors partitioned by namespace.
Rows are numbered by AUTOINCREMENT, never reused: a vector left behind by a delete
made without sqlite-vec loaded matches no memory, never a later one, and is swept
when a memory with embeddings next opens the file.

The file is known by its ``application_id``; another application's file is refused
before anything is written to it.
"""

from __future__ import annotations

import importlib
import sqlite3
import stat
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

from runtime.errors import MemoryFeatureMissing, MemoryStoreError
from runtime.memory._sqlite import (
    BUSY_SLICE_S,
    busy_retry,
    is_read_only,
    is_read_only_folder,
    use_wal,
)
from runtime.memory.store import indexed_text, word_characters

__all__ = [
    "APPLICATION_ID",
    "SCHEMA_VERSION",
    "VectorMismatch",
    "delete",
    "driver",
    "get",
    "insert",
    "listed",
    "namespaces",
    "open_connection",
    "text_hits",
    "vector_hits",
]

APPLICATION_ID = 0x4859434D  # "HYCM" (the run store's is "HYCB")
SCHEMA_VERSION = 7
"""1: the word index took a run of Chinese, Japanese or Korean letters for one word;
2: it indexes each (:func:`~runtime.memory.store.indexed_text`); 3: each Thai, Lao,
Burmese or Khmer letter too, with its marks (its tokenizer keeps them in a word); 4:
the vowel signs and viramas of the scripts of India and their kin are kept in their
words too, which 3 cut into letters; 5: the vowel points of Hebrew, Arabic and Syriac
are left out of what is indexed, and a text is indexed composed (NFC); 6: 4 kept the
marks of Javanese, Balinese and the other scripts of their kind written without spaces,
making a run of them one word: they are cut at again; 7: the triggers call the
indexing by a name of its version (:data:`INDEXED`). A file of an earlier version is
indexed anew as it is first opened."""
INDEXING = 6
"""The version of :func:`~runtime.memory.store.indexed_text`: bumped (and
:data:`SCHEMA_VERSION` with it) whenever it indexes a text otherwise. What it keeps in
a word is written out (:mod:`runtime.memory._unicode`), not read from the running
Python's tables, which change with its version; the marks of Unicode 15 and 15.1 that
the tokenizer of a file Python 3.11 made does not name are part of a word to SQLite's
tables anyway: such a file is indexed alike, and is not indexed anew."""
INDEXED_NAME = "honeycomb_indexed_text"
INDEXED = f"{INDEXED_NAME}_{INDEXING}"
"""The SQL function the triggers index a text through, made on each connection. Its
name holds the indexing's version: a process of an earlier Honeycomb that has the file
open as a later one indexes it anew has no function of that name, and its writes fail
(no such function) instead of indexing its texts otherwise, or, as it forgets one,
telling the index other words than it holds (which corrupts the index)."""
SCHEMA = (
    """CREATE TABLE IF NOT EXISTS memories (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        namespace TEXT NOT NULL,
        text TEXT NOT NULL,
        kind TEXT NOT NULL,
        run_id TEXT,
        role TEXT,
        worker TEXT,
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS memories_of_namespace ON memories (namespace, created_at)",
    f"""CREATE VIRTUAL TABLE IF NOT EXISTS memory_text USING fts5(
        text, content='memories', content_rowid='seq',
        tokenize="porter unicode61 remove_diacritics 2 tokenchars '{word_characters()}'"
    )""",
    f"""CREATE TRIGGER IF NOT EXISTS memory_indexed AFTER INSERT ON memories BEGIN
        INSERT INTO memory_text (rowid, text) VALUES (new.seq, {INDEXED}(new.text));
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS memory_unindexed AFTER DELETE ON memories BEGIN
        INSERT INTO memory_text (memory_text, rowid, text)
            VALUES ('delete', old.seq, {INDEXED}(old.text));
    END""",
    "CREATE TABLE IF NOT EXISTS settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    f"PRAGMA application_id = {APPLICATION_ID}",
    f"PRAGMA user_version = {SCHEMA_VERSION}",
)
UNINDEX = (
    "DROP TRIGGER memory_indexed",
    "DROP TRIGGER memory_unindexed",
    "DROP TABLE memory_text",
)
"""What a file of an earlier schema loses before :data:`SCHEMA` makes it one of this
(and :data:`REINDEX` indexes its words anew): its word index, whose tokenizer and
triggers split words otherwise."""
REINDEX = f"INSERT INTO memory_text (rowid, text) SELECT seq, {INDEXED}(text) FROM memories"
_COLUMNS = "m.id, m.namespace, m.text, m.kind, m.run_id, m.role, m.worker, m.created_at"
Row = tuple[Any, ...]
"""A memory's columns, in the order of :data:`_COLUMNS` (then a score, for hits)."""

INSTALL_MEMORY = "pip install 'honeycomb-agents[memory]'"


# --- which SQLite ------------------------------------------------------------------


def driver(path: Path, *, vectors: bool) -> ModuleType:
    """The DB-API module to open memory files with: Python's ``sqlite3`` when its SQLite
    has FTS5 (and, for ``vectors``, loads extensions), else ``pysqlite3`` (the memory
    extra brings it on Linux) when that does.

    Raises:
        MemoryFeatureMissing: naming what to install, when neither will do.
    """
    candidates: list[ModuleType] = [sqlite3]
    with suppress(ImportError):
        candidates.append(importlib.import_module("pysqlite3.dbapi2"))
    if vectors:
        try:
            importlib.import_module("sqlite_vec")
        except ImportError:
            raise MemoryFeatureMissing(
                "sqlite-vec",
                "semantic search (embeddings) needs the sqlite-vec extension, which is "
                "not installed",
                INSTALL_MEMORY,
                path=str(path),
            ) from None
    for module in candidates:
        if _has_fts5(module) and (not vectors or _loads_extensions(module)):
            return module
    if not any(_has_fts5(m) for m in candidates):
        raise MemoryFeatureMissing(
            "FTS5",
            f"memory search needs SQLite's FTS5 full-text search, which the SQLite "
            f"{sqlite3.sqlite_version} of this Python lacks",
            f"{INSTALL_MEMORY} (it brings pysqlite3-binary, an SQLite with FTS5), or use a "
            "Python whose sqlite3 has FTS5 (python.org's and most distributions' do)",
            path=str(path),
        )
    raise MemoryFeatureMissing(
        "sqlite-vec",
        "semantic search loads sqlite-vec into SQLite, and this Python's sqlite3 cannot "
        "load extensions (it was built without them, as pyenv builds are by default)",
        f"{INSTALL_MEMORY} (it brings pysqlite3-binary, whose SQLite can), or use a Python "
        "whose sqlite3 loads extensions",
        path=str(path),
    )


def _has_fts5(module: ModuleType) -> bool:
    db = module.connect(":memory:")
    try:
        db.execute("CREATE VIRTUAL TABLE probe USING fts5(text)")
    except module.Error:
        return False
    finally:
        db.close()
    return True


def _loads_extensions(module: ModuleType) -> bool:
    return hasattr(module.Connection, "enable_load_extension")


# --- opening a file ----------------------------------------------------------------


def open_connection(
    module: ModuleType,
    path: Path,
    *,
    vectors: bool,
    until: float,
    check: Callable[[], None],
    first: bool,
) -> Any:
    """A connection to the memory file ``path`` (created with its folder if missing),
    whose waits for a lock are :data:`~runtime.memory._sqlite.BUSY_SLICE_S` long (its
    caller waits on with :func:`~runtime.memory._sqlite.busy_retry`). The ``first``
    connection of a process checks the file is a memory file, puts it in WAL mode and
    creates its tables, each step retried while another process holds the file (they
    may be creating it at the same moment), until the ``time.monotonic()`` deadline
    ``until``, or until ``check()`` raises.

    Raises:
        MemoryStoreError: when the file cannot be opened or is not a memory file (it is
            left as it was).
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = module.connect(
            str(path), isolation_level=None, check_same_thread=False, timeout=BUSY_SLICE_S
        )
    except (OSError, module.Error) as exc:
        raise MemoryStoreError(_cannot_open(exc, path), path=str(path)) from exc
    try:
        db.create_function(INDEXED, 1, indexed_text, deterministic=True)
        if vectors:
            import sqlite_vec

            db.enable_load_extension(True)
            sqlite_vec.load(db)
            db.enable_load_extension(False)
        busy = module.OperationalError
        retry = partial(busy_retry, errors=busy, until=until, check=check)
        if first:
            version = retry(lambda: _checked(module, db, path))
            if version < SCHEMA_VERSION:
                use_wal(db, errors=busy, until=until, check=check)
                retry(lambda: _create(module, db, path, version))
            elif vectors:
                retry(lambda: _sweep(module, db))
        # It reads the schema first: it waits for a connection that holds the file.
        retry(lambda: db.execute("PRAGMA synchronous=NORMAL"))
        db.execute("PRAGMA secure_delete=ON")  # what is forgotten leaves no freed page
    except module.Error as exc:
        db.close()
        raise MemoryStoreError(_cannot_open(exc, path), path=str(path)) from exc
    except BaseException:
        db.close()
        raise
    return db


def _cannot_open(exc: BaseException, path: Path) -> str:
    """Why the memory file ``path`` cannot be opened, and what to do about it."""
    if isinstance(exc, FileExistsError | NotADirectoryError):  # from making its folder
        above = next((p for p in path.parents if stat.S_ISREG(_mode(p))), path.parent)
        return f"{above} is a file, not a folder: no memory file can be in it ({exc})"
    mode = _mode(path)
    if stat.S_ISDIR(mode):
        return f"this is a folder, not a memory file: name its file ({exc})"
    if mode and not stat.S_ISREG(mode):
        return f"this is not a file (a device, a pipe ...): a memory is kept in a file ({exc})"
    if is_read_only_folder(exc):
        return (
            f"cannot open the memory file: its folder {path.absolute().parent} may only be "
            "read here, and SQLite keeps a memory file's shared memory (its -shm file) "
            "beside it, even to read it: make the folder writable, or copy the file to one "
            f"that is ({exc})"
        )
    return f"cannot open the memory file: {exc}"


def _mode(path: Path) -> int:
    """``path``'s mode (0: it is not there, or this user may not look at it)."""
    try:
        return path.stat().st_mode
    except OSError:
        return 0


def _version(db: Any) -> int | None:
    """The schema version of the memory file ``db`` holds (0: an empty file, to become
    one), or None when it holds something else. Reads only."""
    application = db.execute("PRAGMA application_id").fetchone()[0]
    version: int = db.execute("PRAGMA user_version").fetchone()[0]
    if application == APPLICATION_ID:
        return version
    empty = application == 0 and version == 0
    if empty and db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
        return 0
    return None


_RUN_STORE_ID = 0x48594342
"""The run store's ``application_id`` ("HYCB", :mod:`honeycomb.store.schema`, which
this package may not import)."""


def _application(db: Any) -> int:
    found: int = db.execute("PRAGMA application_id").fetchone()[0]
    return found


def _checked(module: ModuleType, db: Any, path: Path) -> int:
    """The schema version of the file (0: empty), or MemoryStoreError when it is not a
    memory file. Its reads are one transaction (unless the caller's is open): another
    process may make the file between them, and an id read before with the tables read
    after would look like another application's file."""
    try:
        if db.in_transaction:
            version = _version(db)
        else:
            db.execute("BEGIN")
            try:
                version = _version(db)
            finally:
                if db.in_transaction:  # it reads only: ending it either way is the same
                    db.execute("ROLLBACK")
    except module.OperationalError:
        raise  # busy: the caller tries again
    except module.DatabaseError as exc:  # not an SQLite file at all
        version, why = None, str(exc)
    else:
        why = "an SQLite database of another application"
        if version is None and _application(db) == _RUN_STORE_ID:  # a --file mistaken
            why = "it is a Honeycomb run store, which honeycomb runs and sessions read"
    if version is None:
        raise MemoryStoreError(
            f"the file is not a Honeycomb memory file ({why}); it was left as it was: give "
            "the memory a file of its own",
            path=str(path),
        )
    if version > SCHEMA_VERSION:
        raise MemoryStoreError(
            f"the memory file was written by a newer Honeycomb (schema {version}); upgrade "
            "Honeycomb or use another file",
            path=str(path),
        )
    return version


def _create(module: ModuleType, db: Any, path: Path, version: int = 0) -> None:
    """The tables, made (or those of an earlier ``version`` brought to this one) in one
    transaction, unless another process did it first. A file of an earlier version that
    this process may only read is read as it is."""
    try:
        with _transaction(db):
            found = _checked(module, db, path)
            if found < SCHEMA_VERSION:
                for statement in (*UNINDEX, *SCHEMA, REINDEX) if found else SCHEMA:
                    db.execute(statement)
    except module.OperationalError as exc:
        if not (version and is_read_only(exc)):
            raise


@contextmanager
def _transaction(db: Any) -> Iterator[None]:
    """A write transaction, taking the write lock at once (so that a writer waits for
    the others as it begins, instead of failing when it would write after reading)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        # A COMMIT that found the file busy leaves the transaction open: ended here,
        # the caller may try it all again.
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


# --- operations --------------------------------------------------------------------


def insert(db: Any, row: Row, vector: Sequence[float] | None, model: str | None) -> Row:
    """Keep a memory (and its vector, made by ``model``) unless one of its id is kept:
    the stored memory's row either way."""
    with _transaction(db):
        done = db.execute(
            "INSERT OR IGNORE INTO memories (id, namespace, text, kind, run_id, role, worker, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            row,
        )
        if done.rowcount and vector is not None:
            _vector_table(db, len(vector), model or "")
            db.execute(
                "INSERT INTO memory_vectors (rowid, namespace, embedding) VALUES (?, ?, ?)",
                (done.lastrowid, row[1], _packed(vector)),
            )
        found: Row = db.execute(
            f"SELECT {_COLUMNS} FROM memories m WHERE id = ?", (row[0],)
        ).fetchone()
    return found


def get(db: Any, memory_id: str) -> Row | None:
    found: Row | None = db.execute(
        f"SELECT {_COLUMNS} FROM memories m WHERE id = ?", (memory_id,)
    ).fetchone()
    return found


def delete(db: Any, ids: Sequence[str], namespace: str | None, vectors: bool) -> list[str]:
    """Forget the memories of ``ids``, or every memory of ``namespace``, in one
    transaction; the ids of those there were. A forgotten text stays in no file: the
    search index is merged anew (its old segments held the text's terms), freed pages
    are zeroed (``secure_delete``, set as the connection opens), and the write-ahead
    log is moved into the file and emptied, as far as other connections' reads allow:
    once for all of them, however many (each is a rewrite of the index)."""
    wheres: list[tuple[str, tuple[str, ...]]]
    if namespace is not None:
        wheres = [("namespace = ?", (namespace,))]
    else:  # in slices: SQLite takes at most 32,766 values in one statement
        slices = [tuple(ids[at : at + _AT_ONCE]) for at in range(0, len(ids), _AT_ONCE)]
        wheres = [(f"id IN ({', '.join('?' * len(some))})", some) for some in slices]
    found: list[str] = []
    with _transaction(db):
        swept = vectors and _has_vectors(db)
        for where, params in wheres:
            rows = db.execute(f"SELECT id FROM memories WHERE {where}", params)
            found += [memory_id for (memory_id,) in rows]
            if swept:
                seqs = f"SELECT seq FROM memories WHERE {where}"
                db.execute(f"DELETE FROM memory_vectors WHERE rowid IN ({seqs})", params)
            db.execute(f"DELETE FROM memories WHERE {where}", params)
        if found:
            db.execute("INSERT INTO memory_text (memory_text) VALUES ('optimize')")
    if found:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return found


_AT_ONCE = 500
"""Ids one statement of :func:`delete` forgets."""


def listed(db: Any, namespace: str | None, limit: int) -> list[Row]:
    """The newest memories first, of one namespace or of all."""
    if namespace is None:
        rows = db.execute(
            f"SELECT {_COLUMNS} FROM memories m ORDER BY created_at DESC, seq DESC LIMIT ?",
            (limit,),
        )
    else:
        rows = db.execute(
            f"SELECT {_COLUMNS} FROM memories m WHERE namespace = ? "
            "ORDER BY created_at DESC, seq DESC LIMIT ?",
            (namespace, limit),
        )
    return list(rows)


def namespaces(db: Any) -> list[tuple[str, int]]:
    """Each namespace with how many memories it holds."""
    return list(
        db.execute("SELECT namespace, count(*) FROM memories GROUP BY namespace ORDER BY 1")
    )


def text_hits(db: Any, query: str, namespace: str, limit: int) -> list[Row]:
    """The best matches of an FTS5 ``query`` in ``namespace`` by BM25, best first, each
    with its score (higher is better)."""
    return list(
        db.execute(
            f"SELECT {_COLUMNS}, -bm25(memory_text) AS score FROM memory_text "
            "JOIN memories m ON m.seq = memory_text.rowid "
            "WHERE memory_text MATCH ? AND m.namespace = ? ORDER BY score DESC LIMIT ?",
            (query, namespace, limit),
        )
    )


def vector_hits(
    db: Any, vector: Sequence[float], namespace: str, limit: int, model: str
) -> list[Row]:
    """The memories of ``namespace`` nearest ``vector`` by cosine, nearest first, each
    with its similarity.

    Vectors left behind by a forget in another process (made without sqlite-vec, while
    this one had the file open) match no memory: when they take places among the
    nearest, the search looks further, reading only (a search that swept them made a
    later reader of the file fail with 'disk I/O error'); the next memory with
    embeddings to open the file sweeps them."""
    if not _has_vectors(db):
        return []
    _check_vectors(db, len(vector), model)
    packed, k = _packed(vector), limit
    while True:
        nearest = list(
            db.execute(
                f"SELECT {_COLUMNS}, 1.0 - v.distance FROM (SELECT rowid, distance FROM "
                "memory_vectors WHERE embedding MATCH ? AND k = ? AND namespace = ?) v "
                "LEFT JOIN memories m ON m.seq = v.rowid ORDER BY v.distance",
                (packed, k, namespace),
            )
        )
        # No similarity (None) is a vector of zeros, kept before they were refused.
        hits = [row for row in nearest if row[0] is not None and (row[-1] or 0.0) > 0.0]
        exhausted = len(nearest) < k or k >= _MOST_NEAREST or (nearest[-1][-1] or 0.0) <= 0.0
        if len(hits) >= limit or exhausted:
            return hits[:limit]
        k = min(2 * k, _MOST_NEAREST)


_MOST_NEAREST = 4096
"""The most vectors one search of sqlite-vec returns (its ``k`` at most)."""


def _sweep(module: ModuleType, db: Any) -> None:
    """Forget the vectors of memories forgotten without sqlite-vec loaded (which could
    not delete them): they match no memory, but would take the places of real ones
    among a search's nearest. It writes only when there are some, and leaves them in
    a file it may only read (a search looks past them): such a file is still read."""
    if not _has_vectors(db):
        return
    left = "SELECT rowid FROM memory_vectors WHERE rowid NOT IN (SELECT seq FROM memories)"
    if db.execute(f"{left} LIMIT 1").fetchone() is None:
        return
    try:
        with _transaction(db):
            db.execute(f"DELETE FROM memory_vectors WHERE rowid IN ({left})")
    except module.OperationalError as exc:
        if not is_read_only(exc):
            raise


def _has_vectors(db: Any) -> bool:
    found = db.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'memory_vectors'"
    ).fetchone()
    return found is not None


def _vector_table(db: Any, dimensions: int, model: str) -> None:
    """The vector table, made for ``dimensions`` with the first vector kept."""
    if _has_vectors(db):
        _check_vectors(db, dimensions, model)
        return
    db.execute(
        "CREATE VIRTUAL TABLE memory_vectors USING vec0(namespace text partition key, "
        f"embedding float[{int(dimensions)}] distance_metric=cosine)"
    )
    db.executemany(
        "INSERT OR REPLACE INTO settings (name, value) VALUES (?, ?)",
        [("vector_dimensions", str(dimensions)), ("embeddings", model)],
    )


class VectorMismatch(Exception):
    """The vectors of a file were made another way than the ones given now."""


def _check_vectors(db: Any, dimensions: int, model: str) -> None:
    settings = dict(db.execute("SELECT name, value FROM settings"))
    kept = int(settings.get("vector_dimensions", dimensions))
    made_by = settings.get("embeddings", model)
    if made_by == model and kept != dimensions:  # the same name, another model behind it
        raise VectorMismatch(
            f"the memory file's vectors were made by {model!r} with {kept} dimensions, and "
            f"{model!r} now gives vectors of {dimensions}: another model answers by that "
            "name, and vectors of two models do not compare; serve the model that made "
            "them, or use another file"
        )
    if kept != dimensions or made_by != model:
        raise VectorMismatch(
            f"the memory file's vectors were made by {made_by!r} ({kept} dimensions), and "
            f"this memory's embeddings are {model!r} ({dimensions} dimensions): vectors "
            "of two models do not compare; use the same embeddings, or another file"
        )


def _packed(vector: Sequence[float]) -> bytes:
    import sqlite_vec

    packed: bytes = sqlite_vec.serialize_float32(list(vector))
    return packed
