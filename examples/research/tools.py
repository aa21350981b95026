"""The tool of the research example: a search over the bundled corpus, a few invented
articles about honeybees under ``corpus/``. Read-only, so one worker's searches, and
every worker's, run in parallel.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from honeycomb import tool

CORPUS = Path(__file__).parent / "corpus"
_STOPWORDS = frozenset(
    {"a", "an", "and", "the", "of", "to", "in", "on", "at", "for", "with", "by", "how"}
    | {"what", "they", "it", "is", "are", "do"}
)


def _terms(text: str) -> set[str]:
    """Lowercase words cut to six letters (so "communicate" finds "communication")."""
    return {w[:6] for w in re.findall(r"[a-z]+", text.lower()) if w not in _STOPWORDS}


@cache
def _articles() -> tuple[tuple[str, str, str], ...]:
    found = []
    for path in sorted(CORPUS.glob("*.md")):
        title, _, body = path.read_text(encoding="utf-8").partition("\n")
        found.append((path.name, title.lstrip("# ").strip(), " ".join(body.split())))
    return tuple(found)


@tool
def search_corpus(query: str, limit: Annotated[int, Field(ge=1, le=5)] = 2) -> list[dict[str, Any]]:
    """Search the research corpus of articles about honeybees; the best matches first,
    each with its title, file and the sentence that matches best.

    Args:
        query: What to look for, such as "how bees communicate".
        limit: How many articles to return, 1 to 5.

    Raises:
        ValueError: when the query has no words to search for.
    """
    terms = _terms(query)
    if not terms:
        raise ValueError(f"the query {query!r} has no words to search for")
    scored: list[dict[str, Any]] = []
    for name, title, body in _articles():
        score = 2 * len(terms & _terms(title)) + len(terms & _terms(body))
        if score:
            sentences = re.split(r"(?<=[.!?])\s+", body)
            best = max(sentences, key=lambda s: len(terms & _terms(s)))
            scored.append({"title": title, "file": name, "snippet": best, "score": score})
    scored.sort(key=lambda item: -int(item["score"]))
    return scored[:limit]
