"""A stored run whose model never answers, in a process of its own that a test kills:
``python -m tests.support.hung_life STORE WALL_TIME_S``. Its lease's heartbeat is
renewed every 50 ms (a TTL of 0.2 s), so the store tells how long it lived."""

from __future__ import annotations

import sys

import anyio

from honeycomb import Executor, Policy, Role
from honeycomb.store import RunStore
from runtime import AssistantMessage, ModelRequest, ModelResponse
from tests.support.where import Where, named

RUN_ID = "hung"


class Silent:
    """A model whose calls wait for ever (``answer_after_s``: or that long)."""

    name = "silent"

    def __init__(self, answer_after_s: float = float("inf")) -> None:
        self.answer_after_s = answer_after_s

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await anyio.sleep(self.answer_after_s)
        return ModelResponse(message=AssistantMessage(content="answered"))


def executor(store: Where, wall_time_s: float, model: Silent) -> Executor:
    return Executor(
        [Role(name="w")],
        model,
        aggregator="concat",
        store=RunStore(store, lease_ttl_s=0.2),
        policy=Policy(budgets={"wall_time_s": wall_time_s}),
    )


async def main(store: str, wall_time_s: str) -> None:
    await executor(named(store), float(wall_time_s), Silent()).run(
        "wait", subtasks=[("w", "wait")], run_id=RUN_ID
    )


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:])
