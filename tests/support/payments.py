"""A payment service that deduplicates requests, as payment APIs do (an Idempotency-Key
header): a charge whose key it has seen is not made again, and the first answer is
given. It keeps two files in a folder: every request it got (its key), and the
ledger of charges made. A stored run's ``payer`` pays through it with its call's
idempotency key (``ToolContext.idempotency_key``), the tool being declared
``idempotent`` since the service makes it so.

Run as a script (``python -m tests.support.payments DB FOLDER RUN_ID``) it starts the
run in a process of its own, and kills that process with SIGKILL once the charge is
made, before the tool returns.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import anyio

from honeycomb import Executor, Role, ToolContext, ToolMessage, tool
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from runtime import AssistantMessage, ModelRequest, ToolCall
from tests.support.where import named

TASK = "pay ann 120"


class Payments:
    """The service's files in ``folder``; ``crash``: the payer's process dies once the
    service made the charge."""

    def __init__(self, folder: Path, *, crash: bool = False) -> None:
        self.requests = folder / "requests.txt"
        self.ledger = folder / "ledger.txt"
        self.crash = crash

    def charge(self, key: str, to: str, amount: int) -> str:
        """Charge ``amount`` to ``to`` once per ``key``; the receipt."""
        with self.requests.open("a") as f:
            f.write(key + "\n")
        made = self.ledger.read_text().splitlines() if self.ledger.exists() else []
        if not any(line.startswith(key + " ") for line in made):
            with self.ledger.open("a") as f:
                f.write(f"{key} {amount} to {to}\n")
        return f"receipt for {amount} to {to}"

    def keys(self) -> list[str]:
        """The keys of the requests the service got, in order."""
        return self.requests.read_text().splitlines() if self.requests.exists() else []

    def charges(self) -> list[str]:
        return self.ledger.read_text().splitlines() if self.ledger.exists() else []

    def executor(self, store: Path | str | RunStore | None) -> Executor:
        async def pay(to: str, amount: int, context: ToolContext) -> str:
            """Pay someone."""
            receipt = self.charge(context.idempotency_key, to, amount)
            if self.crash:
                os.kill(os.getpid(), signal.SIGKILL)
            return receipt

        async def answer(request: ModelRequest) -> AssistantMessage | str:
            seen = [m for m in request.messages if isinstance(m, ToolMessage)]
            if seen:
                return f"payer saw: {seen[-1].status}: {seen[-1].content}"
            arguments = json.dumps({"to": "ann", "amount": 120})
            return AssistantMessage(
                tool_calls=(ToolCall(id="pay_1", name="pay", arguments=arguments),)
            )

        return Executor(
            [Role(name="payer", tools=("pay",))],
            FunctionModel(answer),
            tools=[tool(pay, side_effects=True, idempotent=True)],
            aggregator="concat",
            store=store,
        )


async def _child(db: str, folder: str, run_id: str) -> None:
    executor = Payments(Path(folder), crash=True).executor(named(db))
    await executor.run(TASK, subtasks=[("payer", "Pay ann 120.")], run_id=run_id)


if __name__ == "__main__":
    anyio.run(_child, *sys.argv[1:4])
