"""JSON as models write it, for the text tool protocol's reader
(:mod:`runtime.models.protocols.actions`): strict JSON, or JSON with single quotes (and Python's
escapes), unquoted keys, Python's ``True``/``False``/``None``, trailing commas and raw
newlines in strings; and where each bracket of a text closes, found in one pass.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from typing import Any

__all__ = ["BracketEnds", "TooDeep", "loads_lenient"]

_WORDS = {"True": "true", "False": "false", "None": "null"}


def loads_lenient(text: str) -> Any:
    """JSON, as strict JSON or as models write it (see the module's docstring).

    Raises:
        ValueError: when the text is not JSON even so, or nests too deeply to read.
    """
    try:
        try:
            return json.loads(text, strict=False)
        except ValueError:
            pass
        return json.loads(_normalised(text), strict=False)
    except RecursionError as exc:  # thousands of brackets: degenerate output, not JSON
        raise TooDeep(f"JSON nested too deeply to read: {exc}") from None


class TooDeep(ValueError):
    """JSON nested past the recursion limit: no action is read inside it."""


def _normalised(text: str) -> str:
    """``text`` with single-quoted strings, unquoted keys, Python's constants and
    trailing commas written as JSON (text inside double quotes is left as it is)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'":
            end = _string_end(text, i)
            if end is None:
                return text  # an open string: not JSON
            out.append(_json_string(text[i:end]))
            i = end
        elif ch == ",":
            j = i + 1
            while j < n and text[j].isspace():
                j += 1
            if j >= n or text[j] not in "}]":
                out.append(ch)
            i += 1
        elif ch.isalpha() or ch == "_":
            j = i
            while j < n and (text[j].isalnum() or text[j] in "_-"):
                j += 1
            word = text[i:j]
            k = j
            while k < n and text[k].isspace():
                k += 1
            is_key = k < n and text[k] == ":"
            out.append(json.dumps(word) if is_key else _WORDS.get(word, word))
            i = j
        else:
            out.append(ch)
            i += 1
    return "".join(out)


# An escape, read from its backslash on (so the backslash of ``\\`` starts none):
# JSON's, or another one (its character captured; empty at the very end).
_ESCAPE = re.compile(r'\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}|(.?))', re.S)


def _json_string(literal: str) -> str:
    """A quoted string (quotes included) as a JSON string: one in double quotes with
    JSON's escapes as it is; else decoded as Python decodes it (``repr`` is where
    single quotes and ``\\x`` escapes come from), else with its double quotes escaped."""
    if literal[0] == '"' and all(m[1] is None for m in _ESCAPE.finditer(literal)):
        return literal
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an escape Python does not know either
            decoded = ast.literal_eval(literal)
    except (SyntaxError, ValueError):
        decoded = None
    if isinstance(decoded, str):
        # Python reads a surrogate pair's escapes as two lone surrogates: pair them.
        paired = decoded.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")
        return json.dumps(paired, ensure_ascii=False)
    return _double_quoted(literal[1:-1]) if literal[0] == "'" else literal


def _double_quoted(body: str) -> str:
    """The body of a single-quoted string as a double-quoted JSON string."""
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append("'" if nxt == "'" else ch + nxt)
            i += 2
            continue
        out.append('\\"' if ch == '"' else ch)
        i += 1
    return '"' + "".join(out) + '"'


def _string_end(text: str, start: int, end: int | None = None) -> int | None:
    """The index after the string that opens at ``start``, or None if it does not
    close (before ``end``)."""
    quote = text[start]
    stop = len(text) if end is None else end
    i = start + 1
    while i < stop:
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == quote:
            return i + 1
        i += 1
    return None


class BracketEnds:
    """Where each bracket of ``text`` closes (strings skipped), found once: one scan
    from a bracket settles every bracket it passes, which a later scan skips over, so
    reading a text of many brackets takes one pass, not one per bracket."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._ends: dict[int, int | None] = {}

    def close(self, start: int, end: int | None = None) -> int | None:
        """The index after the bracket that closes the one at ``start``, or None if it
        does not close before ``end``."""
        if start not in self._ends:
            self._scan(start)
        close = self._ends[start]
        limit = len(self.text) if end is None else end
        return close if close is not None and close <= limit else None

    def _scan(self, start: int) -> None:
        text, ends = self.text, self._ends
        opened: list[int] = []
        i, n = start, len(text)
        while i < n:
            ch = text[i]
            if ch in "\"'":
                string_end = _string_end(text, i)
                if string_end is None:
                    break
                i = string_end
                continue
            if ch in "{[":
                if i in ends:  # settled by an earlier scan, from the same state
                    known = ends[i]
                    if known is None:
                        break  # it never closes, so neither does any bracket around it
                    i = known
                    continue
                opened.append(i)
            elif ch in "}]":
                ends[opened.pop()] = i + 1
                if not opened:
                    return
            i += 1
        for at in opened:
            ends[at] = None
