"""What a whole eval may spend (:class:`EvalBudget`), and when it lets a run start
(:class:`Starts`).

What a run spends is known once it ends, and runs go on at once: a run starts only
while what is left of the budget covers it and the runs under way, each counted at the
most one run has spent so far (its cost, tokens and model calls, its judges' included).
Runs go beside others only while that estimate holds: the first run goes alone, to
learn it, and so does the run after one that spent more than any before it (the first
included), once the runs under way ended. A run waits while the runs under way may
leave room for it, and once none is under way and none would fit, the eval stops
starting runs. So the eval passes its budget by what runs spend past the most one
spent before them: that of one run while the estimate rises, and that of every run
under way when runs that go together spend more than it. A budget found spent is told
with what was spent in the end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

from honeycomb.trace.format import counted
from runtime import ConfigError, Usage
from runtime.value import Value

__all__ = ["EvalBudget", "Starts", "check_priced"]


class EvalBudget(Value, frozen=True, kw_only=True):
    """What a whole eval may spend, its runs and judges together (None: no bound)."""

    cost: float | None = None
    tokens: int | None = None
    model_calls: int | None = None

    @property
    def bounded(self) -> bool:
        """Whether it bounds anything (``EvalBudget()``, the command's with no
        ``--max-*`` option, does not)."""
        return (self.cost, self.tokens, self.model_calls) != (None, None, None)

    def spent_by(self, usage: Usage, judged: Usage | None = None) -> str | None:
        """Why ``usage`` has reached the budget, or None if it has not; ``judged``: what
        of it the judges spent, named beside it (they may have spent the last of it)."""
        judges = judged or Usage()
        if self.cost is not None and usage.cost >= self.cost:
            part = f"${judges.cost:.4f} of it" if judges.cost else None
            return _spent(f"${self.cost:g}", f"${usage.cost:.4f}", part)
        if self.tokens is not None and usage.total_tokens >= self.tokens:
            part = f"{judges.total_tokens} of them" if judges.total_tokens else None
            return _spent(counted(self.tokens, "token"), str(usage.total_tokens), part)
        if self.model_calls is not None and usage.model_calls >= self.model_calls:
            part = f"{judges.model_calls} of them" if judges.model_calls else None
            return _spent(counted(self.model_calls, "model call"), str(usage.model_calls), part)
        return None

    def short_of(self, spent: Usage, runs: int, most: Usage) -> str | None:
        """Why what is left after ``spent`` does not cover ``runs`` more runs, each
        spending ``most`` (the most one run has spent, in each of its counts), or None
        if it does."""
        if self.cost is not None and round(spent.cost + runs * most.cost, 6) > self.cost:
            return _short(f"${self.cost:g}", f"${spent.cost:.4f}", f"${most.cost:.4f}")
        tokens = spent.total_tokens + runs * most.total_tokens
        if self.tokens is not None and tokens > self.tokens:
            return _short(
                counted(self.tokens, "token"),
                str(spent.total_tokens),
                counted(most.total_tokens, "token"),
            )
        calls = spent.model_calls + runs * most.model_calls
        if self.model_calls is not None and calls > self.model_calls:
            return _short(
                counted(self.model_calls, "model call"),
                str(spent.model_calls),
                counted(most.model_calls, "model call"),
            )
        return None


def check_priced(budget: EvalBudget | None, priced: bool) -> None:
    """Refuse a budget in dollars (``cost``) for an eval none of whose models (the
    hive's, the hives it calls as tools', its judges') has a price (not ``priced``):
    every run would cost 0, and the budget would never stop the eval.

    Raises:
        ConfigError: naming the budget and how to price the models.
    """
    if budget is None or budget.cost is None or priced:
        return
    raise ConfigError(
        "an eval's budget in dollars (--max-cost, EvalBudget(cost=...)) counts the models' "
        "prices, and no model of the hive nor of its judges has one: every run would cost "
        "0 and the budget would never stop the eval; give the models their prices (price: "
        "{input_per_mtok: ..., output_per_mtok: ...} in the hive, PricedModel(model, "
        "Price(...)) in Python), or bound the eval by tokens or model calls instead "
        "(--max-tokens, --max-model-calls)",
        field="budget.cost",
    )


def _spent(budget: str, spent: str, judges: str | None) -> str:
    """Why the eval's budget is spent, in words: what was, and the judges' part of it."""
    part = f", {judges} by the judges" if judges is not None else ""
    return f"the eval's budget of {budget} is spent ({spent}{part})"


def _short(budget: str, spent: str, most: str) -> str:
    """Why the eval's budget cannot cover another run, in words."""
    return (
        f"the eval's budget of {budget} cannot cover another run: {spent} spent, and a "
        f"run has spent up to {most}"
    )


class Starts:
    """When the runs of an eval under ``budget`` (None: none) may start, from what
    they spent (:meth:`spent`) and how many are under way (:meth:`running`).

    Attributes:
        used: What the runs that ended (or that an interrupted eval made) spent.
    """

    def __init__(self, budget: EvalBudget | None) -> None:
        # A budget that bounds nothing lets every run start at once, the first too.
        self.budget = budget if budget is not None and budget.bounded else None
        self.used = Usage()
        self.judged = Usage()  # of :attr:`used`, what the runs' judges spent
        self._stopped: str | None = None  # why none may start (what was spent then)
        self._spent = False  # whether that is that the budget is spent
        self._most: Usage | None = None  # the most one run spent, in each count
        self._rose = False  # whether the last run told spent more than any before it
        self._running = 0
        self._ended = asyncio.Event()  # set as a run ends, then made anew
        # Runs start in the order they were asked for: a case taken later (by a worker
        # whose run just ended) never starts before one that waits for room.
        self._turns = asyncio.Lock()

    def spent(self, usage: Usage, judged: Usage | None = None) -> None:
        """A run (its judges included) spent ``usage``, ``judged`` of it by its judges."""
        self.used = self.used + usage
        if judged is not None:
            self.judged = self.judged + judged
        most = self._most or Usage()
        self._most = Usage(
            input_tokens=max(most.input_tokens, usage.input_tokens),
            output_tokens=max(most.output_tokens, usage.output_tokens),
            model_calls=max(most.model_calls, usage.model_calls),
            cost=max(most.cost, usage.cost),
        )
        self._rose = self._most != most

    @property
    def stopped(self) -> str | None:
        """Why no more runs start, once none may: a budget spent is told with what was
        spent in the end (the runs under way as it was found spent went on)."""
        if self._spent and self.budget is not None:
            return self.budget.spent_by(self.used, self.judged)
        return self._stopped

    async def start(self) -> bool:
        """Whether a run may start, once it may (and the runs asked for before it
        started): False when none may any more (then :attr:`stopped` says why)."""
        if self.budget is None:
            return True
        async with self._turns:
            return await self._may_start()

    async def _may_start(self) -> bool:
        while self._stopped is None:
            budget = self.budget
            if budget is None:
                return True
            self._stopped = budget.spent_by(self.used, self.judged)
            if self._stopped is not None:
                self._spent = True
                break
            # Nothing known of what a run spends, or what is known just rose: the
            # estimate may be low, so a run goes alone, once the runs under way ended.
            alone = self._most is None or self._rose
            if not (alone and self._running):
                most = self._most
                short = (
                    None if most is None else budget.short_of(self.used, self._running + 1, most)
                )
                if short is None:
                    return True
                if not self._running:  # nothing under way will leave more room
                    self._stopped = short
                    break
            await self._ended.wait()  # a run under way ends: what it spent is known
        return False

    @contextmanager
    def running(self) -> Iterator[None]:
        """The block is a run under way (counted in what :meth:`start` leaves room for
        until it ends, and what it spent is told)."""
        self._running += 1
        try:
            yield
        finally:
            self._running -= 1
            ended, self._ended = self._ended, asyncio.Event()
            ended.set()
