"""How counts and costs read, wherever a run is shown (terminal, page, command line)."""

from __future__ import annotations

from typing import Protocol

__all__ = ["Spent", "cached_share", "counted", "format_cost", "token_detail"]


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
