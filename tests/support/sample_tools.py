"""Tools for tests: importable by path (``tests.support.sample_tools:add``) for the
registry's tests, and ``lookup``, the one many workers of the tests are given."""

from __future__ import annotations

import anyio

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


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    await anyio.lowlevel.checkpoint()
    return f"value-of-{key}"
