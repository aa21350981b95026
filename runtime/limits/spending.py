"""Spending that no model-call layer sees: a call made for a worker inside code that
knows no run, as a memory's embeddings calls are.

A memory is anyone's code, shared by the runs of an Executor (its tools by all their
workers), and its embeddings are inside it: nothing of a run reaches them through its
calls. So the worker whose memory calls the current task makes says who pays for them
(:data:`paying`, set for as long as the worker runs: the tasks it starts, its tool
calls, inherit it), and an adapter that spends (the OpenAI embeddings) asks
:func:`payer` for it: the payer may refuse the call before it is made (a run whose
budget is spent), and is told what the call spent once it answered.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

from runtime.messages import Usage

__all__ = ["Payer", "paid_by", "payer", "paying"]


class Payer(Protocol):
    """Who pays for the calls the current task makes outside a model call."""

    def check(self) -> None:
        """Refuse a call before it is made, by raising.

        Raises:
            BudgetExceeded: when the run's budget is spent.
        """

    def spent(self, model: str, usage: Usage, duration_s: float, error: str | None) -> None:
        """An attempt at a call of ``model`` ended after ``duration_s`` seconds, having
        spent ``usage``: answered, or cut off by its timeout (``error`` says so; the
        endpoint had the request, and bills it)."""


paying: ContextVar[Payer | None] = ContextVar("honeycomb_payer", default=None)
"""Who pays for the current task's calls outside a model call (None: nobody counts
them)."""


def payer() -> Payer | None:
    """Who pays for the current task's calls outside a model call, if anyone does."""
    return paying.get()


@contextmanager
def paid_by(who: Payer | None) -> Iterator[None]:
    """The calls made in the block (and in the tasks it starts) are paid by ``who``."""
    token = paying.set(who)
    try:
        yield
    finally:
        paying.reset(token)
