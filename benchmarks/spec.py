"""The workload's parameters and the pieces every implementation shares: the
observations the fake model expects, its counts and checks, and the verdict on a run.
Imports no framework, so the floor's process holds nothing of Honeycomb."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Counts",
    "Params",
    "expected_observation",
    "lookup",
    "lookup_value",
    "pause",
    "verdict",
]


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
    store: bool = False  # keep the run in the process's SQLite run store (a temporary file)
    trace: bool = False  # record the run's spans
    watched: bool = False  # every event consumed through Executor.stream
    stream: bool = False  # watched, with text deltas: the fake model streams

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


def lookup_value(key: str) -> str:
    """What the ``lookup`` tool returns for ``key`` (``"<worker>-<turn>-<call>"``)."""
    worker, turn, call = key.split("-")
    return expected_observation(int(worker), int(turn), int(call))


class Counts:
    """What one run of the workload did, as its fake model and tool count it."""

    def __init__(self) -> None:
        self.model_calls = 0
        self.tool_calls = 0
        self.broken: list[str] = []  # model calls that saw the wrong observations

    def model_call(self, params: Params, worker: int, turn: int, seen: Sequence[object]) -> None:
        """Count a model call of ``worker`` at ``turn`` and check that it saw every
        observation of the earlier turns, in order (``seen``, from its history)."""
        self.model_calls += 1
        wanted = [expected_observation(worker, done, j) for done in range(1, turn)
                  for j in range(params.t)]  # fmt: skip
        if list(seen) != wanted:
            self.broken.append(f"worker {worker} turn {turn}: observations {list(seen[:3])}...")


def lookup(params: Params, counts: Counts) -> Callable[[str], Awaitable[str]]:
    """The workload's ``lookup(key)`` tool, counting its calls into ``counts``: a plain
    async function, for each framework to make a tool of its own way."""

    async def lookup(key: str) -> str:
        """Look a key up."""
        counts.tool_calls += 1
        await pause(params.lt)
        return lookup_value(key)

    return lookup


def verdict(
    params: Params,
    counts: Counts,
    answers: Sequence[str],
    failures: Sequence[BaseException] = (),
    events: int = 0,
) -> dict[str, Any]:
    """The outcome of one run: its counts, and whether it is valid (every model and
    tool call made, every observation seen, all N answers in the aggregate)."""
    problems = counts.broken[:3]
    if counts.broken:
        problems.append(f"{len(counts.broken)} model calls saw wrong observations")
    if failures:
        problems.append(f"{len(failures)} workers failed, e.g. {failures[0]!r}")
    if counts.model_calls != params.model_calls:
        problems.append(f"model calls {counts.model_calls} != {params.model_calls}")
    if counts.tool_calls != params.tool_calls:
        problems.append(f"tool calls {counts.tool_calls} != {params.tool_calls}")
    missing = {f"done-{i}" for i in range(params.n)} - set(answers)
    if missing:
        problems.append(f"{len(missing)} answers missing from the aggregate")
    return {"model_calls": counts.model_calls, "tool_calls": counts.tool_calls,
            "events": events, "valid": not problems, "problems": problems}  # fmt: skip
