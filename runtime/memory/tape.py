"""A memory whose searches are kept on a tape, or answered from one: a run recorded in
a cassette keeps what each of its memory's searches found, and its replay recalls
that, whatever the memory holds by then (another run kept or forgot memories since,
or workers that ran at once kept and searched in another order).

:class:`TapedMemory` wraps a memory (``SQLiteMemory.with_searches``, an eval's
memory's); the tape is the cassette's side
(:mod:`runtime.models.layers.cassette_embeddings`), which keeps and finds searches as
JSON values.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import msgspec

from runtime.errors import CassetteMismatch
from runtime.memory.store import (
    DEFAULT_NAMESPACE,
    Embeddings,
    Memory,
    MemoryHit,
    MemoryKind,
    MemoryRecord,
)

__all__ = ["RecordedSearch", "SearchTape", "TapedMemory"]

RecordedSearch = tuple[Sequence[Any], Exception | None]
"""A search as a tape gives it back: its hits as JSON values, or the error it failed
with (made again)."""


class SearchTape(Protocol):
    """Where a memory's searches are kept (recording), or found (replaying)."""

    def recorded(self, namespace: str, query: str, k: int) -> RecordedSearch | None:
        """The recorded search of ``namespace`` for ``query``; None: none is (the
        memory is searched)."""

    def searched(
        self, namespace: str, query: str, k: int, hits: Sequence[MemoryHit], error: Exception | None
    ) -> None:
        """Keep a search the memory made: what it found, or what it failed with."""


class TapedMemory:
    """``inner``, whose searches are kept on ``tape`` as they are made, or, when the
    tape recorded them, answered from it: the hits (or the error) recorded. A search
    answered so still searches ``inner`` when it embeds its queries, so that its
    embeddings calls are answered and paid as recorded; what that search finds is
    not used. Everything else is ``inner``'s.
    """

    def __init__(self, inner: Memory, tape: SearchTape) -> None:
        self.inner, self.tape = inner, tape

    def __repr__(self) -> str:
        return f"TapedMemory({self.inner!r})"

    @property
    def embeddings(self) -> Embeddings | None:
        """The inner memory's embeddings (which a budget counts)."""
        embeddings: Embeddings | None = getattr(self.inner, "embeddings", None)
        return embeddings

    @property
    def path(self) -> Path | None:
        """The inner memory's file, if it keeps one (an Executor refuses a memory whose
        file is its run store's, recorded or not)."""
        path: Path | None = getattr(self.inner, "path", None)
        return path

    def close(self) -> None:
        """Close the inner memory, if it closes."""
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()

    async def search(
        self, query: str, *, namespace: str = DEFAULT_NAMESPACE, k: int = 5
    ) -> tuple[MemoryHit, ...]:
        """What the tape recorded for this search, else what ``inner`` finds (kept).

        Raises:
            Exception: what the recorded search failed with, made again; what
                ``inner``'s fails with.
        """
        recorded = self.tape.recorded(namespace, query, k)
        if recorded is None:
            return await self._searched(query, namespace, k)
        hits, error = recorded
        if self.embeddings is not None:
            await self._spent_again(query, namespace, k)
        if error is not None:
            raise error
        return msgspec.convert(hits, type=tuple[MemoryHit, ...])

    async def _searched(self, query: str, namespace: str, k: int) -> tuple[MemoryHit, ...]:
        try:
            hits = await self.inner.search(query, namespace=namespace, k=k)
        except CassetteMismatch:
            raise  # a replay's embeddings asked what was not recorded: no search to keep
        except Exception as exc:  # any memory's failure: kept, to fail alike replayed
            self.tape.searched(namespace, query, k, (), exc)
            raise
        self.tape.searched(namespace, query, k, hits, None)
        return hits

    async def _spent_again(self, query: str, namespace: str, k: int) -> None:
        """Search ``inner`` for what its embeddings calls spend, answered from the
        cassette as recorded; its hits and failures are not this search's."""
        try:
            await self.inner.search(query, namespace=namespace, k=k)
        except CassetteMismatch:
            raise
        except Exception:  # the recorded search's outcome stands, whatever this one's
            return

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
        return await self.inner.add(
            text, namespace=namespace, kind=kind, run_id=run_id, role=role, worker=worker
        )

    async def get(self, memory_id: str) -> MemoryRecord | None:
        return await self.inner.get(memory_id)

    async def delete(self, memory_id: str) -> bool:
        return await self.inner.delete(memory_id)

    async def list(
        self, namespace: str | None = None, *, limit: int = 100
    ) -> tuple[MemoryRecord, ...]:
        return await self.inner.list(namespace, limit=limit)
