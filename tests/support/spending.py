"""A stored run whose every part spends: a planner plans a ``payer`` (its ``pay`` needs
approval) and a ``reader`` (its ``read`` can be held at a gate, or kill the process),
and an aggregator merges their answers. Each model call spends a usage of its own (the
n-th call of a process: n + 100 input tokens, n output tokens, a cent), logged as a
line of the calls file as it is made, so a test can add up what every life of the run
spent, one killed with SIGKILL included.

Run as a script (``python -m tests.support.spending DB CALLS RUN_ID``) it starts the run
in a process of its own and kills that process with SIGKILL while ``read`` runs, once
the payer's call waits for approval in the store (so that nothing else is spending:
all that was spent before is in the store, as it is before any write a run waits for).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio

from honeycomb import Approvals, Executor, ModelResponse, Policy, Role, ToolMessage, Usage, tool
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from runtime import AssistantMessage, ModelRequest, ToolCall

TASK = "pay ann and read the news"
PLAN = {
    "subtasks": [
        {"id": "s1", "role": "payer", "instruction": "pay ann"},
        {"id": "s2", "role": "reader", "instruction": "read the news"},
    ]
}


class Spending:
    """The run's tools and model, the calls file they log to, and a gate a test can
    close to hold ``read`` mid-call (``crash``: ``read`` kills the process instead)."""

    def __init__(self, calls: Path, *, crash: bool = False) -> None:
        self.calls = calls
        self.crash = crash
        self.gate: anyio.Event | None = None
        self.holding = anyio.Event()  # set once a held read waits
        self._made = itertools.count(1)

    def executor(self, db: Path, **policy: Any) -> Executor:
        async def pay(to: str, amount: int) -> str:
            """Pay someone."""
            return f"paid {amount} to {to}"

        async def read(topic: str) -> str:
            """Read the news on a topic."""
            if self.crash:
                while not RunStore(db).approvals("r1"):  # noqa: ASYNC110 (a readiness poll)
                    await anyio.sleep(0.01)
                os.kill(os.getpid(), signal.SIGKILL)
            if self.gate is not None:
                self.holding.set()
                await self.gate.wait()
            return f"news on {topic}"

        return Executor(
            [
                Role(name="planner", description="Plans."),
                Role(name="payer", description="Pays.", tools=("pay",),
                     approvals=Approvals(tools=("pay",))),
                Role(name="reader", description="Reads.", tools=("read",)),
                Role(name="aggregator", description="Merges."),
            ],
            FunctionModel(self._answer),
            tools=[tool(pay, side_effects=True), tool(read, side_effects=True)],
            policy=Policy(**policy),
            store=db,
        )  # fmt: skip

    async def _answer(self, request: ModelRequest) -> ModelResponse:
        who = (request.conversation or "").rsplit("/", 1)[-1]
        who = {"s1": "payer", "s2": "reader"}.get(who, who)  # the workers, by their subtask
        seen = [m for m in request.messages if isinstance(m, ToolMessage)]
        message = AssistantMessage(content=f"{who} is done: " + " | ".join(m.content for m in seen))
        if who == "planner":
            message = AssistantMessage(content=json.dumps(PLAN))
        elif who in ("payer", "reader") and not seen:
            name, arguments = ("pay", {"to": "ann", "amount": 5}) if who == "payer" else (
                "read", {"topic": "bees"})  # fmt: skip
            call = ToolCall(id=f"{name}_1", name=name, arguments=json.dumps(arguments))
            message = AssistantMessage(tool_calls=(call,))
        n = next(self._made)
        usage = Usage(input_tokens=100 + n, output_tokens=n, cost=0.01)
        with self.calls.open("a") as f:
            f.write(json.dumps({"who": who, "usage": [usage.input_tokens, usage.output_tokens]}))
            f.write("\n")
        finish = "tool_calls" if message.tool_calls else "stop"
        return ModelResponse(message=message, usage=usage, finish_reason=finish, model="spending")


def spent(calls: Path) -> Usage:
    """What the calls in the calls file spent, together."""
    total = Usage()
    for line in calls.read_text().splitlines():
        given, taken = json.loads(line)["usage"]
        total += Usage(input_tokens=given, output_tokens=taken, model_calls=1, cost=0.01)
    return total


async def _child(db: str, calls: str, run_id: str) -> None:
    await Spending(Path(calls), crash=True).executor(Path(db)).run(TASK, run_id=run_id)


if __name__ == "__main__":
    anyio.run(_child, *sys.argv[1:4])
