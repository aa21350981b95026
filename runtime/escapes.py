"""Text as its escapes decode it, and where each character it decodes to came from:
what the secrets filter (:mod:`runtime.secrets`) searches besides the text itself.

The escapes read are JSON's (``\\uXXXX``, surrogate pairs of them included, ``\\n``,
``\\"``, ``\\/`` ...) and those of Python's string literals (``\\xXX``,
``\\UXXXXXXXX``, octal, ``\\N{name}``), which the text tool protocol's reader takes
too; level under level (JSON held in a JSON string escapes its escapes), up to
:data:`DEPTH` levels.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

import msgspec

__all__ = ["DEPTH", "View", "decoded", "partial_end", "views"]

DEPTH = 4
"""Levels of escaping read: JSON in a JSON string in a JSON string, and one more."""

_ESCAPE = re.compile(
    r"""\\(?:u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|x([0-9a-fA-F]{2})|([0-7]{1,3})"""
    r"""|N\{([A-Za-z0-9 -]{1,88})\}|(["'\\/bfnrtav]))"""
)
_SHORT = {
    '"': '"', "'": "'", "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r",
    "t": "\t", "a": "\a", "v": "\v",
}  # fmt: skip
_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")

# The end of a text that may be the start of an escape the next piece of a stream
# completes (a lone backslash, ``\u00``, ``\N{LATIN``), or the first half of a
# surrogate pair.
_PARTIAL = re.compile(
    r"(?:\\(?:u[0-9a-fA-F]{0,3}|U[0-9a-fA-F]{0,7}|x[0-9a-fA-F]?|[0-7]{1,2}|N(?:\{[^}]{0,88})?)?"
    "|[\ud800-\udbff])\\Z"
)


class View(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """A text as one more level of escapes decodes it.

    Attributes:
        text: The decoded text.
        starts: Where each of its characters starts in the text the first level
            decoded, then that text's length: character ``i`` came from
            ``original[starts[i]:starts[i + 1]]``.
    """

    text: str
    starts: tuple[int, ...]


def _character(escape: re.Match[str]) -> str:
    """What ``escape`` stands for, or its own text when it stands for no character."""
    hexadecimal = escape[1] or escape[2] or escape[3]
    try:
        if hexadecimal:
            return chr(int(hexadecimal, 16))
        if escape[4]:
            return chr(int(escape[4], 8))
        if escape[5]:
            return unicodedata.lookup(escape[5])
    except (ValueError, OverflowError, KeyError):  # past U+10FFFF, or no such name
        return escape[0]
    return _SHORT[escape[6]]


def _paired(pair: re.Match[str]) -> str:
    high, low = pair[0][0], pair[0][1]
    return chr(0x10000 + ((ord(high) - 0xD800) << 10) + (ord(low) - 0xDC00))


def decoded(text: str) -> str:
    """``text`` with one level of escapes decoded (itself when it holds none)."""
    if "\\" not in text:
        return text
    text = _ESCAPE.sub(_character, text)
    return _PAIR.sub(_paired, text) if _PAIR.search(text) else text


def _mapped(view: View) -> View:
    """``view`` with one more level of escapes decoded, as :func:`decoded` does."""
    text, starts = view.text, view.starts
    pieces: list[str] = []
    at: list[int] = []
    done = 0
    for escape in _ESCAPE.finditer(text):
        char = _character(escape)
        pieces += (text[done : escape.start()], char)
        at += starts[done : escape.start()]
        # One character from the whole escape; none: its text stays as it was.
        at += (starts[escape.start()],) if len(char) == 1 else starts[escape.start() : escape.end()]
        done = escape.end()
    pieces.append(text[done:])
    at += starts[done:]  # the end too
    joined = "".join(pieces)
    if not _PAIR.search(joined):
        return View(text=joined, starts=tuple(at))
    paired: list[str] = []
    paired_at: list[int] = []
    done = 0
    for pair in _PAIR.finditer(joined):  # each pair one character, as decoded() makes it
        paired += [joined[done : pair.start()], _paired(pair)]
        paired_at += at[done : pair.start() + 1]
        done = pair.end()
    paired.append(joined[done:])
    paired_at += at[done:]
    return View(text="".join(paired), starts=tuple(paired_at))


def views(text: str) -> Iterator[View]:
    """``text`` itself, then as each level of escapes decodes it, while a level decodes
    one (up to :data:`DEPTH` levels)."""
    view = View(text=text, starts=tuple(range(len(text) + 1)))
    yield view
    for _ in range(DEPTH):
        if "\\" not in view.text:
            return
        deeper = _mapped(view)
        if deeper.text == view.text:
            return
        yield deeper
        view = deeper


def partial_end(text: str) -> int | None:
    """Where the end of ``text`` that may be the start of an escape (or of a surrogate
    pair) begins, or None."""
    found = _PARTIAL.search(text)
    return found.start() if found else None
