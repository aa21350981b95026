"""The workload's parameters and the pieces both implementations share. Imports no
framework, so the floor's process holds nothing of Honeycomb."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

__all__ = ["Params", "expected_observation", "pause"]


@dataclass(frozen=True, slots=True)
class Params:
    """One workload: sizes and latencies (seconds; 0 means one event-loop yield)."""

    n: int = 100
    k: int = 3
    t: int = 3
    lm: float = 0.05
    lt: float = 0.02
    side_effects: bool = False
    events: bool = False
    store: bool = False  # keep the run in a SQLite run store (a temporary file)
    trace: bool = False  # record the run's spans

    @property
    def ideal_s(self) -> float:
        """The physical limit: K model latencies and K-1 tool latencies in sequence
        (side-effecting tools run one after another, so T of them per turn)."""
        tools = self.lt * (self.t if self.side_effects else 1)
        return self.k * self.lm + (self.k - 1) * tools

    @property
    def model_calls(self) -> int:
        return self.n * self.k

    @property
    def tool_calls(self) -> int:
        return self.n * (self.k - 1) * self.t


async def pause(seconds: float) -> None:
    """A latency: ``sleep(seconds)``, or a single loop yield for 0."""
    await asyncio.sleep(seconds)


def expected_observation(worker: int, turn: int, call: int) -> str:
    return f"value-{worker}-{turn}-{call}"
