"""``honeycomb approve --worker W`` of a worker that asked about no such call: refused
(exit 2) naming the worker given and the workers whose calls wait, or saying none do;
and a call id that several calls had (of several workers, or turns) decided only once
the one meant is named (``--worker``, ``--turn``), as the printed commands name it."""

from __future__ import annotations

import io
from pathlib import Path

import anyio
import pytest
from msgspec.structs import replace

from honeycomb import Approvals, Executor, Role, RunResult, Subtask, ToolMessage, tool
from honeycomb.cli.approve import print_waiting
from honeycomb.cli.main import main
from honeycomb.run.decide import decide
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from runtime import ApprovalEntry, AssistantMessage, Decision, ModelRequest
from runtime.testing import call


@tool(side_effects=True)
def pay(to: str) -> str:
    """Pay someone."""
    return f"paid {to}"


async def _waiting(db: Path) -> None:
    """Run ``r1``: its worker ``ann`` waits on ``c1``, ``bob`` on ``c1`` and ``c2``."""
    await _waiting_result(db)


async def _waiting_result(db: Path) -> RunResult:
    """:func:`_waiting`'s run, as it returned."""

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
    waiting = await executor.run("pay", subtasks=plan, run_id="r1")
    assert waiting.status == "waiting"
    return waiting


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


def test_a_call_id_the_run_never_asked_about_is_named_with_the_calls_that_wait(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run whose process stopped as it asked (killed at the terminal's prompt) printed
    no call ids: the refusal of one guessed says which to decide."""
    anyio.run(_waiting, db)
    assert main(["approve", "r1", "c9", "--store", str(db)]) == 2
    assert capsys.readouterr().err == (
        "cannot decide on call 'c9' of run 'r1': the run has no call of this id that asked "
        "for approval; the workers whose calls wait, and their calls: ann (c1); bob (c1, c2)\n"
    )


async def _asked_again(db: Path) -> None:
    """``ann``'s ``c1`` of turn 1 decided (approved, as by another person), and a call of
    a later turn of hers waiting under the same id (ids are distinct only in the
    conversation a worker sends, which compaction shortens)."""
    store = RunStore(db)
    try:
        (first,) = [e.pending for e in await store.approvals_of("r1") if e.pending.worker == "ann"]
        await decide(store, "r1", "c1", approve=True, worker="ann", by="bea@desk")
        later = replace(first, turn=3, arguments={"to": "mallory"}, asked_at=first.asked_at + 1)
        await store.keep_approval("r1", ApprovalEntry(pending=later))
    finally:
        store.close()


def test_a_call_id_asked_in_two_turns_is_decided_only_when_the_turn_is_named(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    anyio.run(_waiting, db)
    anyio.run(_asked_again, db)
    where = ["--store", str(db)]
    # The command as typed from the list printed when turn 1's call waited: it must
    # not approve the later call, whose arguments its typist never saw.
    assert main(["approve", "r1", "c1", "--worker", "ann", *where]) == 2
    assert capsys.readouterr().err == (
        "cannot decide on call 'c1' of run 'r1': 2 calls asked for approval under this id: "
        "--worker ann --turn 1 (pay, approved by bea@desk); --worker ann --turn 3 (pay, "
        "waits). Name the one meant with --worker and --turn\n"
    )
    assert main(["approve", "r1", "c1", *where]) == 2  # bob's c1 of turn 1 as well
    assert "3 calls asked for approval under this id" in capsys.readouterr().err
    assert main(["approve", "r1", "c1", "--worker", "ann", "--turn", "1", *where]) == 2
    assert "it was decided already (approved by bea@desk" in capsys.readouterr().err
    assert main(["approve", "r1", "c1", "--worker", "ann", "--turn", "2", *where]) == 2
    assert capsys.readouterr().err.startswith(
        "cannot decide on call 'c1' of run 'r1': worker 'ann' asked for approval of no call "
        "of this id in turn 2; its calls: --worker ann --turn 1 (pay, approved by bea@desk); "
    )
    assert main(["approve", "r1", "c1", "--worker", "ann", "--turn", "3", *where]) == 0
    assert capsys.readouterr().out == "approved: pay (c1) of ann in run r1\n"
    store = RunStore(db)
    try:
        decided = {(e.pending.worker, e.pending.turn): e for e in store.approvals("r1")}
    finally:
        store.close()
    assert decided["ann", 3].decision == Decision.approved()
    assert decided["bob", 1].decision is None  # nothing else decided on the way


def test_the_printed_command_names_the_worker_and_the_turn(db: Path) -> None:
    waiting = anyio.run(_waiting_result, db)
    out = io.StringIO()
    print_waiting(out, waiting, db, Path(".honeycomb/runs.db"))
    lines = [x.split("   (or", 1)[0].strip() for x in out.getvalue().splitlines()]
    assert f"honeycomb approve r1 c1 --store {db} --worker ann --turn 1" in lines
    assert f"honeycomb approve r1 c2 --store {db} --worker bob --turn 1" in lines
