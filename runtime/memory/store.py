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

import hashlib
import re
from collections.abc import Sequence
from itertools import pairwise
from typing import Literal, Protocol

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

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_COMMON = frozenset(
    re.findall(
        r"\w+",
        """a an and are as at be but by do for from has have how i if in into is it its of
        on or our so than that the their then there these they this to was we were what
        when where which who why will with you your""",
    )
)
MAX_TERMS = 32
"""Words of a query used at most (a whole subtask's text can be a query)."""


_CJK = (
    "[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
    "\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003ffff]"
)
"""A Chinese, Japanese or Korean letter: kana, a Han character, a Hangul syllable.
Those languages write no space between words, and SQLite's word index takes a run of
them for one word: each is indexed as a word of its own (:func:`indexed_text`).
Compiled by re's cache on the first text that is not ASCII, not at import: compiling
its ranges takes 2 ms (benchmark I: import time)."""


def indexed_text(text: str) -> str:
    """``text`` as the word index reads it: each Chinese, Japanese or Korean letter a
    word, so that a search finds a word inside a run of them (``東京`` in
    ``東京の天気``), not only the whole run."""
    return text if text.isascii() else re.sub(_CJK, r" \g<0> ", text)


def fts_query(text: str, *, match: Literal["any", "all"] = "any") -> str | None:
    """An FTS5 query for the words of ``text``: each quoted, so nothing in the text is
    FTS5 syntax; joined by ``OR`` (``any``: ranked by how well they match) or ``AND``.
    Common English words are left out, unless there are no others. A run of Chinese,
    Japanese or Korean letters is its pairs of neighbours, each a phrase (``any``), or
    its letters (``all``: each must be there): it has no spaces to tell its words by.
    None when the text has no words.
    """
    words = list(dict.fromkeys(t for w in _WORD.findall(text) for t in _terms(w.lower(), match)))
    telling = [w for w in words if w not in _COMMON] or words
    if not telling:
        return None
    return f" {'OR' if match == 'any' else 'AND'} ".join(f'"{w}"' for w in telling[:MAX_TERMS])


def _terms(word: str, match: Literal["any", "all"]) -> list[str]:
    """The terms a query searches for ``word``: itself, or, for the runs of Chinese,
    Japanese or Korean letters in it, their pairs of neighbours as phrases (``東 京``,
    ``京 の`` ...; a lone letter alone), or each letter (``all``)."""
    if word.isascii() or re.search(_CJK, word) is None:
        return [word]
    terms: list[str] = []
    for part in re.split(f"({_CJK}+)", word):
        if not part:
            continue
        if re.match(_CJK, part) is None:
            terms.append(part)
        elif match == "all" or len(part) == 1:
            terms += list(part)
        else:
            terms += [f"{a} {b}" for a, b in pairwise(part)]
    return terms
