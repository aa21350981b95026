"""The token estimate Honeycomb uses where no tokenizer counts, close to what the
pre-tokenizers of current models make of a text: a run of letters takes a token every
four letters, a number one every three digits (and the space before it one), a
punctuation mark most of one, a space before a word nothing, other spaces little; a
Chinese, Japanese or Korean character one, an emoji two, a letter of another script
half of one. Against two current tokenizers it counts English, code, JSON and CSV
within -13% to +65% (mostly +10% to +35%), CJK within -32% to +18%: the figures are
in docs/compaction.md."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["estimated_tokens", "quarter_tokens", "simple_quarter_tokens"]

_WORDS = re.compile(r"[A-Za-z]+")
_NUMBERS = re.compile(r"[0-9]+")
_SPACED_NUMBERS = re.compile(r" [0-9]")  # the space is a token of its own
_SPACES = re.compile(r"\s+")
_MARKS = re.compile(r"[!-/:-@\[-`{-~]")  # ASCII punctuation and symbols
# CJK. Compiled by re's cache on the first text that is not ASCII, not at import:
# compiling its ranges takes 2 ms (benchmark I: import time)
_WIDE = "[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]"
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")  # emoji and other rare characters


def estimated_tokens(texts: Iterable[str]) -> int:
    """The tokens of ``texts`` together, by the estimate, rounded up once."""
    return (sum(quarter_tokens(text) for text in texts) + 3) // 4


def quarter_tokens(text: str) -> int:
    """``text``'s estimated size in quarters of a token (summed over texts, then
    divided by four, it rounds once)."""
    quarters = 4 * sum((len(word) + 3) // 4 for word in _WORDS.findall(text))
    quarters += 4 * sum((len(number) + 2) // 3 for number in _NUMBERS.findall(text))
    quarters += 4 * len(_SPACED_NUMBERS.findall(text))
    quarters += sum(min(len(spaces), 4) for spaces in _SPACES.findall(text) if spaces != " ")
    quarters += 3 * len(_MARKS.findall(text))
    if not text.isascii():
        wide, astral = len(re.findall(_WIDE, text)), len(_ASTRAL.findall(text))
        other = len(text) - len(text.encode("ascii", "ignore")) - wide - astral
        quarters += 4 * wide + 8 * astral + 2 * other
    return quarters


def simple_quarter_tokens(text: str) -> int:
    """The test models' rule, in quarters of a token: an ASCII character a quarter,
    any other a whole token (:func:`runtime.testing.estimate_usage`)."""
    if text.isascii():
        return len(text)
    return len(text) + 3 * (len(text) - len(text.encode("ascii", "ignore")))
