"""Approvals in a stored run: a paused worker does not block the others, the run ends
waiting, a decision is recorded and the run resumed from there (in another process
too), and an approved side effect runs once across a crash."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest

from honeycomb import (
    ApprovalRequest,
    Approvals,
    AssistantMessage,
    ConfigError,
    Decision,
    Event,
    Executor,
    ModelRequest,
    Policy,
    Role,
    Subtask,
    ToolCall,
    ToolMessage,
    tool,
)
from honeycomb.errors import ApprovalError
from honeycomb.events import WorkerFinished
from honeycomb.run import worker_record
from honeycomb.testing import FunctionModel
from runtime.secrets import add_secret, isolated
from tests.support import ROOT
from tests.support.approvals import TASK, executor, payer_beside_reader, payer_saw, plan
from tests.support.concurrency import Rendezvous
from tests.support.stores import change


async def test_a_paused_worker_does_not_block_the_others(tmp_path: Path) -> None:
    db, effects = tmp_path / "runs.db", tmp_path / "effects.txt"
    # Each of the six readers' two reads goes on only once all six read at once: were
    # they held up behind the paused payer, or one another, they would never meet.
    reading = Rendezvous(6)
    result = await executor(db, effects, reading=reading).run(TASK, subtasks=plan(6), run_id="r1")
    assert result.status == "waiting"
    assert result.subtasks["payer"].status == "waiting"
    assert all(result.subtasks[f"r{i}"].ok for i in range(6))
    (pending,) = result.pending
    assert (pending.call_id, pending.worker, pending.tool) == ("pay_1", "payer", "pay")
    assert pending.arguments == {"to": "ann", "amount": 120}
    assert pending.why == "role 'payer' asks for approval of 'pay'"
    assert not effects.exists()


async def test_approve_then_resume_runs_the_call_once(tmp_path: Path) -> None:
    db, effects = tmp_path / "runs.db", tmp_path / "effects.txt"
    first = executor(db, effects)
    waiting = await first.run(TASK, subtasks=plan(1), run_id="r1")
    assert waiting.status == "waiting"
    assert [p.call_id for p in await first.pending("r1")] == ["pay_1"]
    decided = await first.decide("r1", "pay_1", approve=True)
    assert decided.tool == "pay"
    assert await first.pending("r1") == []
    done = await executor(db, effects).resume("r1")
    assert done.status == "ok"
    assert payer_saw(done) == "payer saw: ok: paid 120 to ann"
    assert effects.read_text() == "paid 120 to ann\n"
    again = await executor(db, effects).resume("r1")  # ended: its result, nothing re-run
    assert again.status == "ok"
    assert effects.read_text() == "paid 120 to ann\n"
    with pytest.raises(ApprovalError, match="decided already"):
        await first.decide("r1", "pay_1", approve=False)
    with pytest.raises(ApprovalError, match="no call of this id that asked for approval"):
        await first.decide("r1", "pay_2", approve=True)
    with pytest.raises(ApprovalError, match="has no such run"):
        await first.decide("r2", "pay_1", approve=True)


async def test_deny_tells_the_model_the_reason_and_the_run_goes_on(tmp_path: Path) -> None:
    db, effects = tmp_path / "runs.db", tmp_path / "effects.txt"
    first = executor(db, effects)
    await first.run(TASK, subtasks=plan(1), run_id="r1")
    await first.decide("r1", "pay_1", approve=False, reason="over budget")
    done = await executor(db, effects).resume("r1")
    assert done.status == "ok"
    assert payer_saw(done) == "payer saw: error: denied: over budget"
    assert not effects.exists()


async def test_edited_arguments_are_validated_when_decided_and_run_instead(
    tmp_path: Path,
) -> None:
    db, effects = tmp_path / "runs.db", tmp_path / "effects.txt"
    first = executor(db, effects)
    await first.run(TASK, subtasks=plan(1), run_id="r1")
    with pytest.raises(ApprovalError, match="'amount'"):
        await first.decide("r1", "pay_1", approve=True, arguments={"to": "ann", "amount": "x"})
    with pytest.raises(ApprovalError, match="go with an approval"):
        await first.decide("r1", "pay_1", approve=False, arguments={"to": "ann", "amount": 1})
    await first.decide("r1", "pay_1", approve=True, arguments={"to": "ann", "amount": 100})
    done = await executor(db, effects).resume("r1")
    assert effects.read_text() == "paid 100 to ann\n"
    assert payer_saw(done).endswith("paid 100 to ann")


def test_the_command_line_refuses_edits_it_cannot_check_and_keeps_the_call_waiting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run started from Python has no hive file the command line could find its tools
    in: an edit it cannot check against the tool's schema is refused (it would be final,
    and fail as the call runs), and the call still waits; unedited, it is approved."""
    from honeycomb.cli.main import main

    db, effects = tmp_path / "runs.db", tmp_path / "effects.txt"
    anyio.run(lambda: executor(db, effects).run(TASK, subtasks=plan(1), run_id="r1"))
    edit = ["approve", "r1", "pay_1", "--store", str(db), "--arguments", '{"to": 5}']
    assert main(edit) == 2
    assert "cannot be checked against tool 'pay''s schema" in capsys.readouterr().err
    assert main(["approve", "r1", "pay_1", "--store", str(db)]) == 0  # it still waited
    done = anyio.run(lambda: executor(db, effects).resume("r1"))
    assert effects.read_text() == "paid 120 to ann\n"
    assert done.status == "ok"


async def ran_out_waiting(db: Path, effects: Path, timeout_s: float) -> None:
    """Run r1 until it ends waiting on its payer's call, then let the call's time to
    decide, ``timeout_s`` from its asking, run out as it waits in the store.

    The run is let end waiting first: a call whose time runs out while its run goes on
    is denied in that run (the test after the next), and writing the call down took a
    busy machine longer than 0.3 s. So the run asks with an hour to decide, and its
    deadline is then set in the store as a limit of ``timeout_s`` would have set it.
    """
    waiting = await executor(db, effects, approval_timeout_s=3600).run(
        TASK, subtasks=plan(1), run_id="r1"
    )
    (pending,) = waiting.pending
    assert pending.deadline == pytest.approx(pending.asked_at + 3600)
    deadline = pending.asked_at + timeout_s
    change(db, ("UPDATE approvals SET deadline = ? WHERE run_id = 'r1'", (deadline,)))
    await anyio.sleep(max(deadline - time.time(), 0) + 0.01)  # its time runs out


async def test_no_decision_in_time_is_a_denial_on_resume(tmp_path: Path) -> None:
    db, effects = tmp_path / "runs.db", tmp_path / "effects.txt"
    first = executor(db, effects, approval_timeout_s=0.3)
    await ran_out_waiting(db, effects, 0.3)
    with pytest.raises(ApprovalError, match="ran out"):
        await first.decide("r1", "pay_1", approve=True)
    done = await executor(db, effects, approval_timeout_s=0.3).resume("r1")
    assert payer_saw(done) == "payer saw: error: denied: no decision within 0.3s"
    assert not effects.exists()


async def test_a_call_whose_time_ran_out_is_denied_on_resume_though_an_approver_answers(
    tmp_path: Path,
) -> None:
    """Resumed with an approver attached, a call whose approval_timeout_s passed while
    its run waited was asked about all the same, and approved: the deadline passed
    is a denial, whoever would answer now."""
    db, effects = tmp_path / "runs.db", tmp_path / "effects.txt"
    await ran_out_waiting(db, effects, 0.3)
    asked: list[ApprovalRequest] = []

    async def approves_at_once(request: ApprovalRequest) -> Decision:
        asked.append(request)
        return Decision.approved()

    later = executor(db, effects, approval_timeout_s=0.3, approver=approves_at_once)
    done = await later.resume("r1")
    assert payer_saw(done) == "payer saw: error: denied: no decision within 0.3s"
    assert asked == []
    assert not effects.exists()
    assert await later.pending("r1") == []  # denied, by the time limit


async def test_a_call_whose_time_runs_out_while_the_run_goes_on_is_denied_in_that_run(
    tmp_path: Path,
) -> None:
    """Its worker stayed paused past the call's approval_timeout_s for as long as the
    others worked (its dependents with it), and the run then ended ``waiting`` on a
    call nobody could decide any more, to be resumed only to deny it. The paused worker
    now takes the denial once the time runs out, and goes on in the same run."""
    payer_done = anyio.Event()

    def payer_ended(event: Event) -> None:
        if isinstance(event, WorkerFinished) and event.worker == "payer":
            payer_done.set()

    service = payer_beside_reader(
        tmp_path / "runs.db", payer_done, {"to": "ann"}, policy=Policy(approval_timeout_s=0.1)
    )
    plan = [Subtask(id="payer", role="payer", instruction="Pay ann."),
            Subtask(id="reader", role="reader", instruction="Read.")]  # fmt: skip
    done = await service.run(TASK, subtasks=plan, run_id="r1", on_event=[payer_ended])
    assert done.status == "ok"
    assert done.subtasks["payer"].text == "payer saw: denied: no decision within 0.1s"
    assert done.subtasks["reader"].text == "reader saw: news"
    (entry,) = service.store.approvals("r1")  # type: ignore[union-attr]
    assert entry.decided_by == "the time limit (approval_timeout_s)"


async def test_a_pause_for_a_decision_does_not_give_the_worker_its_time_limit_anew(
    tmp_path: Path,
) -> None:
    """worker_timeout_s counts what the worker does, its clock stopped while it waits
    for a person: a worker paused for a decision in the store (made while the run
    goes on) was given its whole limit again once decided, so work of 0.35 s before
    the pause and 0.35 s after it passed a limit of 0.6 s."""
    decided = anyio.Event()

    @tool(side_effects=True)
    async def pay(to: str) -> str:
        """Pay someone."""
        return f"paid {to}"

    @tool
    async def work(step: int) -> str:
        """Work a while."""
        await anyio.sleep(0.35)
        return f"worked {step}"

    async def answer(request: ModelRequest) -> AssistantMessage | str:
        worker = (request.conversation or "").rsplit("/", 1)[-1]
        seen = sum(1 for m in request.messages if isinstance(m, ToolMessage))
        if worker == "reader":  # keeps the run going until the payer is decided
            with anyio.fail_after(10):
                await decided.wait()
            return "read"
        if seen == 3:
            return "paid, with work around it"
        steps = [("work", {"step": 1}), ("pay", {"to": "ann"}), ("work", {"step": 2})]
        name, arguments = steps[seen]
        return AssistantMessage(
            tool_calls=(ToolCall(id=f"c{seen}", name=name, arguments=json.dumps(arguments)),)
        )

    service = Executor(
        [
            Role(name="payer", tools=("pay", "work"), approvals=Approvals(tools=("pay",))),
            Role(name="reader"),
        ],
        FunctionModel(answer),
        tools=[pay, work],
        aggregator="concat",
        policy=Policy(worker_timeout_s=0.6, failure="best_effort"),
        store=tmp_path / "runs.db",
    )
    plan = [Subtask(id="payer", role="payer", instruction="Pay ann."),
            Subtask(id="reader", role="reader", instruction="Read.")]  # fmt: skip
    results = []

    async def run() -> None:
        results.append(await service.run(TASK, subtasks=plan, run_id="r1"))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        with anyio.fail_after(30):
            while not await service.pending("r1"):  # noqa: ASYNC110 (as a web page polls)
                await anyio.sleep(0.01)
        await service.decide("r1", "c1", approve=True)
        decided.set()
    (done,) = results
    assert done.subtasks["reader"].status == "ok"
    payer = done.subtasks["payer"]
    assert payer.status == "failed"
    assert payer.error is not None
    assert payer.error.type == "WorkerTimeout"


def _resume_in_a_process(
    db: Path, effects: Path, crash: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.support.approvals", str(db), str(effects), "r1", crash],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


async def test_decided_here_resumed_in_another_process(tmp_path: Path) -> None:
    db, effects = tmp_path / "runs.db", tmp_path / "effects.txt"
    first = executor(db, effects)
    await first.run(TASK, subtasks=plan(2), run_id="r1")
    await first.decide("r1", "pay_1", approve=True)
    first.store.close()  # type: ignore[union-attr]
    child = _resume_in_a_process(db, effects)
    assert child.returncode == 0, child.stderr
    assert json.loads(child.stdout) == {"status": "ok", "payer": "payer saw: ok: paid 120 to ann"}
    assert effects.read_text() == "paid 120 to ann\n"


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
@pytest.mark.parametrize("crash", ["before", "after"])
async def test_a_crash_between_decision_and_outcome_never_repeats_the_effect(
    tmp_path: Path, crash: str
) -> None:
    db, effects = tmp_path / "runs.db", tmp_path / "effects.txt"
    first = executor(db, effects)
    await first.run(TASK, subtasks=plan(1), run_id="r1")
    await first.decide("r1", "pay_1", approve=True)
    first.store.close()  # type: ignore[union-attr]
    killed = _resume_in_a_process(db, effects, crash)
    assert killed.returncode == -signal.SIGKILL
    child = _resume_in_a_process(db, effects)
    assert child.returncode == 0, child.stderr
    result = json.loads(child.stdout)
    if crash == "before":  # its intent was journaled: never run again, reported unknown
        assert not effects.exists()
    else:
        assert effects.read_text() == "paid 120 to ann\n"
    assert result["payer"].startswith("payer saw: unknown: Outcome unknown")


async def test_a_subtask_after_a_waiting_one_waits_too_and_runs_on_resume(tmp_path: Path) -> None:
    db, effects = tmp_path / "runs.db", tmp_path / "effects.txt"
    subtasks = [
        *plan(1),
        Subtask(id="after", role="reader", instruction="read", depends_on=("payer",)),
    ]
    first = executor(db, effects, failure="fail_fast")  # waiting is not a failure
    waiting = await first.run(TASK, subtasks=subtasks, run_id="r1")
    assert waiting.status == "waiting"
    assert {k: s.status for k, s in waiting.subtasks.items()} == {
        "payer": "waiting", "r0": "ok", "after": "waiting",
    }  # fmt: skip
    assert waiting.failures == []
    await first.decide("r1", "pay_1", approve=True)
    done = await executor(db, effects, failure="fail_fast").resume("r1")
    assert {k: s.status for k, s in done.subtasks.items()} == {
        "payer": "ok", "r0": "ok", "after": "ok",
    }  # fmt: skip
    assert "payer (payer)" in done.subtasks["after"].worker.transcript.messages[1].content  # type: ignore[union-attr]


async def test_a_call_still_undecided_waits_again_on_resume(tmp_path: Path) -> None:
    db, effects = tmp_path / "runs.db", tmp_path / "effects.txt"
    waiting = await executor(db, effects).run(TASK, subtasks=plan(1), run_id="r1")
    again = await executor(db, effects).resume("r1")
    assert again.status == "waiting"
    assert again.pending == waiting.pending  # the same call, asked at the same time
    assert again.subtasks["r0"].ok  # finished before: not run again


@pytest.mark.parametrize("where", ["here", "elsewhere"])
async def test_a_decision_made_while_the_run_goes_on_lets_the_paused_worker_go_on(
    tmp_path: Path, where: str
) -> None:
    """Made with the Executor that carries the run, or recorded through the store by
    another (another process, the web page's server): the paused worker goes on, in the
    same run, which ends with an answer, not ``waiting`` with nothing left to decide."""
    db, effects = tmp_path / "runs.db", tmp_path / "effects.txt"
    service = executor(db, effects, read_s=0.3)
    deciding = service if where == "here" else executor(db, effects)
    results = []

    async def run() -> None:
        results.append(await service.run(TASK, subtasks=plan(2), run_id="r1"))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        with anyio.fail_after(30):
            while not await deciding.pending("r1"):  # noqa: ASYNC110 (as a web page polls)
                await anyio.sleep(0.01)
        assert not results  # the readers still read
        await deciding.decide("r1", "pay_1", approve=True)
    (done,) = results
    assert done.status == "ok"  # one run: no resume needed
    assert payer_saw(done) == "payer saw: ok: paid 120 to ann"
    assert effects.read_text() == "paid 120 to ann\n"
    assert done.pending == []


async def test_a_decision_made_here_settles_a_call_the_approver_asks_about_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's approver asks a person, who never answers, and the call is decided
    with the Executor that carries the run: the worker goes on with it at once, not at
    its next look in the store (an hour here), and the approver's question is withdrawn."""
    monkeypatch.setattr(worker_record, "LOOK_EVERY_S", 3600.0)
    db, effects = tmp_path / "runs.db", tmp_path / "effects.txt"
    asked, withdrawn = anyio.Event(), anyio.Event()

    async def person(request: ApprovalRequest) -> Decision:
        asked.set()
        try:
            await anyio.sleep_forever()
        finally:
            withdrawn.set()
        raise AssertionError("unreachable")

    service = executor(db, effects, approver=person)
    results = []

    async def run() -> None:
        results.append(await service.run(TASK, subtasks=plan(1), run_id="r1"))

    with anyio.fail_after(30):  # (an hour without the bell)
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await asked.wait()
            while not await service.pending("r1"):  # noqa: ASYNC110 (kept as it is asked)
                await anyio.sleep(0.01)
            await service.decide("r1", "pay_1", approve=True)
    (done,) = results
    assert done.status == "ok"
    assert withdrawn.is_set()
    assert payer_saw(done) == "payer saw: ok: paid 120 to ann"
    assert effects.read_text() == "paid 120 to ann\n"


async def test_a_run_whose_task_holds_a_secret_learned_since_it_was_kept_goes_on(
    tmp_path: Path,
) -> None:
    """A run kept before a secret in its task was known (the store has that task in the
    clear) goes on when run again with its own task once the secret is known: it was
    refused as started with another task, the task given masked and the kept one not,
    and the refusal quoted the kept task, secret and all."""
    db, effects = tmp_path / "runs.db", tmp_path / "effects.txt"
    card = "4111-1111-1111-1111"
    task = f"{TASK} with card {card}"
    with isolated():
        assert (await executor(db, effects).run(task, subtasks=plan(1), run_id="r1")).pending
        add_secret(card, "card number")
        again = executor(db, effects)
        await again.decide("r1", "pay_1", approve=True)
        done = await again.run(task, subtasks=plan(1), run_id="r1")
        assert done.status == "ok"
        with pytest.raises(ConfigError) as refused:
            await again.run(f"{TASK} with another card", subtasks=plan(1), run_id="r1")
    assert payer_saw(done) == "payer saw: ok: paid 120 to ann"
    assert "another task" in str(refused.value)
    assert card not in str(refused.value)


async def test_a_decision_recorded_as_the_run_ends_waiting_continues_it_before_it_returns(
    tmp_path: Path,
) -> None:
    """Decided elsewhere once the payer ended waiting and before the run records its
    end: the run, ended ``waiting`` with nothing undecided, continues at once."""
    db, effects = tmp_path / "runs.db", tmp_path / "effects.txt"

    def decide_elsewhere(event: Event) -> None:
        if not isinstance(event, WorkerFinished):
            return
        if (event.worker, event.status) == ("payer", "waiting"):  # decided before it returns
            deciding = threading.Thread(target=anyio.run, args=(decide, db, effects))
            deciding.start()
            deciding.join()

    service = executor(db, effects)
    done = await service.run(TASK, subtasks=plan(1), run_id="r1", on_event=[decide_elsewhere])
    assert done.status == "ok"
    assert payer_saw(done) == "payer saw: ok: paid 120 to ann"
    assert effects.read_text() == "paid 120 to ann\n"
    summary = service.store.find("r1")  # type: ignore[union-attr]
    assert summary is not None
    assert summary.status == "ok"


async def decide(db: Path, effects: Path) -> None:
    elsewhere = executor(db, effects)
    try:
        await elsewhere.decide("r1", "pay_1", approve=True)
    finally:
        elsewhere.store.close()  # type: ignore[union-attr]
