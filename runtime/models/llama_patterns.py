"""The ``pattern`` of a JSON schema as llama.cpp's grammar takes it.

llama.cpp turns a request's JSON schema (a structured answer, a JSON protocol turn, the
tools of a native one) into a grammar. A string's ``pattern`` it cannot convert
(``\\d``, ``\\w``, ``\\s``, a lookahead, a pattern not anchored by ``^...$``) it takes as
any string, and says so on the process's standard error, from native code, past any
log setting ("WARNING: JSON schema conversion was incomplete: ..."). A library never
prints: what llama.cpp runs in this process is sent the pattern written in the syntax
it converts (``\\d`` as ``[0-9]``), or, where that is not known to be had, no pattern,
as llama.cpp would take it, and the library's log says so. A tool still validates its
arguments against its own schema.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["served_pattern", "served_schema"]

_CLASS_OUTSIDE = {
    "d": "[0-9]",
    "D": "[^0-9]",
    "w": "[a-zA-Z0-9_]",
    "W": "[^a-zA-Z0-9_]",
    "s": "[ \\t\\n\\r]",
    "S": "[^ \\t\\n\\r]",
    "/": "/",
}
"""Escapes llama.cpp does not convert, outside a class, as it converts them."""

_CLASS_INSIDE = {"d": "0-9", "w": "a-zA-Z0-9_", "s": " \\t\\n\\r", "/": "/", ".": "."}
"""Escapes llama.cpp does not convert inside a class (``[\\d.]``), as it does."""

_KEPT_OUTSIDE = frozenset(".-^$\\*?+{}()[]|ntr")
_KEPT_INSIDE = frozenset("-[]\\ntr")
_HEX = {"x": 2, "u": 4}


def served_pattern(pattern: str) -> str | None:
    """``pattern`` as llama.cpp converts it into its grammar, the same strings matched;
    None when it uses what llama.cpp does not convert and has no such form here (an
    anchor inside, a lookaround, a backreference ...)."""
    if len(pattern) < 2 or pattern[0] != "^" or not _ends_anchored(pattern):
        return None
    written = ["^"]
    i, inside = 1, False
    while i < len(pattern) - 1:
        c = pattern[i]
        if c == "\\":
            piece = _escape(pattern, i, inside)
            if piece is None:
                return None
            written.append(piece[0])
            i += piece[1]
            continue
        if inside:
            inside = c != "]" or pattern[i - 1] == "["
        elif c == "[":
            inside = True
            if pattern[i + 1 : i + 3] == "\\^":  # a class that starts with a caret, escaped
                return None
        elif c in "^$" or (pattern.startswith("(?", i) and not pattern.startswith("(?:", i)):
            return None  # an anchor inside; a lookaround, a named group
        written.append(c)
        i += 1
    return None if inside else "".join(written) + "$"


def _ends_anchored(pattern: str) -> bool:
    """Whether the last ``$`` is an anchor, not an escaped dollar."""
    if pattern[-1] != "$":
        return False
    slashes = len(pattern[:-1]) - len(pattern[:-1].rstrip("\\"))
    return slashes % 2 == 0


def _escape(pattern: str, i: int, inside: bool) -> tuple[str, int] | None:
    """The escape at ``i`` as llama.cpp converts it, and its length; None: no such form
    (the pattern ends anchored: an escape is followed by one character at least)."""
    c = pattern[i + 1]
    if c in _HEX:
        size = _HEX[c]
        digits = pattern[i + 2 : i + 2 + size]
        if len(digits) != size or not all(d in "0123456789abcdefABCDEF" for d in digits):
            return None
        return pattern[i : i + 2 + size], 2 + size
    table, kept = (_CLASS_INSIDE, _KEPT_INSIDE) if inside else (_CLASS_OUTSIDE, _KEPT_OUTSIDE)
    if c in kept:
        return pattern[i : i + 2], 2
    if c in table:
        # [\w-z] is \w, '-' and 'z': written out, the '-' would make a range of it.
        ranged = inside and len(table[c]) > 1 and pattern[i + 2] == "-"
        return None if ranged and pattern[i + 3 : i + 4] != "]" else (table[c], 2)
    return None


_VALUES = frozenset({"enum", "const", "default", "examples", "required"})
"""Keys whose values are data, not schemas: a ``pattern`` there is not a keyword."""

_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
"""Keys whose values map names (which may be ``pattern`` or ``enum``) to schemas."""


def served_schema(schema: Any, unserved: Callable[[str], None]) -> Any:
    """``schema`` with each ``pattern`` as :func:`served_pattern` writes it, or left
    out (``unserved`` is told which) where it has no such form; ``schema`` itself when
    nothing changes."""
    if isinstance(schema, list):
        walked = [served_schema(item, unserved) for item in schema]
        return schema if all(a is b for a, b in zip(walked, schema, strict=True)) else walked
    if not isinstance(schema, dict):
        return schema
    changed = False
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _MAPS and isinstance(value, dict):  # names, each of a schema
            out[key] = {name: served_schema(v, unserved) for name, v in value.items()}
            changed = changed or any(out[key][n] is not v for n, v in value.items())
        elif key == "pattern" and isinstance(value, str):
            served = served_pattern(value)
            if served is None:
                unserved(value)
                changed = True
                continue
            changed = changed or served != value
            out[key] = served
        elif key in _VALUES:
            out[key] = value
        else:
            out[key] = served_schema(value, unserved)
            changed = changed or out[key] is not value
    return out if changed else schema
