"""What the memory's word index and its queries keep in a word is written out once
(runtime.memory._unicode), not read from the running Python's unicodedata, whose tables
change with its version (3.11 has Unicode 14, 3.12 Unicode 15, 3.13 Unicode 15.1): a
query read by Python 3.11 cut a word at a mark it did not know (``\\u0cf3`` of Kannada)
and left out letters it did not know (Kawi's, a Han character of Unicode 15), which the
index, written by any Python, keeps in their words."""

from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Any

from runtime.memory import SQLiteMemory, _unicode, db
from runtime.memory.store import _MARKED_BLOCKS, fts_query

KANNADA = "ಕ\u0cf3ಮಲ"  # a Kannada word with the anusvara above right of Unicode 15
KAWI = "\U00011f12\U00011f34\U00011f13\U00011f42"  # letters and marks of Kawi (Unicode 15)
HAN = "\U00031350"  # a Han character of Unicode 15 (CJK extension H)
CHEROKEE = "ᏣᎳᎩ"  # capitals, which Python lowers (Unicode 8) and the index does not
NOTES = (
    f"{KANNADA} ನೋಡಿ",
    f"{KAWI} \U00011f20\U00011f35",
    f"{HAN}山",
    "a note in English 🤖",
    f"{CHEROKEE} ᎦᏬᏂᎯᏍᏗ",
)


def _points(table: str) -> set[int]:
    return {p for first, last in _unicode.spans(table) for p in range(first, last + 1)}


def _written(points: set[int]) -> str:
    """``points`` as :mod:`runtime.memory._unicode` writes a table, to copy there."""
    spans: list[list[int]] = []
    for point in sorted(points):
        if spans and spans[-1][1] == point - 1:
            spans[-1][1] = point
        else:
            spans.append([point, point])
    return "".join(f"{_escaped(first)}-{_escaped(last)}" for first, last in spans)


def _escaped(point: int) -> str:
    return f"\\u{point:04x}" if point <= 0xFFFF else f"\\U{point:08x}"


def test_the_marks_are_the_running_pythons_where_it_knows_them() -> None:
    marks = {
        point
        for first, last in _MARKED_BLOCKS
        for point in range(first, last + 1)
        if unicodedata.category(chr(point)).startswith("M")
    }
    table = _points(_unicode.MARKS)
    if unicodedata.unidata_version == "15.1.0":  # the table's own version (Python 3.13)
        assert table == marks, _written(marks)
    # Elsewhere they differ only where one of the two does not know the character yet.
    # SQLite's word index, whose tables are Unicode 6.1's, keeps such a character in its
    # word with or without tokenchars: a file a Python of any of them wrote is indexed
    # as the table indexes it, and none needs indexing anew.
    unknown = {p for p in table ^ marks if unicodedata.category(chr(p)) == "Cn" or p in marks}
    assert unknown == table ^ marks
    assert not unknown & _points(_unicode.SEPARATORS)
    assert {0x0CF3, 0x11241, 0x11F00} <= table  # marks Python 3.11 does not know


def _separators(sqlite: Any, points: list[int], diacritics: int = 2) -> set[int]:
    """Those of ``points`` SQLite's word index takes for separators (as the memory's
    does, or keeping accents in words with ``diacritics=0``)."""
    connection = sqlite.connect(":memory:")
    tokenizer = f"unicode61 remove_diacritics {diacritics}"
    connection.execute(f"CREATE VIRTUAL TABLE t USING fts5(text, tokenize='{tokenizer}')")
    connection.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    # "x" and the character: one word of two letters, or "x" alone when it is a separator
    connection.execute("INSERT INTO t (text) VALUES (?)", (" ".join(f"x{chr(p)}" for p in points),))
    words = connection.execute("SELECT offset FROM v WHERE length(term) > 1")
    kept = {points[offset] for (offset,) in words}
    connection.close()
    return set(points) - kept


def test_the_separators_are_sqlites(tmp_path: Path) -> None:
    table = _points(_unicode.SEPARATORS)
    spans = _unicode.spans(_unicode.SEPARATORS)
    # Every character of the first plane, and the edges of each range past it.
    edges = {p for first, last in spans for p in (first - 1, first, last, last + 1)}
    points = sorted(
        {*range(0x80, 0xD800), *range(0xE000, 0x10000), *(p for p in edges if p > 0xFFFF)}
    )
    sqlite = db.driver(tmp_path / "m.db", vectors=False)
    found = _separators(sqlite, points)
    assert found == table & set(points), _written(found ^ (table & set(points)))
    accents = list(range(0x300, 0x370))  # those it takes out of a word, or cuts it at
    taken_out = found & set(accents) - _separators(sqlite, accents, diacritics=0)
    assert taken_out == _points(_unicode.DIACRITICS), _written(taken_out)


async def test_a_word_python_3_11_does_not_know_is_found_by_any_python(tmp_path: Path) -> None:
    assert fts_query(KANNADA) == f'"{KANNADA}" *'  # 3.11 cut it: "ಕ" * OR "ಮಲ" *
    assert fts_query(f"{KAWI} trip", match="all") == f'"{KAWI}" * AND "trip"'
    assert fts_query(f"{HAN}山") == f'"{HAN} 山"'  # 3.11 left out the first
    # SQLite keeps every character its tables do not know in its word, and so does the
    # query now: a robot face (Unicode 8) as much as Kawi.
    assert fts_query("a robot 🤖") == '"robot" OR "🤖"'
    assert fts_query("q\u0301rst \u0301") == '"q\u0301rst"'  # the index's qrst
    memory = SQLiteMemory(tmp_path / "m.db")
    for note in NOTES:
        await memory.add(note)
    assert fts_query(f"{CHEROKEE} Trip") == f'"{CHEROKEE}" OR "trip"'  # (was "ꮳꮃꭹ")
    for query, note in zip((KANNADA, KAWI, f"{HAN}山", "🤖", CHEROKEE), NOTES, strict=True):
        hits = await memory.search(query, match="all")
        assert [hit.record.text for hit in hits] == [note], query
    memory.close()
