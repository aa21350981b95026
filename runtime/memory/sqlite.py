"""``SQLiteMemory``: memories in one SQLite file (WAL), safe for many workers and several
processes writing at once. Search is FTS5 full-text search ranked by BM25; with
:class:`~runtime.memory.store.Embeddings` (an OpenAI-compatible endpoint:
:class:`~runtime.models.openai.embeddings.OpenAIEmbeddings`) it is hybrid: the BM25
ranking and the nearest vectors (sqlite-vec, the ``memory`` extra) merged by reciprocal
rank fusion. Loaded on first use, with SQLite (:mod:`runtime.memory.db`).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread

from runtime.errors import MemoryStoreError, ModelResponseError
from runtime.memory import db
from runtime.memory._sqlite import FileId, busy_retry, file_id, is_busy, is_read_only
from runtime.memory.db import Row
from runtime.memory.store import (
    DEFAULT_NAMESPACE,
    Embeddings,
    MemoryHit,
    MemoryKind,
    MemoryRecord,
    fts_query,
    memory_id,
)
from runtime.memory.tape import SearchTape, TapedMemory
from runtime.secrets import masked
from runtime.text import valid_text
from runtime.tools.render import cut
from runtime.tools.threads import abandoned_when_cancelled, to_the_end

__all__ = ["SQLiteMemory", "fused"]

T = TypeVar("T")


class SQLiteMemory:
    """Memories in one SQLite file (created, with its folder, on first use).

    Every call runs in a worker thread on a connection of its own, so the event loop
    never waits for the file; writes take the write lock at once and wait for other
    writers (threads or processes) up to ``timeout_s``.

    Args:
        path: The file. Share one SQLiteMemory within a process; any number of
            processes may use the same file.
        embeddings: Makes search hybrid (needs sqlite-vec: the ``memory`` extra).
        max_chars: Characters of a text that are kept.
        timeout_s: How long a call waits for the file while others write it.

    Raises:
        ValueError: for a ``max_chars`` or ``timeout_s`` that is not positive.
        MemoryFeatureMissing: when this Python's SQLite lacks FTS5, or, with
            ``embeddings``, sqlite-vec is not installed or cannot be loaded: as it is
            made, not as each worker's recall fails on it.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        embeddings: Embeddings | None = None,
        max_chars: int = 4000,
        timeout_s: float = 30.0,
    ) -> None:
        if max_chars < 1 or timeout_s <= 0:
            raise ValueError(
                f"max_chars and timeout_s must be positive, got {max_chars} and {timeout_s}"
            )
        self.path = Path(path)
        self.embeddings = embeddings
        self.max_chars = max_chars
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._idle: list[Any] = []  # connections not in use
        # Which SQLite, chosen now: what is missing is said before anything uses it.
        self._driver: ModuleType = db.driver(self.path, vectors=embeddings is not None)
        self._file: FileId | None = None  # the file its connections are to, once checked
        self._adds: dict[str, tuple[anyio.Lock, int]] = {}  # memory id: its lock, its adds

    def __repr__(self) -> str:
        semantic = f", embeddings={self.embeddings.name!r}" if self.embeddings else ""
        return f"SQLiteMemory({str(self.path)!r}{semantic})"

    def with_embeddings(self, embeddings: Embeddings) -> SQLiteMemory:
        """A memory of the same file and settings that embeds with ``embeddings``
        (of the same name and size: the file's vectors are theirs), as a cassette
        records or replays them."""
        return SQLiteMemory(
            self.path, embeddings=embeddings, max_chars=self.max_chars, timeout_s=self.timeout_s
        )

    def with_searches(self, tape: SearchTape) -> TapedMemory:
        """This memory, whose searches are kept on ``tape`` or answered from it, as a
        cassette records or replays them (:mod:`runtime.memory.tape`)."""
        return TapedMemory(self, tape)

    async def __aenter__(self) -> SQLiteMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections not in use (a later call opens new ones)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    # --- the protocol ---------------------------------------------------------------

    async def add(
        self,
        text: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        kind: MemoryKind = "note",
        run_id: str | None = None,
        role: str | None = None,
        worker: str | None = None,
    ) -> MemoryRecord:
        """Keep ``text`` in ``namespace``, cut past ``max_chars``; a text kept already
        is not kept again (nor embedded again): the memory kept is returned. Adds of one
        text at once embed it once: the first embeds it, the others wait for it and find
        it kept.

        A lone surrogate in the text (or in ``run_id``, ``role``, ``worker``) is kept
        as U+FFFD, as the run store keeps it: the file holds valid UTF-8. A secret
        (:mod:`runtime.secrets`) is kept masked, and so embedded.

        Raises:
            ValueError: for an empty text or a bad namespace.
            MemoryStoreError: when the file cannot be written.
            ModelError: when the embeddings endpoint fails.
            BudgetExceeded: when the run paying for its embeddings has spent its budget
                (see :mod:`runtime.limits.spending`; nothing is sent then).
        """
        _check_namespace(namespace)
        if not text.strip():
            raise ValueError("a memory needs some text (it was empty)")
        text = _kept_as(text)
        run_id, role, worker = (
            _kept_as(v) if v is not None else None for v in (run_id, role, worker)
        )
        found_id = memory_id(namespace, text)
        kept = cut(text.strip(), self.max_chars, what="memory", fate="kept")
        row = (found_id, namespace, kept, kind, run_id, role, worker, time.time())
        if self.embeddings is None:
            return _record(await self._write(partial(db.insert, row=row, vector=None, model=None)))
        async with self._adding(found_id):
            known = await self._read(partial(db.get, memory_id=found_id))
            if known is not None:
                return _record(known)
            vector = await _vector_of(self.embeddings, kept)
            insert = partial(db.insert, row=row, vector=vector, model=self.embeddings.name)
            return _record(await self._write(insert))

    async def get(self, memory_id: str) -> MemoryRecord | None:
        found = await self._read(partial(db.get, memory_id=valid_text(memory_id)))
        return _record(found) if found is not None else None

    async def search(
        self,
        query: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        k: int = 5,
        match: Literal["any", "all"] = "any",
    ) -> tuple[MemoryHit, ...]:
        """The ``k`` memories of ``namespace`` that match ``query`` best: by BM25 over
        its words (``any`` of them, or ``all``), merged with the nearest vectors when
        there are embeddings. Any text is a valid query; one without words finds nothing
        by text. A secret in it is masked before it is searched for (or embedded).

        Raises:
            ValueError: for a ``k`` outside 1 to 100, or a bad namespace.
            MemoryStoreError: when the file cannot be read.
            ModelError: when the embeddings endpoint fails.
            BudgetExceeded: as :meth:`add`.
        """
        _check_namespace(namespace)
        if not 1 <= k <= 100:
            raise ValueError(f"k must be between 1 and 100, got {k}")
        query = _kept_as(query)  # as the texts kept are: valid, secrets masked
        wide = k if self.embeddings is None else 4 * k  # candidates for the fusion
        terms = fts_query(query, match=match)
        by_text = (
            await self._read(partial(db.text_hits, query=terms, namespace=namespace, limit=wide))
            if terms
            else []
        )
        if self.embeddings is None or not query.strip():
            return tuple(MemoryHit(record=_record(r), score=r[-1]) for r in by_text[:k])
        vector = await _vector_of(self.embeddings, query[: self.max_chars])
        model = self.embeddings.name
        near = await self._read(
            partial(db.vector_hits, vector=vector, namespace=namespace, limit=wide, model=model)
        )
        return tuple(MemoryHit(record=_record(r), score=s) for r, s in fused([by_text, near], k))

    async def delete(self, memory_id: str) -> bool:
        return bool(await self.forget((memory_id,)))

    async def forget(self, memory_ids: Sequence[str]) -> tuple[str, ...]:
        """Forget the memories of ``memory_ids`` at once (their text leaves the file as
        :meth:`delete` says, its index merged once for all); the ids of those there
        were."""
        if not memory_ids:
            return ()
        ids = tuple(dict.fromkeys(valid_text(i) for i in memory_ids))
        vectors = self.embeddings is not None
        forget = partial(db.delete, ids=ids, namespace=None, vectors=vectors)
        found: list[str] = await self._write(forget)
        return tuple(found)

    async def forget_namespace(self, namespace: str) -> int:
        """Forget every memory of ``namespace``; how many there were."""
        _check_namespace(namespace)
        vectors = self.embeddings is not None
        forget = partial(db.delete, ids=(), namespace=namespace, vectors=vectors)
        return len(await self._write(forget))

    async def list(
        self, namespace: str | None = None, *, limit: int = 100
    ) -> tuple[MemoryRecord, ...]:
        if namespace is not None:
            _check_namespace(namespace)
        rows = await self._read(partial(db.listed, namespace=namespace, limit=limit))
        return tuple(_record(r) for r in rows)

    async def namespaces(self) -> dict[str, int]:
        """Each namespace, with how many memories it holds."""
        return dict(await self._read(db.namespaces))

    @asynccontextmanager
    async def _adding(self, memory_id: str) -> AsyncIterator[None]:
        """Adds of one memory, one at a time: one that waited finds it kept and embeds
        nothing (unless the add before it failed or was cancelled). The memory's lock is
        dropped when no add holds it or waits for it."""
        lock, adds = self._adds.get(memory_id) or (anyio.Lock(), 0)
        self._adds[memory_id] = (lock, adds + 1)
        try:
            async with lock:
                yield
        finally:
            lock, adds = self._adds.pop(memory_id)
            if adds > 1:
                self._adds[memory_id] = (lock, adds - 1)

    # --- threads and connections ----------------------------------------------------

    async def _read(self, work: Callable[[Any], T]) -> T:
        # A read changes nothing: a cancelled one is left to end in its thread, which
        # stops waiting for the file at once.
        result: T = await abandoned_when_cancelled(partial(self._call, work))
        return result

    async def _write(self, work: Callable[[Any], T]) -> T:
        # A write is waited for even when cancelled: whoever cancels it then knows it
        # is committed or not, never under way. One still waiting for the file stops
        # waiting, and is not made.
        result: T = await to_the_end(partial(self._call, work))
        return result

    def _call(self, work: Callable[[Any], T]) -> T:
        """``work(connection)`` in this thread (one of anyio's), waiting for the file
        while others hold it, up to ``timeout_s`` in all, in slices that end as soon as
        the call is cancelled (see :mod:`runtime.memory._sqlite`)."""
        until = time.monotonic() + self.timeout_s
        check = anyio.from_thread.check_cancelled
        connection, file = self._take(until, check)
        module = self._driver
        try:
            return busy_retry(
                lambda: work(connection), errors=module.OperationalError, until=until, check=check
            )
        except db.VectorMismatch as exc:
            raise MemoryStoreError(str(exc), path=str(self.path)) from None
        except module.Error as exc:
            if is_read_only(exc):
                raise MemoryStoreError(
                    "the memory file may only be read here (its permissions, or a read-only "
                    f"disk): it can be listed and searched, not written: {exc}",
                    path=str(self.path),
                ) from exc
            if is_busy(exc):
                raise MemoryStoreError(
                    f"the memory file stayed locked by other writers for {self.timeout_s:g}s "
                    f"(timeout_s): {exc}",
                    path=str(self.path),
                ) from exc
            if f"no such function: {db.INDEXED_NAME}" in str(exc):
                raise MemoryStoreError(
                    "a newer Honeycomb indexed the memory file anew while this process had "
                    "it open: this one would index what it writes otherwise, so it writes "
                    f"no more; restart it with the newer Honeycomb ({exc})",
                    path=str(self.path),
                ) from exc
            raise MemoryStoreError(
                f"cannot use the memory file: {exc}", path=str(self.path)
            ) from exc
        finally:
            self._give(connection, file)

    def _take(self, until: float, check: Callable[[], None]) -> tuple[Any, FileId | None]:
        """An idle connection, or a new one (the first to the file checks or makes it),
        with the file it is to. A file deleted or replaced since its connections were
        opened is the file at the path no more: what they write, nobody reads again, so
        they are closed and the file there now is checked, or made, anew."""
        with self._lock:
            if file_id(self.path) != self._file:
                idle, self._idle, self._file = self._idle, [], None
                for connection in idle:
                    connection.close()
            if self._idle:
                return self._idle.pop(), self._file
            vectors = self.embeddings is not None
            first = self._file is None
            connection = db.open_connection(
                self._driver, self.path, vectors=vectors, until=until, check=check, first=first
            )
            self._file = file_id(self.path)
            return connection, self._file

    def _give(self, connection: Any, file: FileId | None) -> None:
        """Keep ``connection`` (to ``file``) for a later call, unless it is to a file
        that is no more the memory's, or enough are kept."""
        with self._lock:
            if file == self._file and len(self._idle) < _KEPT_IDLE:
                self._idle.append(connection)
                return
        connection.close()


_KEPT_IDLE = 4
"""Idle connections kept open per memory (more are opened while more calls run)."""


def _check_namespace(namespace: str) -> None:
    if not namespace or len(namespace) > 200 or not namespace.isprintable():
        raise ValueError(f"a namespace is 1 to 200 printable characters, got {namespace[:60]!r}")


def _kept_as(text: str) -> str:
    """``text`` as the file keeps it (and an endpoint embeds it): valid UTF-8, with
    every secret masked."""
    return masked(valid_text(text))


def _record(row: Row) -> MemoryRecord:
    """A memory as it is given back: its secrets masked, as they are when it is kept
    (one kept before this process knew a secret, by another process or an earlier
    Honeycomb, is recalled masked all the same)."""
    return masked(
        MemoryRecord(
            id=row[0],
            namespace=row[1],
            text=row[2],
            kind=row[3],
            run_id=row[4],
            role=row[5],
            worker=row[6],
            created_at=row[7],
        )
    )


def fused(rankings: Sequence[Sequence[Row]], k: int) -> list[tuple[Row, float]]:
    """Rankings merged by reciprocal rank fusion: a memory scores ``1 / (60 + rank)`` in
    each ranking it is in, summed. The best ``k``, best first."""
    scores: dict[str, float] = {}
    rows: dict[str, Row] = {}
    for ranking in rankings:
        for rank, row in enumerate(ranking, start=1):
            rows.setdefault(row[0], row)
            scores[row[0]] = scores.get(row[0], 0.0) + 1.0 / (60 + rank)
    best = sorted(scores, key=lambda found: -scores[found])[:k]
    return [(rows[found], scores[found]) for found in best]


async def _vector_of(embeddings: Embeddings, text: str) -> Sequence[float]:
    """The vector of one text.

    Raises:
        ModelResponseError: when the embeddings give other than one vector for it.
    """
    vectors = await embeddings.embed([text])
    if len(vectors) != 1:
        raise ModelResponseError(
            f"the embeddings {embeddings.name!r} gave {len(vectors)} vectors for 1 text"
        )
    wrong = _unusable(vectors[0])
    if wrong is not None:
        raise ModelResponseError(
            f"the embeddings {embeddings.name!r} gave {wrong} for a text: no vector to keep "
            "or search by"
        )
    return vectors[0]


def _unusable(vector: Sequence[float]) -> str | None:
    """What makes ``vector`` no vector to keep or search by (None: nothing): no numbers,
    a value that is not a finite number, or only zeros (its cosine to any other is
    undefined: sqlite-vec gives no distance)."""
    if not vector:
        return "an empty vector"
    odd = next((x for x in vector if not _finite(x)), None)
    if odd is not None:
        return f"a vector holding {odd!r} (not a finite number)"
    return None if any(vector) else "a vector of zeros"


def _finite(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
