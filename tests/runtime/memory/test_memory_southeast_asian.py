"""Memories in Thai, Lao, Burmese and Khmer, searched by their words: those languages
write no space between words, and SQLite's word index took their vowel signs and tone
marks for spaces, so that a query found only a piece of text between two marks as it
was written (``เชียงใหม่`` did not find ``เชียงใหม่มีอากาศเย็น``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from runtime.memory import SQLiteMemory, db
from runtime.memory.store import MAX_TERMS, fts_query
from tests.runtime.memory.test_memory_cjk import _SCHEMA_1, TOKYO
from tests.support.openai_server import embedding

THAI = "เชียงใหม่มีอากาศเย็นในเดือนธันวาคม"  # Chiang Mai is cool in December
CHICKEN = "ร้านนี้ขายไก่ทอดอร่อย"  # this shop sells good fried chicken
LAO = "ວຽງຈັນເປັນນະຄອນຫຼວງຂອງລາວ"  # Vientiane is the capital of Laos
KHMER = "ភ្នំពេញជារាជធានីនៃប្រទេសកម្ពុជា"  # Phnom Penh is the capital of Cambodia
BURMESE = "ရန်ကုန်မြို့တွင်မိုးများစွာရွာသည်"  # it rains a lot in Yangon
TEXTS = (THAI, CHICKEN, LAO, KHMER, BURMESE, "Lisbon trains leave from Santa Apolonia")


class _Hashed:
    """Embeddings of one's own: a hashed bag of words, as the local server's."""

    name = "hashed"

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [embedding(text) for text in texts]


@pytest.fixture(params=["words", "vectors"])
async def memory(request: pytest.FixtureRequest, tmp_path: Path) -> SQLiteMemory:
    """A memory file holding :data:`TEXTS`, searched by its words alone, or with
    sqlite-vec too (and the SQLite that loads it)."""
    if request.param == "vectors":
        pytest.importorskip("sqlite_vec")
    embeddings = _Hashed() if request.param == "vectors" else None
    memory = SQLiteMemory(tmp_path / "m.db", embeddings=embeddings)
    for text in TEXTS:
        await memory.add(text, namespace="trip")
    return memory


async def _found(memory: SQLiteMemory, query: str, *, match: str = "any") -> list[str]:
    hits = await memory.search(query, namespace="trip", match=match)  # type: ignore[arg-type]
    return [hit.record.text for hit in hits]


@pytest.mark.parametrize(
    ("query", "text"),
    [
        ("เชียงใหม่", THAI),
        ("อากาศ ธันวาคม", THAI),
        ("ไก่ทอด", CHICKEN),
        ("ວຽງຈັນ", LAO),
        ("ນະຄອນຫຼວງ", LAO),
        ("ភ្នំពេញ", KHMER),
        ("កម្ពុជា", KHMER),
        ("ရန်ကုန်", BURMESE),
        ("မိုး", BURMESE),
    ],
    ids=[
        *("thai-chiang-mai", "thai-weather-december", "thai-fried-chicken"),
        *("lao-vientiane", "lao-capital", "khmer-phnom-penh", "khmer-cambodia"),
        *("burmese-yangon", "burmese-rain"),
    ],
)
async def test_a_word_inside_a_run_of_thai_lao_khmer_or_burmese_is_found(
    memory: SQLiteMemory, query: str, text: str
) -> None:
    assert (await _found(memory, query))[:1] == [text]
    if memory.embeddings is None:  # vectors find every memory, nearest first
        assert await _found(memory, query) == [text]
        assert await _found(memory, query, match="all") == [text]


async def test_a_tone_mark_tells_two_words_apart(memory: SQLiteMemory) -> None:
    if memory.embeddings is None:
        assert await _found(memory, "ไกล") == []  # far: not ไก่, chicken
    assert (await _found(memory, "ไก่"))[:1] == [CHICKEN]


async def test_a_forgotten_memory_in_khmer_is_found_no_more(memory: SQLiteMemory) -> None:
    [khmer] = [r for r in await memory.list("trip") if r.text == KHMER]
    assert await memory.forget([khmer.id]) == (khmer.id,)
    assert KHMER not in await _found(memory, "ភ្នំពេញ")
    assert (await _found(memory, "ရန်ကုန်"))[:1] == [BURMESE]


def test_a_query_searches_pairs_of_letters_each_with_its_marks() -> None:
    assert fts_query("ภูเก็ต") == '"ภู เ" OR "เ ก็" OR "ก็ ต"'
    assert fts_query("ភ្នំពេញ", match="all") == '"ភ្នំ" AND "ពេ" AND "ញ"'  # coeng: one letter


@pytest.mark.parametrize(
    ("asked", "word", "text"),
    [
        ("ขอแนะนำร้านกาแฟสำหรับการทำงานพร้อมปลั๊กไฟด้วยครับที่", "เชียงใหม่", THAI),
        (
            "私は来週の旅行の計画を立てていますがまだ決めていないことがたくさんあります",
            "東京",
            TOKYO,
        ),
    ],
    ids=["thai", "japanese"],
)
async def test_a_long_query_without_spaces_is_searched_past_its_first_33_letters(
    memory: SQLiteMemory, asked: str, word: str, text: str
) -> None:
    await memory.add(TOKYO, namespace="trip")
    assert len(asked) > 33  # the first 32 pairs were all a query searched for
    assert (await _found(memory, asked + word))[:1] == [text]


def test_a_query_uses_its_first_max_terms_terms() -> None:
    letters = [chr(c) for c in range(0x4E00, 0x4E00 + MAX_TERMS + 10)]
    terms = (fts_query("".join(letters)) or "").split(" OR ")
    assert len(terms) == MAX_TERMS
    assert terms[-1] == f'"{letters[MAX_TERMS - 1]} {letters[MAX_TERMS]}"'
    words = (fts_query(" ".join(f"w{n}" for n in range(MAX_TERMS + 10))) or "").split(" OR ")
    assert words[0] == '"w0"'
    assert words[-1] == f'"w{MAX_TERMS - 1}"'


@pytest.mark.parametrize("version", [1, 2])
async def test_a_file_of_an_earlier_schema_is_indexed_anew_as_it_is_first_opened(
    tmp_path: Path, version: int
) -> None:
    path = tmp_path / "m.db"
    raw = sqlite3.connect(path, isolation_level=None)
    for statement in _SCHEMA_1:  # 2 indexed these texts as 1 did: letters a word
        raw.execute(statement.replace("user_version = 1", f"user_version = {version}"))
    for seq, text in enumerate((THAI, KHMER), start=1):
        raw.execute(
            "INSERT INTO memories (id, namespace, text, kind, created_at) "
            "VALUES (?, 'trip', ?, 'note', ?)",
            (f"id{seq}", text, float(seq)),
        )
    raw.close()
    memory = SQLiteMemory(path)
    assert await _found(memory, "อากาศ") == [THAI]
    assert await memory.forget(["id2"]) == ("id2",)  # its words as they are indexed now
    assert await _found(memory, "ភ្នំពេញ") == []
    await memory.add(LAO, namespace="trip")
    assert await _found(memory, "ວຽງຈັນ") == [LAO]
    memory.close()
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == db.SCHEMA_VERSION
