"""A stored run killed with SIGKILL early in a life, right after something the run
store must keep already happened: a planner plans one subtask for a ``bee``, whose
first answer asks for a parallel-safe tool (``look``) or a nested worker
(``agent:helper``); an aggregator merges. Each model call is logged to the calls file
once answered (who asked, its turn, its conversation and usage), so a test can tell
what every life asked and spent.

Run as a script (``python -m tests.support.early_kills DB CALLS MOMENT``) it starts the
run in a process of its own, which kills itself with SIGKILL at ``MOMENT``:

- ``worker``: as the bee's first model call starts (the plan made just before);
- ``tool``: as ``look`` starts (the bee's answer asking for it made just before);
- ``helper``: as the nested helper's first model call starts (the bee's answer asking
  for it made just before).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio

from honeycomb import Executor, ModelResponse, Role, ToolMessage, Usage, tool
from honeycomb.testing import FunctionModel
from runtime import AssistantMessage, ModelRequest, ToolCall

__all__ = ["MOMENTS", "TASK", "Early", "answered"]

TASK = "look around"
MOMENTS = ("worker", "tool", "helper")
PLAN = {"subtasks": [{"id": "s1", "role": "bee", "instruction": "look around"}]}


class Early:
    """The run's tools and model, logging to ``calls``; ``kill``: the moment its process
    kills itself (None: it never does); ``ask``: what the bee's first answer asks for
    (``look`` or ``helper``)."""

    def __init__(self, calls: Path, *, ask: str = "look", kill: str | None = None) -> None:
        self.calls = calls
        self.ask = ask
        self.kill = kill

    def executor(self, db: Path) -> Executor:
        async def look(place: str) -> str:
            """Look at a place."""
            self._dies("tool")
            return f"{place} looks fine"

        return Executor(
            [
                Role(name="planner", description="Plans."),
                Role(name="bee", description="Looks.", tools=("look", "agent:helper")),
                Role(name="helper", description="Helps."),
                Role(name="aggregator", description="Merges."),
            ],
            FunctionModel(self._answer),
            tools=[tool(look)],
            store=db,
        )

    def _dies(self, moment: str) -> None:
        if self.kill == moment:
            os.kill(os.getpid(), signal.SIGKILL)

    async def _answer(self, request: ModelRequest) -> ModelResponse:
        conversation = request.conversation or ""
        parts = conversation.split("/")
        who = "helper" if len(parts) > 2 else {"s1": "bee"}.get(parts[-1], parts[-1])
        seen = [m for m in request.messages if isinstance(m, ToolMessage)]
        if who == "bee" and not seen:
            self._dies("worker")
        if who == "helper":
            self._dies("helper")
        message = AssistantMessage(content=f"{who} is done")
        if who == "planner":
            message = AssistantMessage(content=json.dumps(PLAN))
        elif who == "bee" and not seen:
            # A new id each time, as a model gives: asked again, it names a new call.
            name, arguments = (
                ("look", {"place": "the hive"})
                if self.ask == "look"
                else ("helper", {"instruction": "help"})
            )
            call = ToolCall(id=uuid.uuid4().hex[:8], name=name, arguments=json.dumps(arguments))
            message = AssistantMessage(tool_calls=(call,))
        usage = Usage(input_tokens=100 + len(conversation), output_tokens=7, cost=0.01)
        entry = {"who": who, "conversation": conversation, "first": not seen}
        with self.calls.open("a") as f:
            f.write(json.dumps({**entry, "usage": [usage.input_tokens, usage.output_tokens]}))
            f.write("\n")
        finish = "tool_calls" if message.tool_calls else "stop"
        return ModelResponse(message=message, usage=usage, finish_reason=finish, model="early")


def answered(calls: Path) -> list[dict[str, Any]]:
    """The model calls answered so far, in every life, in order."""
    return [json.loads(line) for line in calls.read_text().splitlines() if line]


async def _child(db: str, calls: str, moment: str) -> None:
    ask = "helper" if moment == "helper" else "look"
    await Early(Path(calls), ask=ask, kill=moment).executor(Path(db)).run(TASK, run_id="r1")


if __name__ == "__main__":
    anyio.run(_child, *sys.argv[1:4])
