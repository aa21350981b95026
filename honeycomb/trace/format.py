"""How counts and costs read, wherever a run is shown (terminal, page, command line)."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from typing import Any, Protocol

from runtime.text import valid_text

__all__ = [
    "Spent",
    "argument_lines",
    "cached_share",
    "counted",
    "format_cost",
    "format_duration",
    "format_took",
    "printable",
    "shown_value",
    "token_detail",
]


class Spent(Protocol):
    """Tokens in and out, and of those in, the ones read from the provider's cache."""

    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def cached_input_tokens(self) -> int: ...


def counted(count: int, one: str, many: str | None = None) -> str:
    """``1 tool call``, ``2 tool calls``: a count and its noun, singular or plural."""
    return f"{count} {one if count == 1 else (many or one + 's')}"


def cached_share(spent: Spent) -> str:
    """``62% cached``: the share of the tokens in read from the provider's cache;
    '' when none were (or the endpoint does not say)."""
    if not spent.cached_input_tokens or not spent.input_tokens:
        return ""
    return f"{spent.cached_input_tokens / spent.input_tokens:.0%} cached"


def token_detail(spent: Spent) -> str:
    """``(1200 in, 80 out; 62% of in cached)``."""
    share = cached_share(spent)
    cached = f"; {share.replace(' cached', ' of in cached')}" if share else ""
    return f"({spent.input_tokens} in, {spent.output_tokens} out{cached})"


def format_cost(dollars: float) -> str:
    """Dollars for people: ``$0.0123``; ``-`` when no price is configured."""
    if not dollars:
        return "-"
    return f"${dollars:.4f}" if dollars < 1 else f"${dollars:,.2f}"


def shown_value(value: Any) -> tuple[str, bool]:
    """An argument's value as a person reads it, and whether it is text: a string as
    its own text (its lines as lines, no escapes), any other value as JSON (indented
    when it does not fit on a short line)."""
    if isinstance(value, str):
        return value, True
    text = json.dumps(value, ensure_ascii=False)
    if len(text) > 60 and isinstance(value, (dict, list)):
        text = json.dumps(value, ensure_ascii=False, indent=2)
    return text, False


def argument_lines(
    arguments: Mapping[str, Any], *, limit: int = 600, max_lines: int = 12
) -> list[str]:
    """A call's arguments for a terminal, one ``name: value`` a line; a value of
    several lines goes under its name, indented; a value longer than ``limit``
    characters or ``max_lines`` lines is cut, saying how much was left out. Control
    characters (a terminal's escapes) become spaces, and so does a line break in a
    name: each name is on one line, never one that reads as another argument."""
    lines: list[str] = []
    for name, value in arguments.items():
        text, _ = shown_value(value)
        shown, left = _cut_text(printable(text), limit, max_lines)
        more = [f"… {counted(left, 'more character')}"] if left else []
        parts = shown.split("\n") + more
        name = printable(name, lines=False)
        if len(parts) == 1:
            lines.append(f"{name}: {parts[0]}")
        else:
            lines.append(f"{name}:")
            lines += [f"  {part}".rstrip() for part in parts]
    return lines


def _cut_text(text: str, limit: int, max_lines: int) -> tuple[str, int]:
    """``text`` cut to ``limit`` characters and ``max_lines`` lines, and how many
    characters were left out."""
    kept = text[:limit]
    head = kept.split("\n")
    if len(head) > max_lines:
        kept = "\n".join(head[:max_lines])
    return kept, len(text) - len(kept)


def printable(text: str, *, lines: bool = True) -> str:
    """Text from a run, safe for a terminal: control characters (a terminal's
    escapes) become spaces, line breaks too unless ``lines``, and a lone surrogate
    (which no UTF-8 output can write) U+FFFD."""
    kept = "\n" if lines else ""
    return "".join(
        " " if c not in kept and unicodedata.category(c) in ("Cc", "Cf") else c
        for c in valid_text(text)
    )


def format_duration(seconds: float) -> str:
    """A stretch of time for people: ``0.52s``, ``3m 12s``, ``2h 05m``, ``3d 4h``."""
    if seconds < 60:
        return f"{seconds:.2f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h {minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h"


def format_took(took_s: float | None, wall_s: float | None) -> tuple[str, str]:
    """How long a run took, its first start to its last end (the pauses between its
    lives included: ``4m 34s``), and how long it ran, its wall time, as every view
    of its figures says it (``2.04s``); ``-`` for what is not known (a run under way,
    or cut off)."""
    took = format_duration(took_s) if took_s is not None else "-"
    return took, f"{wall_s:.2f}s" if wall_s is not None else "-"
