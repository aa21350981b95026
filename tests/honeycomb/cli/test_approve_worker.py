"""``honeycomb approve --worker W`` of a worker that asked about no such call: refused
(exit 2) naming the worker given and the workers whose calls wait, or saying none do."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from honeycomb import Approvals, Executor, Role, Subtask, ToolMessage, tool
from honeycomb.cli.main import main
from honeycomb.testing import FunctionModel
from runtime import AssistantMessage, ModelRequest
from runtime.testing import call


@tool(side_effects=True)
def pay(to: str) -> str:
    """Pay someone."""
    return f"paid {to}"


async def _waiting(db: Path) -> None:
    """Run ``r1``: its worker ``ann`` waits on ``c1``, ``bob`` on ``c1`` and ``c2``."""

    async def answer(request: ModelRequest) -> AssistantMessage | str:
        if any(isinstance(m, ToolMessage) for m in request.messages):
            return "paid"
        if (request.conversation or "").endswith("/ann"):
            return AssistantMessage(tool_calls=(call("pay", {"to": "cy"}, id="c1"),))
        calls = (call("pay", {"to": "dan"}, id="c1"), call("pay", {"to": "eve"}, id="c2"))
        return AssistantMessage(tool_calls=calls)

    role = Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",)))
    executor = Executor([role], FunctionModel(answer), tools=[pay], store=db, aggregator="concat")
    plan = [Subtask(id=name, role="payer", instruction="pay") for name in ("ann", "bob")]
    assert (await executor.run("pay", subtasks=plan, run_id="r1")).status == "waiting"


def test_a_worker_without_the_call_is_named_with_the_workers_that_wait(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    anyio.run(_waiting, db)
    where = ["--store", str(db)]
    assert main(["approve", "r1", "c1", "--worker", "carl", *where]) == 2
    assert capsys.readouterr().err == (
        "cannot decide on call 'c1' of run 'r1': worker 'carl' asked for approval of no "
        "call of this id; the workers whose calls wait, and their calls: ann (c1); "
        "bob (c1, c2)\n"
    )
    assert main(["approve", "r1", "c2", "--worker", "ann", *where]) == 2  # bob's call
    assert "worker 'ann' asked for approval of no call of this id" in capsys.readouterr().err
    for worker, call_id in (("ann", "c1"), ("bob", "c1"), ("bob", "c2")):
        assert main(["approve", "r1", call_id, "--worker", worker, *where]) == 0
    capsys.readouterr()
    assert main(["approve", "r1", "c1", "--worker", "\x1b[2Jcarl", *where]) == 2
    said = capsys.readouterr().err
    assert said.endswith("of no call of this id; no call of the run waits for a decision\n")
    assert "\x1b" not in said  # what was typed is shown inert
    assert main(["approve", "r1", "c1", "--worker", "ann", *where]) == 2  # as before
    assert "it was decided already (approved by " in capsys.readouterr().err
    assert main(["approve", "r9", "c1", "--worker", "ann", *where]) == 2
    assert "has no such run" in capsys.readouterr().err
