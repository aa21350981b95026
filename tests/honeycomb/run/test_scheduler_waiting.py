"""Subtasks after one that waits for a person's decision wait too, however far down
the chain they are, and run on resume once it is decided."""

from __future__ import annotations

from pathlib import Path

import anyio

from honeycomb import Subtask
from tests.support.approvals import TASK, executor, plan


async def test_a_chain_after_a_waiting_subtask_waits_and_runs_on_resume(tmp_path: Path) -> None:
    db, effects = tmp_path / "runs.db", tmp_path / "effects.txt"
    subtasks = [
        *plan(1),
        Subtask(id="after", role="reader", instruction="read", depends_on=("payer",)),
        Subtask(id="last", role="reader", instruction="read", depends_on=("after",)),
    ]
    with anyio.fail_after(5):  # 'last' waited for 'after', which never ended: a deadlock
        waiting = await executor(db, effects).run(TASK, subtasks=subtasks, run_id="r1")
    assert waiting.status == "waiting"
    assert {k: s.status for k, s in waiting.subtasks.items()} == {
        "payer": "waiting", "r0": "ok", "after": "waiting", "last": "waiting",
    }  # fmt: skip
    await executor(db, effects).decide("r1", "pay_1", approve=True)
    with anyio.fail_after(5):
        done = await executor(db, effects).resume("r1")
    assert {k: s.status for k, s in done.subtasks.items()} == {
        "payer": "ok", "r0": "ok", "after": "ok", "last": "ok",
    }  # fmt: skip
