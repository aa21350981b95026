"""Text as it leaves the process: valid UTF-8.

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
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["REPLACEMENT", "encode_json", "model_json", "valid_data", "valid_text"]

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
    from pydantic_core import PydanticSerializationError

    try:
        return model.model_dump_json()
    except PydanticSerializationError as exc:
        if "surrogates not allowed" not in str(exc):
            raise
    return _ENCODER.encode(valid_data(model.model_dump(mode="json"))).decode()
