"""A side-effecting call's idempotency key (``ToolContext.idempotency_key``) is the same
in every life of its run, so a service that deduplicates makes the effect once even
when a crash cut the call off and the resumed run makes it again; and it is the run's
own: another run (or a run of the same id in another store, or without a store) making
the very same call has another key."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.support.payments import TASK, Payments
from tests.support.processes import killed
from tests.support.stores import Where

PLAN = [("payer", "Pay ann 120.")]


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
async def test_a_call_cut_off_by_a_crash_is_made_again_with_the_same_key(
    store: Where, tmp_path: Path
) -> None:
    db = store  # a process makes the call and is killed; this one resumes the run
    await killed("tests.support.payments", str(db), str(tmp_path), "r1")
    payments = Payments(tmp_path)
    assert len(payments.charges()) == 1  # the charge was made; its outcome is lost

    done = await payments.executor(db).resume("r1")  # idempotent: the call is made again
    assert done.subtasks["s1"].text == "payer saw: ok: receipt for 120 to ann"
    first, again = payments.keys()
    assert first == again  # so the service made the charge once
    assert len(payments.charges()) == 1
    assert first.startswith("honeycomb-")


async def test_the_same_call_of_another_run_has_another_key(tmp_path: Path) -> None:
    payments = Payments(tmp_path)
    here, there = payments.executor(tmp_path / "a.db"), payments.executor(tmp_path / "b.db")
    await here.run(TASK, subtasks=PLAN, run_id="r1")
    await here.run(TASK, subtasks=PLAN, run_id="r2")
    await there.run(TASK, subtasks=PLAN, run_id="r1")  # the same id, in another store
    unstored = payments.executor(None)
    await unstored.run(TASK, subtasks=PLAN, run_id="r1")
    await unstored.run(TASK, subtasks=PLAN, run_id="r1")
    keys = payments.keys()
    assert len(keys) == len(set(keys)) == 5
    assert len(payments.charges()) == 5
