"""Text as it leaves the process: valid UTF-8. And text as its escapes decode it.

A Python string may hold lone surrogates (U+D800 to U+DFFF): Python makes them of
bytes that are not UTF-8 in argv, the environment and file names ("surrogateescape"),
and JSON's ``"\\udcff"`` escape decodes to one. No UTF-8 encoder takes them, so the
run store, JSON and a model endpoint would each fail on them. Where text leaves (the
store, JSON, the wire), each is replaced by U+FFFD, the replacement character, as a
UTF-8 decoder replaces a byte it cannot read: the rest of the text is kept as it is,
and what is written can be read back by any reader. (Writing the surrogates through
with "surrogatepass" would put bytes that are not UTF-8 into the file, which SQLite
stores but no UTF-8 reader, Python's ``sqlite3`` included, reads back.)

Text that is valid costs one check (``isascii``, else an encode), and is never copied.

What a text's escapes decode to, and where each character it decodes to came from, is
what the secrets filter (:mod:`runtime.secrets`) searches besides the text itself. The
escapes read are JSON's (``\\uXXXX``, surrogate pairs of them included, ``\\n``,
``\\"``, ``\\/`` ...) and those of Python's string literals (``\\xXX``,
``\\UXXXXXXXX``, octal, ``\\N{name}``), which the text tool protocol's reader takes
too; level under level (JSON held in a JSON string escapes its escapes), up to
:data:`ESCAPE_DEPTH` levels.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import msgspec
from pydantic_core import PydanticSerializationError

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = [
    "ESCAPE_DEPTH",
    "REPLACEMENT",
    "Unescaped",
    "encode_json",
    "model_json",
    "open_escape",
    "unescaped",
    "unescaped_views",
    "valid_data",
    "valid_text",
]

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")
_ENCODER = msgspec.json.Encoder()


def valid_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (``text`` itself when it
    has none)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(REPLACEMENT, text)
    return text


def valid_data(value: Any) -> Any:
    """``value`` (strings, and dicts, lists and tuples of them) with every string made
    valid by :func:`valid_text`, keys included."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {valid_data(k): valid_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(valid_data(v) for v in value)
    return value


def encode_json(value: Any) -> bytes:
    """``value`` (a value, or builtins) as msgspec encodes it to JSON, its lone
    surrogates replaced."""
    try:
        return _ENCODER.encode(value)
    except UnicodeEncodeError:  # rare: the slow way, through builtins
        return _ENCODER.encode(valid_data(msgspec.to_builtins(value)))


def model_json(model: BaseModel) -> str:
    """A pydantic model's JSON (``model_dump_json``), its lone surrogates replaced."""
    try:
        return model.model_dump_json()
    except PydanticSerializationError as exc:
        if "surrogates not allowed" not in str(exc):
            raise
    return _ENCODER.encode(valid_data(model.model_dump(mode="json"))).decode()


# --- escapes ---------------------------------------------------------------------------

ESCAPE_DEPTH = 4
"""Levels of escaping read: JSON in a JSON string in a JSON string, and one more."""

_ESCAPE = re.compile(
    r"""\\(?:u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|x([0-9a-fA-F]{2})|([0-7]{1,3})"""
    r"""|N\{([A-Za-z0-9 -]{1,88})\}|(["'\\/bfnrtav]))"""
)
_SHORT = {
    '"': '"',
    "'": "'",
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "a": "\a",
    "v": "\v",
}
_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")

# The end of a text that may be the start of an escape the next piece of a stream
# completes (a lone backslash, ``\u00``, ``\N{LATIN``), or the first half of a
# surrogate pair.
_PARTIAL = re.compile(
    r"(?:\\(?:u[0-9a-fA-F]{0,3}|U[0-9a-fA-F]{0,7}|x[0-9a-fA-F]?|[0-7]{1,2}|N(?:\{[^}]{0,88})?)?"
    "|[\ud800-\udbff])\\Z"
)


class Unescaped(msgspec.Struct, frozen=True, kw_only=True):
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
            # Python's own decoder of \N{...}, as a literal reads it (no named sequences);
            # it loads the table of names when it meets a name, where importing
            # unicodedata would load it in every process: 0.3 MB of benchmark E's figure.
            return escape[0].encode().decode("unicode_escape")
    except (ValueError, OverflowError):  # past U+10FFFF, or no such name
        return escape[0]
    return _SHORT[escape[6]]


def _paired(pair: re.Match[str]) -> str:
    high, low = pair[0][0], pair[0][1]
    return chr(0x10000 + ((ord(high) - 0xD800) << 10) + (ord(low) - 0xDC00))


def unescaped(text: str) -> str:
    """``text`` with one level of escapes decoded (itself when it holds none)."""
    if "\\" not in text:
        return text
    text = _ESCAPE.sub(_character, text)
    return _PAIR.sub(_paired, text) if _PAIR.search(text) else text


def _mapped(view: Unescaped) -> Unescaped:
    """``view`` with one more level of escapes decoded, as :func:`unescaped` does."""
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
        return Unescaped(text=joined, starts=tuple(at))
    paired: list[str] = []
    paired_at: list[int] = []
    done = 0
    for pair in _PAIR.finditer(joined):  # each pair one character, as unescaped() makes it
        paired += [joined[done : pair.start()], _paired(pair)]
        paired_at += at[done : pair.start() + 1]
        done = pair.end()
    paired.append(joined[done:])
    paired_at += at[done:]
    return Unescaped(text="".join(paired), starts=tuple(paired_at))


def unescaped_views(text: str) -> Iterator[Unescaped]:
    """``text`` itself, then as each level of escapes decodes it, while a level decodes
    one (up to :data:`ESCAPE_DEPTH` levels)."""
    view = Unescaped(text=text, starts=tuple(range(len(text) + 1)))
    yield view
    for _ in range(ESCAPE_DEPTH):
        if "\\" not in view.text:
            return
        deeper = _mapped(view)
        if deeper.text == view.text:
            return
        yield deeper
        view = deeper


def open_escape(text: str) -> int | None:
    """Where the end of ``text`` that may be the start of an escape (or of a surrogate
    pair) begins, or None."""
    found = _PARTIAL.search(text)
    return found.start() if found else None
