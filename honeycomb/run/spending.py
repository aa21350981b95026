"""What one life of a stored run spends, kept in its row of the store's ``lives`` table
as the run's budget spends it (see :mod:`honeycomb.run.record`).

The row holds what the whole run has spent so far, every earlier life included (the
budget of a resumed run starts from them): the planner's, aggregator's, judges' and
summaries' spending as much as the workers'. It is written once for all the spending
of one turn of the event loop, and at the latest before any write the run waits for
(:meth:`LifeSpending.flush`), so a crash after such a write cannot lose it.
"""

from __future__ import annotations

import asyncio
import time

from honeycomb.store import RunStore
from honeycomb.store.store import Lease, Statement
from runtime import Budget

__all__ = ["LifeSpending"]

_COUNTERS = (
    "model_calls",
    "input_tokens",
    "output_tokens",
    "tool_calls",
    "cost",
    "reasoning_tokens",
    "cached_input_tokens",
)
_START_LIFE = (
    f"INSERT INTO lives (run_id, life, started_at, {', '.join(_COUNTERS)}) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, life) DO UPDATE SET "
    + ", ".join(f"{name} = excluded.{name}" for name in ("started_at", *_COUNTERS))
)
_SPENT = (
    "UPDATE lives SET model_calls = ?, input_tokens = ?, output_tokens = ?, tool_calls = ?, "
    "cost = ?, reasoning_tokens = ?, cached_input_tokens = ? WHERE run_id = ? AND life = ?"
)


class LifeSpending:
    """The row of one life of run ``run_id``, written as ``budget`` spends, under
    ``lease``."""

    def __init__(
        self, store: RunStore, run_id: str, life: int, budget: Budget, lease: Lease | None
    ) -> None:
        self._store = store
        self._run_id = run_id
        self._life = life
        self._started = time.time()
        self._budget = budget
        self._lease = lease
        self._due: asyncio.Handle | None = None
        budget.on_spend = self._spent
        spent = budget.usage  # what the earlier lives spent, if it resumes the run
        row = (
            run_id,
            life,
            self._started,
            spent.model_calls,
            spent.input_tokens,
            spent.output_tokens,
            spent.tool_calls,
            spent.cost,
            spent.reasoning_tokens,
            spent.cached_input_tokens,
        )
        store.save((_START_LIFE, row), lease=lease)

    def _spent(self) -> None:
        if self._due is None:
            self._due = asyncio.get_running_loop().call_soon(self._write)

    def _write(self) -> None:
        self._due = None
        self._store.save(self._row(), lease=self._lease)

    def _row(self) -> Statement:
        u = self._budget.usage
        return _SPENT, (
            u.model_calls,
            u.input_tokens,
            u.output_tokens,
            # Not the calls of a turn under way: a life cut off in it has its resumed
            # run make (and count) that turn's calls again.
            u.tool_calls - self._budget.tool_calls_running,
            u.cost,
            u.reasoning_tokens,
            u.cached_input_tokens,
            self._run_id,
            self._life,
        )

    def flush(self) -> None:
        """Write what the run spent since the row was last written, now: before a write
        the run waits for, which then holds it too."""
        if self._due is not None:
            self._due.cancel()
            self._write()

    def end(self) -> None:
        """Write the row a last time (with the end of the life), and stop watching."""
        self.stop()
        self._write()

    def stop(self) -> None:
        """Stop watching the budget."""
        self._budget.on_spend = None
        if self._due is not None:
            self._due.cancel()
            self._due = None
