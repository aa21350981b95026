"""A stored run for the approval tests: a ``payer`` worker whose ``pay`` (a side effect,
one line in the effects file) needs approval, and ``reader`` workers that look things
up meanwhile. The model answers each worker from what it sees: the payer asks to pay
once, then reports its observation.

Run as a script (``python -m tests.support.approvals DB EFFECTS RUN_ID [CRASH]``) it
resumes the run in a process of its own and prints the payer's last observation as a
JSON line; with CRASH ``before`` or ``after``, the process kills itself with SIGKILL
as ``pay`` starts (before its effect) or once its effect is written.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio

from honeycomb import Approvals, Executor, Policy, Role, RunResult, Subtask, ToolMessage, tool
from honeycomb.errors import ApprovalError
from honeycomb.run.context import Backend
from honeycomb.testing import FunctionModel
from runtime import Approver, AssistantMessage, ModelRequest, ToolCall
from tests.support.concurrency import Rendezvous
from tests.support.where import Where, named

TASK = "pay the invoice and read the news"


def executor(
    db: Where,
    effects: Path,
    *,
    crash: str = "",
    read_s: float = 0.0,
    reading: Rendezvous | None = None,
    backend: Backend | None = None,
    approver: Approver | None = None,
    **policy: Any,
) -> Executor:
    async def pay(to: str, amount: int) -> str:
        """Pay someone."""
        if crash == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        with effects.open("a") as f:
            f.write(f"paid {amount} to {to}\n")
        if crash == "after":
            os.kill(os.getpid(), signal.SIGKILL)
        return f"paid {amount} to {to}"

    async def read(topic: str) -> str:
        """Read the news on a topic."""
        if reading is not None:  # goes on once the others read too
            await reading.meet()
        await anyio.sleep(read_s)
        return f"news on {topic}"

    async def answer(request: ModelRequest) -> AssistantMessage | str:
        worker = (request.conversation or "").rsplit("/", 1)[-1]
        seen = [m for m in request.messages if isinstance(m, ToolMessage)]
        if worker == "payer":
            if not seen:
                arguments = json.dumps({"to": "ann", "amount": 120})
                return AssistantMessage(
                    tool_calls=(ToolCall(id="pay_1", name="pay", arguments=arguments),)
                )
            return f"payer saw: {seen[-1].status}: {seen[-1].content}"
        if len(seen) < 2:  # two turns of reading
            arguments = json.dumps({"topic": f"{worker}-{len(seen)}"})
            return AssistantMessage(
                tool_calls=(ToolCall(id=f"read_{len(seen)}", name="read", arguments=arguments),)
            )
        return f"{worker} read it all"

    return Executor(
        [
            Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",))),
            Role(name="reader", tools=("read",)),
        ],
        FunctionModel(answer),
        tools=[tool(pay, side_effects=True), tool(read)],
        aggregator="concat",
        policy=Policy(**policy),
        store=db,
        backend=backend,
        approver=approver,
    )


def plan(readers: int) -> list[Subtask]:
    return [Subtask(id="payer", role="payer", instruction="pay the invoice")] + [
        Subtask(id=f"r{i}", role="reader", instruction="read the news") for i in range(readers)
    ]


def payer_saw(result: RunResult) -> str:
    return result.subtasks["payer"].text


async def _child(db: str, effects: str, run_id: str, crash: str) -> None:
    result = await executor(named(db), Path(effects), crash=crash).resume(run_id)
    print(json.dumps({"status": result.status, "payer": payer_saw(result)}), flush=True)


if __name__ == "__main__":
    db, effects, run_id, *rest = sys.argv[1:]
    anyio.run(_child, db, effects, run_id, rest[0] if rest else "")


def decide_with_others(
    db: str, effects: str, approve: bool, by: str, ready: Any, told: Any
) -> None:  # pragma: no cover (run in a process of its own)
    """One of several processes deciding ``pay_1`` of run ``r1`` at once: each waits at
    ``ready`` (a barrier) and puts ``(by, "decided")`` or ``(by, error)`` on ``told``."""

    async def decide() -> None:
        deciding = executor(named(db), Path(effects))
        assert deciding.store is not None
        await deciding.store.open()
        ready.wait()
        try:
            await deciding.decide(
                "r1", "pay_1", approve=approve, reason=None if approve else f"no, says {by}", by=by
            )
        except ApprovalError as exc:
            told.put((by, f"{type(exc).__name__}: {exc}"))
        else:
            told.put((by, "decided"))
        finally:
            deciding.store.close()

    anyio.run(decide)


def payer_beside_reader(
    store: Where | None, payer_done: anyio.Event, paid: dict[str, str], **options: Any
) -> Executor:
    """A ``payer`` whose ``pay`` (called with the arguments ``paid``) asks for approval,
    and a ``reader`` whose ``read`` returns once ``payer_done`` is set: the run cannot
    end before the payer's call is decided. Each worker answers with what its call
    returned (``payer saw: paid ann``)."""

    @tool(side_effects=True)
    async def pay(to: str, dsn: str = "") -> str:
        """Pay someone."""
        return f"paid {to}"

    @tool
    async def read() -> str:
        """Read the news (until the payer is done)."""
        with anyio.fail_after(10):
            await payer_done.wait()
        return "news"

    def answer(request: ModelRequest) -> AssistantMessage | str:
        worker = (request.conversation or "").rsplit("/", 1)[-1]
        seen = [m for m in request.messages if isinstance(m, ToolMessage)]
        if seen:
            return f"{worker} saw: {seen[-1].content}"
        name = "pay" if worker == "payer" else "read"
        arguments = json.dumps(paid if name == "pay" else {})
        return AssistantMessage(tool_calls=(ToolCall(id="c1", name=name, arguments=arguments),))

    return Executor(
        [
            Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",))),
            Role(name="reader", tools=("read",)),
        ],
        FunctionModel(answer),
        tools=[pay, read],
        aggregator="concat",
        store=store,
        **options,
    )
