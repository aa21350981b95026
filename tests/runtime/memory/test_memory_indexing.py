"""A memory file indexed anew while an earlier Honeycomb has it open (a rolling deploy,
the new CLI beside an older service): the triggers call the indexing by a name of its
version, so the earlier process's writes fail instead of indexing its texts otherwise,
or telling the index, as it forgets one, other words than it holds (which corrupts it).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from runtime import MemoryStoreError, SQLiteMemory
from runtime.memory import db
from runtime.memory.store import indexed_text

CAIRO = "القَاهِرَةِ مدينة كبيرة"  # Cairo is a big city, with its vowels written
DELHI = "दिल्ली भारत की राजधानी है"  # Delhi is the capital of India

_EARLIER = "honeycomb_indexed_text"
"""The name the triggers of schema 6 and before called the indexing by."""


def _file_of_schema_6(path: Path) -> None:
    """A memory file as Honeycomb of schema 6 made it, holding :data:`CAIRO`."""
    raw = sqlite3.connect(path, isolation_level=None)
    raw.create_function(_EARLIER, 1, indexed_text)  # as 6 indexed
    for statement in db.SCHEMA:
        statement = statement.replace(f"user_version = {db.SCHEMA_VERSION}", "user_version = 6")
        raw.execute(statement.replace(db.INDEXED, _EARLIER))
    raw.execute(
        "INSERT INTO memories (id, namespace, text, kind, created_at) "
        "VALUES ('id1', 'n', ?, 'note', 1.0)",
        (CAIRO,),
    )
    raw.close()


async def test_an_earlier_honeycomb_with_the_file_open_cannot_write_through_its_triggers(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m.db"
    _file_of_schema_6(path)
    earlier = sqlite3.connect(path, isolation_level=None)  # opened before the upgrade
    earlier.create_function(_EARLIER, 1, lambda text: text)  # its own, older indexing
    memory = SQLiteMemory(path)
    assert [h.record.text for h in await memory.search("القاهرة", namespace="n")] == [CAIRO]
    for write in (
        "INSERT INTO memories (id, namespace, text, kind, created_at) "
        f"VALUES ('id2', 'n', '{DELHI}', 'note', 2.0)",
        "DELETE FROM memories WHERE id = 'id1'",
    ):
        with pytest.raises(sqlite3.OperationalError, match=f"no such function: {db.INDEXED}"):
            earlier.execute(write)
    earlier.close()
    await memory.add(DELHI, namespace="n")  # this one writes, and both are found
    assert [h.record.text for h in await memory.search("दिल्ली", namespace="n")] == [DELHI]
    assert [h.record.text for h in await memory.search("القاهرة", namespace="n")] == [CAIRO]
    memory.close()


async def test_a_memory_whose_file_a_newer_honeycomb_indexed_anew_says_so(
    tmp_path: Path,
) -> None:
    memory = SQLiteMemory(tmp_path / "m.db")
    await memory.add(CAIRO, namespace="n")
    newer = sqlite3.connect(memory.path, isolation_level=None)
    newer.create_function("honeycomb_indexed_text_99", 1, lambda text: text)
    for statement in (*db.UNINDEX, *db.SCHEMA, db.REINDEX):
        newer.execute(statement.replace(db.INDEXED, "honeycomb_indexed_text_99"))
    newer.close()
    with pytest.raises(MemoryStoreError, match="a newer Honeycomb indexed the memory file anew"):
        await memory.add(DELHI, namespace="n")
    memory.close()
