"""Long-term memory: texts kept across runs and found again by search
(:class:`~runtime.memory.sqlite.SQLiteMemory`), in a SQLite file whose tables and
operations live in :mod:`~runtime.memory.db` (both loaded on first use)."""

from typing import TYPE_CHECKING

from runtime.lazy import lazy_attributes
from runtime.memory.store import (
    DEFAULT_NAMESPACE,
    Embeddings,
    Memory,
    MemoryHit,
    MemoryKind,
    MemoryRecord,
    embeddings_priced,
    fts_query,
    memory_id,
)

if TYPE_CHECKING:
    from runtime.memory.sqlite import SQLiteMemory

__all__ = [
    "DEFAULT_NAMESPACE",
    "Embeddings",
    "Memory",
    "MemoryHit",
    "MemoryKind",
    "MemoryRecord",
    "SQLiteMemory",
    "embeddings_priced",
    "fts_query",
    "memory_id",
]

__getattr__ = lazy_attributes(
    "runtime.memory", {"SQLiteMemory": "runtime.memory.sqlite"}, globals()
)
