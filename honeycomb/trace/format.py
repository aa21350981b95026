"""How counts and costs read, wherever a run is shown (terminal, page, command line)."""

from __future__ import annotations

__all__ = ["counted", "format_cost"]


def counted(count: int, one: str, many: str | None = None) -> str:
    """``1 tool call``, ``2 tool calls``: a count and its noun, singular or plural."""
    return f"{count} {one if count == 1 else (many or one + 's')}"


def format_cost(dollars: float) -> str:
    """Dollars for people: ``$0.0123``; ``-`` when no price is configured."""
    if not dollars:
        return "-"
    return f"${dollars:.4f}" if dollars < 1 else f"${dollars:,.2f}"
