"""Long-term memory: texts kept across runs and found again by search.

A :class:`Memory` keeps :class:`MemoryRecord`\\ s in namespaces: ``add`` a text,
``get`` or ``delete`` it by id, ``search`` a namespace, ``list`` one or all. A text is
known by its content: the same text added twice to a namespace is one memory (its id
is a hash of both), so adding is idempotent. A text longer than ``max_chars`` is kept
cut, with a marker saying how much was cut. :class:`~runtime.memory.sqlite.SQLiteMemory`
keeps them in one SQLite file.

A query is never passed to FTS5 as it is: its words are quoted, so quotes, ``NEAR``,
``*`` or ``-`` in it are words or nothing, never syntax (:func:`fts_query`).
"""

from __future__ import annotations

import functools
import hashlib
import re
import string
from collections.abc import Sequence
from itertools import pairwise
from typing import Literal, Protocol

from runtime.memory import _unicode
from runtime.text import valid_text
from runtime.value import Value

__all__ = [
    "DEFAULT_NAMESPACE",
    "Embeddings",
    "Memory",
    "MemoryHit",
    "MemoryKind",
    "MemoryRecord",
    "embeddings_priced",
    "fts_query",
    "indexed_text",
    "memory_id",
    "word_characters",
]

DEFAULT_NAMESPACE = "default"
MemoryKind = Literal["note", "result"]
"""A ``note`` was added (the ``remember`` tool, :meth:`Memory.add`); a ``result`` is a
finished worker's answer (a role's ``store_result``)."""


class MemoryRecord(Value, frozen=True, kw_only=True):
    """One memory.

    Attributes:
        id: Its id: a hash of its namespace and text (16 hex digits).
        namespace: The namespace it is kept in.
        text: The text (cut, with a marker, past the memory's ``max_chars``).
        created_at: When it was first kept (seconds since the epoch).
        kind: ``note`` or ``result`` (see :data:`MemoryKind`).
        run_id: The run that kept it, if a run did.
        role: The role of the worker that kept it.
        worker: That worker (its subtask id).
    """

    id: str
    namespace: str
    text: str
    created_at: float
    kind: MemoryKind = "note"
    run_id: str | None = None
    role: str | None = None
    worker: str | None = None


class MemoryHit(Value, frozen=True, kw_only=True):
    """A memory a search found, and how well it matched (higher is better; scores
    compare within one search only)."""

    record: MemoryRecord
    score: float


class Memory(Protocol):
    """Where workers keep what they learn, across runs."""

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
        """Keep ``text`` in ``namespace`` (once: the memory kept already, if any)."""

    async def get(self, memory_id: str) -> MemoryRecord | None:
        """The memory of id ``memory_id``, if there is one."""

    async def search(
        self, query: str, *, namespace: str = DEFAULT_NAMESPACE, k: int = 5
    ) -> tuple[MemoryHit, ...]:
        """The ``k`` memories of ``namespace`` that match ``query`` best, best first."""

    async def delete(self, memory_id: str) -> bool:
        """Forget a memory; whether there was one."""

    async def list(
        self, namespace: str | None = None, *, limit: int = 100
    ) -> tuple[MemoryRecord, ...]:
        """The newest memories first, of ``namespace`` or (None) of every namespace."""


class Embeddings(Protocol):
    """Turns texts into vectors for semantic search."""

    @property
    def name(self) -> str:
        """The model, as a memory file records it: vectors of two models do not
        compare, so a file refuses another's."""

    async def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        """One vector per text, in order."""


def embeddings_priced(memory: object) -> bool:
    """Whether ``memory`` embeds its texts with a model that has a price (the
    ``embeddings`` it holds were given one, as an
    :class:`~runtime.memory.sqlite.SQLiteMemory`'s ``OpenAIEmbeddings(price=...)``):
    a run's budget in dollars then counts what its calls spend."""
    price = getattr(getattr(memory, "embeddings", None), "price", None)
    return callable(getattr(price, "of", None))


def memory_id(namespace: str, text: str) -> str:
    """The id of ``text`` in ``namespace``: the same words, however spaced, are one
    memory (a lone surrogate counts as the U+FFFD a memory keeps in its place)."""
    content = " ".join(text.split())
    return hashlib.sha256(valid_text(f"{namespace}\0{content}").encode()).hexdigest()[:16]


# --- queries -----------------------------------------------------------------------

_COMMON = frozenset(
    re.findall(
        r"\w+",
        """a an and are as at be but by do for from has have how i if in into is it its of
        on or our so than that the their then there these they this to was we were what
        when where which who why will with you your""",
    )
)
MAX_TERMS = 256
"""Terms of a query used at most, its first ones: a whole subtask's text can be a query.
A term is a word, or a pair of neighbouring letters of a script that writes no space
between words (:func:`_terms`): about 256 words of English, or a run of about 257
letters of Thai or Chinese."""


_CJK = (
    "[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
    "\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003ffff]"
)
"""A Chinese, Japanese or Korean letter: kana, a Han character, a Hangul syllable.
Those languages write no space between words, and SQLite's word index takes a run of
them for one word: each is indexed as a word of its own (:func:`indexed_text`).
Compiled by re's cache on the first text that is not ASCII, not at import: compiling
its ranges takes 2 ms (benchmark I: import time)."""

_SEA_LETTERS = (
    *((0x0E01, 0x0E30), (0x0E32, 0x0E33), (0x0E40, 0x0E46)),  # Thai
    *((0x0E81, 0x0EB0), (0x0EB2, 0x0EB3), (0x0EBD, 0x0EC6), (0x0EDC, 0x0EDF)),  # Lao
    *((0x1000, 0x102A), (0x103F, 0x103F), (0x1050, 0x1055), (0x105A, 0x105D)),  # Burmese
    *((0x1061, 0x1061), (0x1065, 0x1066), (0x106E, 0x1070), (0x1075, 0x1081)),
    *((0x108E, 0x108E), (0xA9E0, 0xA9E4), (0xA9E6, 0xA9EF), (0xA9FA, 0xA9FE)),
    *((0xAA60, 0xAA76), (0xAA7A, 0xAA7A), (0xAA7E, 0xAA7F)),
    *((0x1780, 0x17B3), (0x17D7, 0x17D7), (0x17DC, 0x17DC)),  # Khmer
)
_SEA_MARKS = (
    *((0x0E31, 0x0E31), (0x0E34, 0x0E3A), (0x0E47, 0x0E4E)),  # Thai
    *((0x0EB1, 0x0EB1), (0x0EB4, 0x0EBC), (0x0EC8, 0x0ECE)),  # Lao
    *((0x102B, 0x103E), (0x1056, 0x1059), (0x105E, 0x1060), (0x1062, 0x1064)),  # Burmese
    *((0x1067, 0x106D), (0x1071, 0x1074), (0x1082, 0x108D), (0x108F, 0x108F)),
    *((0x109A, 0x109D), (0xA9E5, 0xA9E5), (0xAA7B, 0xAA7D)),
    *((0x17B4, 0x17D3), (0x17DD, 0x17DD)),  # Khmer
)
"""The letters and the marks (vowel signs, tone marks ...) of Thai, Lao, Burmese and
Khmer, which write no space between words either, as ranges of code points."""


def _class(spans: tuple[tuple[int, int], ...]) -> str:
    """A character class of ``spans`` (without its brackets)."""
    return "".join(f"{chr(first)}-{chr(last)}" for first, last in spans)


_ONE_SEA_LETTER = f"[{_class(_SEA_LETTERS)}]"
_SEA_MARK = f"[{_class(_SEA_MARKS)}]"
_LETTER = f"{_CJK}|{_ONE_SEA_LETTER}(?:[\u17d2\u1039]{_ONE_SEA_LETTER}|{_SEA_MARK})*"
"""A letter of a script that writes no space between words, as the word index takes
it: a Chinese, Japanese or Korean letter, or a Thai, Lao, Burmese or Khmer one with its
marks, and a letter a Khmer coeng or a Burmese virama stacks under it (``รุ``,
``မြို့``, ``ភ្នំ``)."""
_MARKED_BLOCKS = (
    (0x0900, 0x0DFF),  # Devanagari, Bengali, Gurmukhi, Gujarati, Oriya, Tamil ... Sinhala
    (0x0F00, 0x0FFF),  # Tibetan
    (0x1700, 0x177F),  # Tagalog, Hanunoo, Buhid, Tagbanwa
    (0x1900, 0x194F),  # Limbu
    (0x1B80, 0x1BBF),  # Sundanese
    (0x1CD0, 0x1CFF),  # Vedic extensions
    (0xA800, 0xA82F),  # Syloti Nagri
    (0xA880, 0xA92F),  # Saurashtra, Devanagari extended, Kayah Li
    (0xAAE0, 0xAAFF),  # Meetei Mayek extensions
    (0xABC0, 0xABFF),  # Meetei Mayek
    (0x11000, 0x11FFF),  # Brahmi, Kaithi, Chakma, Sharada, Grantha, Takri ...
)
"""The blocks of the scripts of India and their kin that put spaces between words and
write a word's vowels and viramas as marks (``दिल्ली``, ``சென்னை``): to SQLite's Unicode
6.1 tables, separators, which cut each word into letters. Their words are spaced: each
is a word whole. Not those written without spaces (Javanese, Balinese, Buginese, Tai
Tham ...), whose runs cut at each mark are searched by the pieces: kept whole, a run
would be one word, and a word inside it found by nothing."""
_IN_MARKED_BLOCK = re.compile(f"[{_class(_MARKED_BLOCKS)}]")
"""A letter of one of :data:`_MARKED_BLOCKS`."""


@functools.cache
def word_characters() -> str:
    """What the word index must keep inside a word, as its tokenizer's ``tokenchars``:
    the marks of Thai, Lao, Burmese and Khmer and their letters (some of which SQLite's
    tables do not know), and those of :data:`_MARKED_BLOCKS` (:data:`_unicode.MARKS`,
    the same under every Python)."""
    spans = (*_SEA_LETTERS, *_SEA_MARKS, *_unicode.spans(_unicode.MARKS))
    return "".join("".join(map(chr, range(first, last + 1))) for first, last in spans)


@functools.cache
def _word() -> str:
    """A word of a query, as the word index cuts words (whichever Python reads it): a
    run of its ``tokenchars`` and of what its tokenizer keeps in words, ASCII letters
    and digits and every character past ASCII but its :data:`_unicode.SEPARATORS`, with
    the accents it takes out of a word (:data:`_unicode.DIACRITICS`) after the first.
    Compiled by re's cache on the first query, as :data:`_CJK` is."""
    kept = f"[{_class(_SEA_LETTERS)}{_class(_SEA_MARKS)}{_unicode.MARKS}]"
    letter = f"{kept}|[^\\x00-/:-@\\[-`{{-\\x7f{_unicode.SEPARATORS}]"
    return f"(?:{letter})(?:{letter}|[{_unicode.DIACRITICS}])*"


_POINTS = (
    "[\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7"  # Hebrew
    "\u0610-\u061a\u0640\u064b-\u065f\u0670\u06d6-\u06dc\u06df-\u06e4\u06e7\u06e8"
    "\u06ea-\u06ed"  # Arabic
    "\u0730-\u074a]"  # Syriac
)
"""The vowel points and cantillation of Hebrew, the short vowels (harakat) of Arabic,
its tatweel and Quranic marks, and the vowels of Syriac: left out of most writing, so a
text that has them and one that has not are the same words. To SQLite's tables,
separators, which cut a pointed word into letters: they are left out of what is
indexed and searched for (as accents are, ``remove_diacritics``)."""


def indexed_text(text: str) -> str:
    """``text`` as the word index reads it: each letter of a script that writes no
    space between words (:data:`_LETTER`) a word, so that a search finds a word inside
    a run of them (``東京`` in ``東京の天気``, ``เชียงใหม่`` in ``ไปเชียงใหม่``), not
    only the whole run; without :data:`_POINTS`."""
    return text if text.isascii() else re.sub(_LETTER, r" \g<0> ", _unpointed(text))


def _unpointed(text: str) -> str:
    """``text`` composed (``é`` one letter, as most text writes it, not ``e`` and an
    accent) and without :data:`_POINTS`."""
    import unicodedata  # not at import: it takes 0.3 ms (benchmark I: import time)

    return re.sub(_POINTS, "", unicodedata.normalize("NFC", text))


def fts_query(text: str, *, match: Literal["any", "all"] = "any") -> str | None:
    """An FTS5 query for the words of ``text``: each quoted, so nothing in the text is
    FTS5 syntax; joined by ``OR`` (``any``: ranked by how well they match) or ``AND``.
    Common English words are left out, unless there are no others. A run of Chinese,
    Japanese, Korean, Thai, Lao, Burmese or Khmer letters is its pairs of neighbours,
    each a phrase (``any``), or its letters (``all``: each must be there): it has no
    spaces to tell its words by. A word of a script of :data:`_MARKED_BLOCKS` is a
    prefix (``சென்னை`` finds ``சென்னையில்``, in Chennai: those languages join endings
    to their words, which no stemmer here takes off). At most :data:`MAX_TERMS` terms,
    the first ones. None when the text has no words.
    """
    found = re.findall(_word(), text if text.isascii() else _unpointed(text))
    # Lower in ASCII only: the index folds the rest by its own (older) tables, which
    # Python's, newer, do not agree with (Cherokee's capitals, lowered by Python, find
    # nothing), and a query's words are folded by the index's tables too.
    lowered = (w.translate(_ASCII_LOWER) for w in found)
    words = list(dict.fromkeys(t for w in lowered for t in _terms(w, match)))
    telling = [w for w in words if w not in _COMMON] or words
    if not telling:
        return None
    joined = f" {'OR' if match == 'any' else 'AND'} "
    return joined.join(_quoted(w) for w in telling[:MAX_TERMS])


_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def _quoted(term: str) -> str:
    """``term`` as the query searches for it: quoted, a prefix if it is of a script of
    :data:`_MARKED_BLOCKS`."""
    marked = not term.isascii() and _IN_MARKED_BLOCK.search(term)
    return f'"{term}" *' if marked else f'"{term}"'


def _terms(word: str, match: Literal["any", "all"]) -> list[str]:
    """The terms a query searches for ``word``: itself, or, for the runs of letters of
    scripts that write no space between words in it (:data:`_LETTER`), their pairs of
    neighbours as phrases (``東 京``, ``京 の`` ...; a lone letter alone), or each letter
    (``all``)."""
    if word.isascii() or re.search(_LETTER, word) is None:
        return [word]
    terms: list[str] = []
    for part in re.split(f"((?:{_LETTER})+)", word):
        letters = re.findall(_LETTER, part)
        if not letters:
            terms += [part] if part else []
        elif match == "all" or len(letters) == 1:
            terms += letters
        else:
            terms += [f"{a} {b}" for a, b in pairwise(letters)]
    return terms
