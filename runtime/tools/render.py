"""A tool's result as observation text: any value, bounded in size, never raising.

Strings go as they are, and so do bytes, decoded (bytes that are not UTF-8 are
replaced); other values go as JSON (bytes inside them as JSON strings), and objects
JSON cannot hold by their ``str()`` (else their ``repr()``, else their type).
Iterators (generators, ``map`` ...) and containers are read only as far as could be
shown: a tool returning ``itertools.count()`` must not hang the event loop, nor a
million-item list be serialized to show 20,000 characters.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pydantic_core

__all__ = ["cut", "render"]

_SCALARS = (str, int, float, bool, type(None))

_DEEPEST = 100
"""Containers nested deeper than this are given up for the value's ``str()`` (a cycle,
or a structure no reader follows): well short of Python's recursion limit, near which
whatever else runs meanwhile (a finalizer the garbage collector calls, a signal
handler) would fail for want of stack."""


class _TooDeep(Exception):
    """The value nests deeper than :data:`_DEEPEST`."""


def render(value: Any, limit: int) -> str:
    """``value`` as text of at most ``limit`` characters, plus a marker when cut."""
    if isinstance(value, str):
        return _cut(value, limit, complete=True)
    if value is None:
        return ""
    if isinstance(value, bytes | bytearray):  # text a tool read (a file, a process's output)
        return _cut(value.decode("utf-8", errors="replace"), limit, complete=True)
    budget = _Budget(limit)
    try:
        text = pydantic_core.to_json(budget.bounded(value), fallback=_as_text).decode()
    except (ValueError, _TooDeep):  # PydanticSerializationError is a ValueError
        text = _as_text(value)  # cycles, deep nesting: give up on structure
    return _cut(text, limit, complete=not budget.clipped)


class _Budget:
    """Items left to take; each item shows as at least one character, so past
    ``limit`` items the text would be cut anyway."""

    def __init__(self, limit: int) -> None:
        self.left = limit
        self.clipped = False

    def bounded(self, value: Any, depth: int = 0) -> Any:
        """``value`` with iterators read into lists, and containers cut, within budget.

        Raises:
            _TooDeep: when containers nest deeper than :data:`_DEEPEST`.
        """
        self.left -= 1
        if isinstance(value, _SCALARS):
            return value
        if isinstance(value, bytes | bytearray):
            return bytes(value).decode("utf-8", errors="replace")
        if depth >= _DEEPEST:
            raise _TooDeep
        if isinstance(value, dict):
            return {k: self.bounded(v, depth + 1) for k, v in self._take(iter(value.items()))}
        if isinstance(value, list | tuple | set | frozenset | Iterator):
            return [self.bounded(v, depth + 1) for v in self._take(iter(value))]
        return value

    def _take(self, items: Iterator[Any]) -> Iterator[Any]:
        for item in items:
            if self.left <= 0:
                self.clipped = True
                return
            yield item


def _as_text(value: Any) -> str:
    for show in (str, repr):
        try:
            return show(value)
        except Exception:
            continue
    return f"<{type(value).__name__} object that cannot be shown>"


def cut(text: str, limit: int, *, what: str = "output", fate: str = "shown") -> str:
    """``text`` of at most ``limit`` characters, plus a marker saying how much was cut
    (``[... output cut: 1,200 of 21,200 characters not shown]``)."""
    return _cut(text, limit, complete=True, what=what, fate=fate)


def _cut(
    text: str, limit: int, *, complete: bool, what: str = "output", fate: str = "shown"
) -> str:
    if len(text) <= limit:
        return text
    if complete:
        dropped = len(text) - limit
        marker = f"[... {what} cut: {dropped:,} of {len(text):,} characters not {fate}]"
        return f"{text[:limit]}\n{marker}"
    return f"{text[:limit]}\n[... {what} cut at {limit:,} characters; the rest not {fate}]"
