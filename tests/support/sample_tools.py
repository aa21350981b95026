"""Tools importable by path (``tests.support.sample_tools:add``) for registry tests."""

from __future__ import annotations

from runtime.tools import tool


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


def shout(text: str) -> str:
    """Upper-case some text (a plain function, not yet a tool)."""
    return text.upper()


NOT_A_FUNCTION = 42
