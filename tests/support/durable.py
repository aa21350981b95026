"""A small stored run for the durability tests: N workers, each taking three turns.

Turn 1 asks for a side-effecting ``append`` (a line to the effects file) and a
parallel-safe ``lookup``; turn 2 for another ``append``; turn 3 answers. Call ids are
random, as a real model's are, so only the store's checkpoints and journal can stop a
resumed run from repeating a side effect. Every model call is logged (worker, turn,
life) so a test can see which calls an earlier life had already made.

Run as a script (``python -m tests.support.durable STORE EFFECTS CALLS RUN_ID LIFE N
[LATENCY [TTL [steal]]]``) it is the child process the crash and lease tests kill, stop
and race (:data:`START_AFTER` starts racers together): it prints the result as a JSON
line, or, when another process holds the run, ``{"busy": ...}`` and exits with status 3.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import anyio

from honeycomb import Executor, Policy, Role, Subtask, tool
from honeycomb.errors import RunBusy
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from runtime import AssistantMessage, ModelRequest, ToolCall
from tests.support.where import named

TASK = "append the lines, then answer"


class Setup:
    """The tools' and the model's files, the latency of each, and a gate that a test
    can close to hold ``append`` calls mid-call."""

    def __init__(
        self,
        effects: Path,
        calls: Path,
        *,
        life: str = "1",
        latency: float = 0.0,
        idempotent: bool = False,
    ) -> None:
        self.effects = effects
        self.calls = calls
        self.life = life
        self.latency = latency
        self.idempotent = idempotent
        self.gate: anyio.Event | None = None
        self.held: set[str] = set()  # lines whose append waits for the gate
        self.waiting: set[str] = set()  # the held lines whose append waits
        self.holding = anyio.Event()  # set once every held append is waiting
        self._answered: dict[str, anyio.Event] = {}

    def answered(self, worker: str) -> anyio.Event:
        """Set once ``worker`` was given its final answer."""
        return self._answered.setdefault(worker, anyio.Event())

    async def _pause(self) -> None:
        if self.latency:
            await anyio.sleep(random.uniform(0, self.latency))

    def tools(self) -> list[Any]:
        async def append(line: str) -> str:
            """Append a line to the effects file."""
            await self._pause()
            if line in self.held and self.gate is not None:
                self.waiting.add(line)
                if self.waiting >= self.held:
                    self.holding.set()
                await self.gate.wait()
            with self.effects.open("a") as f:
                f.write(line + "\n")
                f.flush()
            await self._pause()
            return f"appended {line}"

        async def lookup(key: str) -> str:
            """Look a key up."""
            await self._pause()
            return f"value of {key}"

        return [tool(append, side_effects=True, idempotent=self.idempotent), tool(lookup)]

    def model(self) -> FunctionModel:
        async def answer(request: ModelRequest) -> AssistantMessage | str:
            worker = (request.conversation or "").rsplit("/", 1)[-1]
            turn = 1 + sum(1 for m in request.messages if isinstance(m, AssistantMessage))
            with self.calls.open("a") as f:
                f.write(f"{worker} {turn} {self.life}\n")
                f.flush()
            await self._pause()
            if turn == 1:
                return AssistantMessage(
                    tool_calls=(_call("append", line=f"{worker}-1"), _call("lookup", key=worker))
                )
            if turn == 2:
                return AssistantMessage(tool_calls=(_call("append", line=f"{worker}-2"),))
            seen = [m.content for m in request.messages if m.role == "tool"]
            self.answered(worker).set()
            return f"done {worker}: " + " | ".join(seen)

        return FunctionModel(answer)

    def executor(self, store: RunStore | Path | str, **policy: Any) -> Executor:
        return Executor(
            [Role(name="worker", description="Appends lines.", tools=("append", "lookup"))],
            self.model(),
            tools=self.tools(),
            aggregator="concat",
            policy=Policy(**{"max_workers": 64, "max_subtasks": 64, **policy}),
            store=store,
        )


def _call(name: str, **arguments: str) -> ToolCall:
    return ToolCall(id=f"call_{uuid.uuid4().hex[:12]}", name=name, arguments=json.dumps(arguments))


def plan(workers: int) -> list[Subtask]:
    return [
        Subtask(id=f"w{i}", role="worker", instruction=f"append for w{i}") for i in range(workers)
    ]


def calls_by_worker(calls: Path) -> dict[str, list[tuple[int, str]]]:
    """The model calls in the log: worker -> [(turn, life), ...]."""
    found: dict[str, list[tuple[int, str]]] = {}
    if calls.exists():
        for line in calls.read_text().splitlines():
            worker, turn, life = line.split()
            found.setdefault(worker, []).append((int(turn), life))
    return found


BUSY = 3
"""The child's exit status when another process holds the run's lease."""

START_AFTER = "HONEYCOMB_TEST_START_AFTER"
"""A file the child waits for before it runs (it makes ``FILE.LIFE`` once it is ready
to): children started together then run together, however long each took to start."""


async def _child(paths: list[str], run_id: str, life: str, n: int, options: list[str]) -> int:
    latency = float(options[0]) if options else 0.02
    where = named(paths[0])  # a file, or a PostgreSQL URL
    store = RunStore(where, lease_ttl_s=float(options[1])) if len(options) > 1 else where
    steal = options[2:] == ["steal"]
    setup = Setup(Path(paths[1]), Path(paths[2]), life=life, latency=latency)
    executor = setup.executor(store)
    try:
        if steal:
            result = await executor.resume(run_id, steal=True)
        else:
            result = await executor.run(TASK, subtasks=plan(n), run_id=run_id)
    except RunBusy as exc:
        busy = {"busy": str(exc), "host": exc.host, "pid": exc.pid, "expired": exc.expired}
        sys.stdout.write(json.dumps(busy) + "\n")
        return BUSY
    sys.stdout.write(json.dumps({"status": result.status, "answer": result.answer_text}) + "\n")
    return 0


def _line_up(life: str) -> None:
    """Say this child is ready, and wait for the others to be (:data:`START_AFTER`)."""
    start = os.environ.get(START_AFTER)
    if start is not None:
        Path(f"{start}.{life}").touch()
        while not Path(start).exists():
            time.sleep(0.005)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    paths_, (run_id_, life_, n_, *options_) = sys.argv[1:4], sys.argv[4:]
    _line_up(life_)
    sys.exit(anyio.run(_child, paths_, run_id_, life_, int(n_), options_))
