"""Token counters named by import path in tests (a role's ``compaction.token_counter``)."""

from __future__ import annotations

import math


def one_per_character(text: str) -> int:
    """A tokenizer where every character is a token (as CJK text nearly is)."""
    return len(text)


def cjk(text: str) -> int:
    """One token a character outside ASCII, four ASCII characters a token: about what
    current tokenizers make of Chinese, Japanese or Korean text among English."""
    wide = len(text) - len(text.encode("ascii", "ignore"))
    return wide + math.ceil((len(text) - wide) / 4)


NOT_CALLABLE = 3
