"""Long-term memory: texts kept across runs and found again by search
(:class:`~runtime.memory.store.SQLiteMemory`), in a SQLite file whose tables and
operations live in :mod:`~runtime.memory.db` (loaded on first use)."""

from runtime.memory.store import (
    DEFAULT_NAMESPACE,
    Embeddings,
    Memory,
    MemoryHit,
    MemoryKind,
    MemoryRecord,
    SQLiteMemory,
    fts_query,
    memory_id,
)

__all__ = [
    "DEFAULT_NAMESPACE",
    "Embeddings",
    "Memory",
    "MemoryHit",
    "MemoryKind",
    "MemoryRecord",
    "SQLiteMemory",
    "fts_query",
    "memory_id",
]
