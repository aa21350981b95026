"""A run tells its listeners of each call that waits for a person's decision
(``approval.requested``) and of the decision its worker goes on with
(``approval.decided``): a service learns that a person is needed from the run's
events, while the other workers go on, instead of polling ``Executor.pending``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio

from honeycomb import (
    ApprovalRequest,
    Decision,
    Event,
    Executor,
    Policy,
    Subtask,
)
from honeycomb.events import ApprovalDecided, ApprovalRequested, ToolCallStarted, WorkerFinished
from runtime.secrets import add_secret
from tests.support.approvals import payer_beside_reader

PASSWORD = "pw-7f3e9a1c2b"
DSN = f"postgres://ann:{PASSWORD}@db/pay"
PLAN = [
    Subtask(id="payer", role="payer", instruction="Pay ann."),
    Subtask(id="reader", role="reader", instruction="Read."),
]


def _hearing(heard: list[Event], payer_done: anyio.Event) -> Callable[[Event], None]:
    """A listener that keeps what it hears in ``heard`` and sets ``payer_done`` as the
    payer's worker finishes."""

    def listen(event: Event) -> None:
        heard.append(event)
        if isinstance(event, WorkerFinished) and event.worker == "payer":
            payer_done.set()

    return listen


def _service(store: Path | None, payer_done: anyio.Event, **options: object) -> Executor:
    """The payer beside a reader (:func:`tests.support.approvals.payer_beside_reader`),
    its call holding a password."""
    executor = payer_beside_reader(store, payer_done, {"to": "ann", "dsn": DSN}, **options)
    add_secret(PASSWORD, "password", owner=executor)
    return executor


async def test_a_stream_is_told_of_a_call_waiting_in_the_store_and_decides_it_as_the_run_goes_on(
    tmp_path: Path,
) -> None:
    """No event said that the payer paused on a call waiting in the store: the stream
    heard of it only as ``worker.finished`` (status ``waiting``) once the whole run
    ended, so a service had to poll ``pending``. Now ``approval.requested`` comes as the
    call starts waiting (its secret masked, as the store keeps it), the consumer decides
    it from the stream while the reader goes on, and ``approval.decided`` says who."""
    payer_done = anyio.Event()
    service = _service(tmp_path / "runs.db", payer_done)
    seen: list[Event] = []
    async with service.stream("pay and read", subtasks=PLAN, run_id="r1") as events:
        async for event in events:
            seen.append(event)
            if isinstance(event, ApprovalRequested):
                assert not payer_done.is_set()  # the reader still reads
                await service.decide(
                    "r1", event.call_id, approve=True, worker=event.worker, by="ann"
                )
            if isinstance(event, WorkerFinished) and event.worker == "payer":
                payer_done.set()
    result = events.result
    assert result is not None
    assert result.status == "ok"  # one run: decided as it went on
    assert result.subtasks["payer"].text == "payer saw: paid ann"
    (asked,) = [e for e in seen if isinstance(e, ApprovalRequested)]
    assert (asked.worker, asked.run_id, asked.turn, asked.call_id) == ("payer", "r1", 1, "c1")
    assert (asked.tool, asked.role, asked.asked, asked.deadline) == ("pay", "payer", "store", None)
    assert asked.arguments == {"to": "ann", "dsn": "postgres://ann:[password hidden]@db/pay"}
    assert asked.why == "role 'payer' asks for approval of 'pay'"
    (decided,) = [e for e in seen if isinstance(e, ApprovalDecided)]
    assert (decided.worker, decided.call_id, decided.approved, decided.by) == (
        "payer",
        "c1",
        True,
        "ann",
    )
    assert not decided.edited
    ran = next(e for e in seen if isinstance(e, ToolCallStarted) and e.tool == "pay")
    assert seen.index(asked) < seen.index(decided) < seen.index(ran)


async def test_a_listener_is_told_before_the_approver_asks_and_of_its_answer() -> None:
    """With an approver, ``approval.requested`` (asked ``approver``) comes before it is
    asked, and ``approval.decided`` carries its decision and who made it."""
    payer_done = anyio.Event()
    heard: list[Event] = []
    told_first: list[list[str]] = []

    async def approver(request: ApprovalRequest) -> Decision:
        told_first.append([e.kind for e in heard if e.kind.startswith("approval.")])
        return Decision.denied("not today", by="bob")

    listen = _hearing(heard, payer_done)
    service = _service(None, payer_done, approver=approver)
    result = await service.run("pay and read", subtasks=PLAN, on_event=[listen])
    assert result.subtasks["payer"].text == "payer saw: denied: not today"
    assert told_first == [["approval.requested"]]
    (asked,) = [e for e in heard if isinstance(e, ApprovalRequested)]
    assert asked.asked == "approver"
    assert PASSWORD not in asked.arguments["dsn"]
    (decided,) = [e for e in heard if isinstance(e, ApprovalDecided)]
    assert (decided.approved, decided.reason, decided.by) == (False, "not today", "bob")


async def test_a_call_whose_time_runs_out_is_told_denied_by_the_time_limit(tmp_path: Path) -> None:
    """A call nobody decides in time: its ``approval.requested`` says its deadline, and
    its ``approval.decided`` the denial, by the time limit, as its worker goes on."""
    payer_done = anyio.Event()
    heard: list[Event] = []

    listen = _hearing(heard, payer_done)
    service = _service(tmp_path / "runs.db", payer_done, policy=Policy(approval_timeout_s=0.1))
    result = await service.run("pay and read", subtasks=PLAN, run_id="r1", on_event=[listen])
    assert result.status == "ok"
    (asked,) = [e for e in heard if isinstance(e, ApprovalRequested)]
    assert asked.deadline is not None
    (decided,) = [e for e in heard if isinstance(e, ApprovalDecided)]
    assert not decided.approved
    assert decided.by == "the time limit (approval_timeout_s)"
    assert decided.reason == "no decision within 0.1s"


async def test_a_call_its_approver_did_not_decide_in_time_is_denied_by_the_time_limit(
    tmp_path: Path,
) -> None:
    """The run's approver is asked and never answers: the call is denied once its
    ``approval_timeout_s`` passes, and that was told and kept as decided by the run's
    approver, who decided nothing (the page showed it so beside a call of the same
    run denied by the time limit as it waited in the store)."""
    payer_done = anyio.Event()
    heard: list[Event] = []

    listen = _hearing(heard, payer_done)

    async def away(request: ApprovalRequest) -> Decision:
        await anyio.sleep_forever()
        raise AssertionError("never answers")

    service = _service(
        tmp_path / "runs.db", payer_done, policy=Policy(approval_timeout_s=0.1), approver=away
    )
    result = await service.run("pay and read", subtasks=PLAN, run_id="r1", on_event=[listen])
    assert result.subtasks["payer"].text == "payer saw: denied: no decision within 0.1s"
    (decided,) = [e for e in heard if isinstance(e, ApprovalDecided)]
    assert (decided.approved, decided.by) == (False, "the time limit (approval_timeout_s)")
    assert service.store is not None
    (entry,) = await service.store.approvals_of("r1")
    assert entry.decided_by == "the time limit (approval_timeout_s)"
