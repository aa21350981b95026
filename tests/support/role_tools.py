"""Tools and schemas importable by path, for role and hive tests."""

from __future__ import annotations

from pydantic import BaseModel

from runtime import tool


@tool
def word_count(text: str) -> int:
    """Count the words in a text.

    Args:
        text: The text to count.
    """
    return len(text.split())


def shout(text: str) -> str:
    """A plain function: import paths may name undecorated functions too."""
    return text.upper()


class Summary(BaseModel):
    title: str
    points: list[str]


NOT_A_MODEL = 42
