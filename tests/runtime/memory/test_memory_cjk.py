"""Memories in Chinese, Japanese and Korean, searched by their words (no embeddings):
those languages write no space between words, and the word index took a whole run of
their letters for one word, so that only a query of that exact run found it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from runtime.memory import SQLiteMemory, db
from runtime.memory.store import fts_query
from tests.runtime.memory.test_memory_meets import read_only

TOKYO = "東京の天気は五月に晴れが多い"
BEIJING = "北京的天气很冷"
SEOUL = "서울은 봄에 따뜻합니다"
LISBON = "Lisbon trains leave from Santa Apolonia"


async def _kept(memory: SQLiteMemory) -> None:
    for text in (TOKYO, BEIJING, SEOUL, LISBON):
        await memory.add(text, namespace="trip")


async def _found(memory: SQLiteMemory, query: str, *, match: str = "any") -> list[str]:
    hits = await memory.search(query, namespace="trip", match=match)  # type: ignore[arg-type]
    return [hit.record.text for hit in hits]


@pytest.mark.parametrize(
    ("query", "text"),
    [
        ("東京", TOKYO),
        ("東京の天気", TOKYO),
        ("東京天気", TOKYO),  # the words, not the run as written
        ("天気 五月", TOKYO),
        ("天气", BEIJING),
        ("北京", BEIJING),
        ("서울", SEOUL),  # a word with its particle attached: 서울은
        ("trains to Lisbon", LISBON),
    ],
)
async def test_a_word_inside_a_run_of_chinese_japanese_or_korean_letters_is_found(
    tmp_path: Path, query: str, text: str
) -> None:
    memory = SQLiteMemory(tmp_path / "m.db")
    await _kept(memory)
    assert (await _found(memory, query))[:1] == [text]
    assert await _found(memory, query, match="all") == [text]


async def test_a_forgotten_memory_in_chinese_is_found_no_more(tmp_path: Path) -> None:
    memory = SQLiteMemory(tmp_path / "m.db")
    await _kept(memory)
    [beijing] = [r for r in await memory.list("trip") if r.text == BEIJING]
    assert await memory.forget([beijing.id]) == (beijing.id,)
    assert await _found(memory, "北京天气") == []
    assert await _found(memory, "東京") == [TOKYO]


def test_a_query_of_such_letters_searches_their_pairs_or_each_of_them() -> None:
    assert fts_query("東京の天気 trains") == '"東 京" OR "京 の" OR "の 天" OR "天 気" OR "trains"'
    assert fts_query("東京 trains", match="all") == '"東" AND "京" AND "trains"'
    assert fts_query("天") == '"天"'


_SCHEMA_1 = (
    """CREATE TABLE memories (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL
        UNIQUE, namespace TEXT NOT NULL, text TEXT NOT NULL, kind TEXT NOT NULL, run_id
        TEXT, role TEXT, worker TEXT, created_at REAL NOT NULL)""",
    "CREATE INDEX memories_of_namespace ON memories (namespace, created_at)",
    """CREATE VIRTUAL TABLE memory_text USING fts5(text, content='memories',
        content_rowid='seq', tokenize='porter unicode61 remove_diacritics 2')""",
    """CREATE TRIGGER memory_indexed AFTER INSERT ON memories BEGIN
        INSERT INTO memory_text (rowid, text) VALUES (new.seq, new.text); END""",
    """CREATE TRIGGER memory_unindexed AFTER DELETE ON memories BEGIN
        INSERT INTO memory_text (memory_text, rowid, text) VALUES ('delete', old.seq,
        old.text); END""",
    "CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    f"PRAGMA application_id = {db.APPLICATION_ID}",
    "PRAGMA user_version = 1",
    "PRAGMA journal_mode = WAL",
)
"""A memory file as the Honeycomb of schema 1 made it."""


def _file_of_schema_1(path: Path) -> None:
    raw = sqlite3.connect(path, isolation_level=None)
    for statement in _SCHEMA_1:
        raw.execute(statement)
    for seq, text in enumerate((TOKYO, BEIJING, LISBON), start=1):
        raw.execute(
            "INSERT INTO memories (id, namespace, text, kind, created_at) "
            "VALUES (?, 'trip', ?, 'note', ?)",
            (f"id{seq}", text, float(seq)),
        )
    raw.close()


async def test_a_file_of_schema_1_is_indexed_anew_as_it_is_first_opened(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    _file_of_schema_1(path)
    memory = SQLiteMemory(path)
    assert await _found(memory, "東京") == [TOKYO]
    assert await _found(memory, "trains") == [LISBON]
    assert await memory.forget(["id2"]) == ("id2",)  # its words as they were indexed
    assert await _found(memory, "北京") == []
    await memory.add(SEOUL, namespace="trip")
    assert await _found(memory, "서울") == [SEOUL]
    memory.close()
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == db.SCHEMA_VERSION


async def test_a_file_of_schema_1_that_may_only_be_read_is_read_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m.db"
    _file_of_schema_1(path)
    read_only(monkeypatch)
    memory = SQLiteMemory(path)
    assert [r.text for r in await memory.list("trip")] == [LISBON, BEIJING, TOKYO]
    assert await _found(memory, "trains") == [LISBON]
    memory.close()
