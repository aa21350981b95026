"""Memories in Hindi, Tamil, Bengali and the other scripts of India and their kin,
and in Arabic and Hebrew written with their vowels, searched by their words:
SQLiteMemory's word index took their vowel signs, viramas and vowel points for spaces,
so that ``दिल्ली`` (Delhi) was searched for as its letters ``द`` and ``ल``, and found any
memory that held them, and ``القاهرة`` (Cairo) did not find ``القَاهِرَةِ``, the same
word with its vowels written."""

from __future__ import annotations

import sqlite3
import unicodedata
from pathlib import Path

import pytest

from runtime.memory import SQLiteMemory, db
from runtime.memory.store import fts_query
from tests.runtime.memory.test_memory_cjk import _SCHEMA_1

DELHI = "दिल्ली में आज बारिश होगी"  # it will rain in Delhi today
MUMBAI = "मुंबई में धूप है"  # it is sunny in Mumbai
RED_DOOR = "लाल दरवाज़ा बंद है"  # the red door is closed: the letters of दिल्ली, not it
CHENNAI = "சென்னையில் இன்று மழை பெய்யும்"  # it will rain in Chennai today
MADURAI = "மதுரையில் வெயில்"  # sunshine in Madurai
SMALL_BOY = "சின்ன பையன்"  # a small boy: the letters of சென்னை, not it
KOLKATA = "কলকাতায় আজ বৃষ্টি হবে"  # it will rain in Kolkata today
DHAKA = "ঢাকায় রোদ"  # sun in Dhaka
HOME = "তিনি বাড়ি গেছেন"  # he went home: a letter of কলকাতা, cut as it was
TEXTS = (DELHI, MUMBAI, RED_DOOR, CHENNAI, MADURAI, SMALL_BOY, KOLKATA, DHAKA, HOME)


async def _found(memory: SQLiteMemory, query: str, *, match: str = "any") -> list[str]:
    hits = await memory.search(query, namespace="trip", match=match)  # type: ignore[arg-type]
    return [hit.record.text for hit in hits]


@pytest.mark.parametrize(
    ("query", "text"),
    [
        ("दिल्ली", DELHI),
        ("दिल्ली का मौसम", DELHI),  # Delhi's weather
        ("சென்னையில்", CHENNAI),
        ("சென்னை", CHENNAI),  # Chennai: a prefix of "in Chennai"
        ("কলকাতা", KOLKATA),
    ],
    ids=["hindi-delhi", "hindi-delhi-weather", "tamil-in-chennai", "tamil-chennai", "bengali"],
)
async def test_a_word_with_vowel_signs_is_searched_whole(
    tmp_path: Path, query: str, text: str
) -> None:
    memory = SQLiteMemory(tmp_path / "m.db")
    for kept in TEXTS:
        await memory.add(kept, namespace="trip")
    assert await _found(memory, query) == [text]


def test_a_query_keeps_vowel_signs_and_viramas_in_its_words() -> None:
    assert fts_query("दिल्ली।") == '"दिल्ली" *'  # the danda ends the sentence, not the word
    assert fts_query("சென்னை வானிலை", match="all") == '"சென்னை" * AND "வானிலை" *'


CAIRO = "سَيَنْزِلُ المَطَرُ فِي القَاهِرَةِ"  # rain will fall in Cairo, its vowels written
RIYADH = "الشمس مشرقة في الرياض"  # the sun shines in Riyadh
GENESIS = "בְּרֵאשִׁית בָּרָא אֱלֹהִים"  # in the beginning God created, pointed
ZURICH = unicodedata.normalize("NFD", "Le résumé de la réunion à Zürich")  # as macOS writes


@pytest.mark.parametrize(
    ("query", "text"),
    [
        ("القاهرة", CAIRO),
        ("القَاهِرَةِ", CAIRO),
        ("الرِّيَاض", RIYADH),
        ("בראשית", GENESIS),
        (unicodedata.normalize("NFD", "réunion"), ZURICH),
    ],
    ids=["arabic", "arabic-pointed", "arabic-pointed-query", "hebrew", "decomposed"],
)
async def test_a_word_is_found_with_or_without_its_vowel_points(
    tmp_path: Path, query: str, text: str
) -> None:
    memory = SQLiteMemory(tmp_path / "m.db")
    for kept in (CAIRO, RIYADH, GENESIS, ZURICH, DELHI):
        await memory.add(kept, namespace="trip")
    assert await _found(memory, query) == [text]


@pytest.mark.parametrize("version", [1, 3, 4])
async def test_a_file_that_cut_their_words_into_letters_is_indexed_anew(
    tmp_path: Path, version: int
) -> None:
    path = tmp_path / "m.db"
    raw = sqlite3.connect(path, isolation_level=None)
    for statement in _SCHEMA_1:  # 3 cut the first two, 4 the third, as 1 did
        raw.execute(statement.replace("user_version = 1", f"user_version = {version}"))
    for seq, text in enumerate((DELHI, RED_DOOR, CAIRO), start=1):
        raw.execute(
            "INSERT INTO memories (id, namespace, text, kind, created_at) "
            "VALUES (?, 'trip', ?, 'note', ?)",
            (f"id{seq}", text, float(seq)),
        )
    raw.close()
    memory = SQLiteMemory(path)
    assert await _found(memory, "दिल्ली") == [DELHI]
    assert await _found(memory, "القاهرة") == [CAIRO]
    memory.close()
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == db.SCHEMA_VERSION


JAKARTA_RAIN = "ꦗꦏꦂꦠꦲꦸꦢꦤ꧀"  # Jakarta (ꦗꦏꦂꦠ), rain (ꦲꦸꦢꦤ꧀), in Javanese, unspaced
BALI_RAIN = "ᬩᬮᬶᬳᬸᬚᬦ᭄"  # Bali (ᬩᬮᬶ), rain (ᬳᬸᬚᬦ᭄), in Balinese, unspaced


@pytest.mark.parametrize(
    ("query", "text"), [("ꦲꦸꦢꦤ꧀", JAKARTA_RAIN), ("ᬳᬸᬚᬦ᭄", BALI_RAIN)], ids=["javanese", "balinese"]
)
async def test_a_word_inside_a_run_of_javanese_or_balinese_is_found(
    tmp_path: Path, query: str, text: str
) -> None:
    # Their marks kept in words (schema 5) made each unspaced run one word, in which no
    # word was found but its first, by a prefix.
    memory = SQLiteMemory(tmp_path / "m.db")
    for kept in (JAKARTA_RAIN, BALI_RAIN, DELHI):
        await memory.add(kept, namespace="trip")
    assert await _found(memory, query) == [text]


async def test_a_file_that_kept_javanese_runs_whole_is_indexed_anew(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    raw = sqlite3.connect(path, isolation_level=None)
    marks = "".join(c for c in map(chr, range(0xA980, 0xA9E0)) if unicodedata.category(c)[0] == "M")
    for statement in _SCHEMA_1:  # the word index of schema 5, as Javanese met it
        statement = statement.replace("user_version = 1", "user_version = 5")
        kept_whole = f"tokenize=\"porter unicode61 remove_diacritics 2 tokenchars '{marks}'\""
        raw.execute(
            statement.replace("tokenize='porter unicode61 remove_diacritics 2'", kept_whole)
        )
    raw.execute(
        "INSERT INTO memories (id, namespace, text, kind, created_at) "
        "VALUES ('id1', 'trip', ?, 'note', 1.0)",
        (JAKARTA_RAIN,),
    )
    raw.close()
    assert await _found(SQLiteMemory(path), "ꦲꦸꦢꦤ꧀") == [JAKARTA_RAIN]
