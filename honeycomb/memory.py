"""Long-term memory: the :class:`Memory` protocol and its SQLite implementation (search
by words, and by meaning with an :class:`Embeddings` model), the records and hits it
returns, and a role's ``memory:`` settings (``docs/memory.md``).

    from honeycomb.memory import MemoryHit, MemoryRecord

``Memory``, ``SQLiteMemory`` and ``RoleMemory`` are in ``honeycomb`` too; the OpenAI
embeddings are in :mod:`honeycomb.models`.
"""

from runtime.memory import Embeddings, Memory, MemoryHit, MemoryRecord, SQLiteMemory
from runtime.memory.tape import SearchTape, TapedMemory
from workers.memory import RoleMemory

__all__ = [
    "Embeddings",
    "Memory",
    "MemoryHit",
    "MemoryRecord",
    "RoleMemory",
    "SQLiteMemory",
    "SearchTape",
    "TapedMemory",
]
