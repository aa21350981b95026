"""A stored run in which one worker's model or tool raises a BaseException that is not
an error (KeyboardInterrupt, SystemExit, or one of the caller's own), while another
worker has finished and a third is still going.

Run as a script (``python -m tests.support.fatal DB KIND WHERE``) it prints, as a JSON
line, the type of what ``run()`` raised: a KeyboardInterrupt or SystemExit raised in a
task escapes asyncio's event loop, so it is tried in a process of its own.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from honeycomb import Executor, GuardCheck, Guards, Role, Subtask, tool
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from runtime import AssistantMessage, ModelRequest, ToolCall


class Abort(BaseException):
    """An application's own control-flow exception."""


KINDS: dict[str, type[BaseException]] = {
    "KeyboardInterrupt": KeyboardInterrupt,
    "SystemExit": SystemExit,
    "Abort": Abort,
}
WHERE = ("model", "tool", "parallel tool", "guard")
"""Where w1 raises: in its model, in the one tool its turn calls (run in the worker's
own task), in one of three parallel calls (each in a task of its own), or in the output
guard that checks its answer (a function: in a thread)."""


def executor(
    store: RunStore | Path,
    kind: type[BaseException] | None,
    where: str,
    asked: list[str] | None = None,
) -> Executor:
    """w0 answers at once, w1 raises ``kind`` (None: it answers), w2 takes a while;
    ``asked`` receives the worker of every model call."""

    async def boom(x: str) -> str:
        """Fails badly."""
        await asyncio.sleep(0.01)
        if kind is not None:
            raise kind("raised by the tool")
        return "fine"

    async def slow(x: str) -> str:
        """Takes a while."""
        await asyncio.sleep(0.05)
        return "fine"

    def checked(check: GuardCheck) -> None:
        """Fails badly on w1's answer."""
        if where == "guard" and kind is not None and check.worker == "w1":
            raise kind("raised by the guard")

    async def answer(request: ModelRequest) -> AssistantMessage | str:
        worker = (request.conversation or "").rsplit("/", 1)[-1]
        turn = 1 + sum(1 for m in request.messages if isinstance(m, AssistantMessage))
        if asked is not None:
            asked.append(worker)
        if worker == "w0" or turn > 1:
            return f"done {worker}"
        if worker == "w2":
            await asyncio.sleep(0.5 if kind is not None else 0.0)
            return "done w2"
        if where in ("model", "guard"):
            await asyncio.sleep(0.05)
            if kind is not None and where == "model":
                raise kind("raised by the model")
            return "done w1"
        calls = [ToolCall(id="c1", name="boom", arguments='{"x": "a"}')]
        if where == "parallel tool":
            calls = [
                ToolCall(id="c0", name="slow", arguments='{"x": "a"}'),
                *calls,
                ToolCall(id="c2", name="slow", arguments='{"x": "b"}'),
            ]
        return AssistantMessage(tool_calls=tuple(calls))

    return Executor(
        [
            Role(
                name="worker",
                description="d",
                tools=("boom", "slow"),
                guards=Guards(output=(checked,)),
            )
        ],
        FunctionModel(answer),
        tools=[tool(boom), tool(slow)],
        aggregator="concat",
        store=store,
    )


PLAN = [Subtask(id=f"w{i}", role="worker", instruction="go") for i in range(3)]


async def _main(db: Path, kind: str, where: str) -> None:
    await executor(db, KINDS[kind], where).run("the task", subtasks=PLAN, run_id="r1")


if __name__ == "__main__":
    db_, kind_, where_ = sys.argv[1:4]
    try:
        asyncio.run(_main(Path(db_), kind_, where_))
        raised = None
    except BaseException as exc:  # what run() raised is the result
        raised = type(exc).__name__
    sys.stdout.write(json.dumps({"raised": raised}) + "\n")
