"""A life whose process died counts to its last sign of life: the run's wall time (its
budget's, shared by every life, and its figures) includes it, as far as its lease's
last heartbeat, on each kind of store."""

from __future__ import annotations

import signal
import sys

import anyio
import pytest

from honeycomb.errors import BudgetExceeded
from tests.support import ROOT
from tests.support.hung_life import RUN_ID, Silent, executor
from tests.support.stores import Where, query

WALL_TIME_S = 3.0
LIVED_S = 1.5
"""How long the first life has lived, as its heartbeat tells, when it is killed."""


async def _lived_s(store: Where) -> float:
    """How long the run's first life has lived by its lease's heartbeat (0: not yet)."""
    try:
        started = query(store, "SELECT started_at FROM lives WHERE run_id = ?", (RUN_ID,))
        beat = query(store, "SELECT heartbeat FROM leases WHERE run_id = ?", (RUN_ID,))
    except Exception:  # the child has not made the store yet
        return 0.0
    return beat[0][0] - started[0][0] if started and beat else 0.0


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="the test kills with SIGKILL")
async def test_a_killed_life_counts_in_the_wall_time_its_resumed_run_has_left(
    store: Where,
) -> None:
    command = [sys.executable, "-m", "tests.support.hung_life", str(store), str(WALL_TIME_S)]
    child = await anyio.open_process(command, cwd=ROOT, stdout=None, stderr=None)
    try:
        with anyio.fail_after(60):
            while await _lived_s(store) < LIVED_S:
                assert child.returncode is None, "the first life ended before it was killed"
                await anyio.sleep(0.02)
    finally:
        child.send_signal(signal.SIGKILL)
        await child.wait()
    assert child.returncode == -signal.SIGKILL, "the first life ended before it was killed"
    # The first life spent LIVED_S or more of the run's 3 s: the resumed one has 1.5 s
    # at the most, too little for an answer that takes 2 s (it had all 3 s before).
    resumed = executor(store, WALL_TIME_S, Silent(answer_after_s=2.0))
    with pytest.raises(BudgetExceeded) as stopped:
        await resumed.resume(RUN_ID)
    assert stopped.value.limit == "wall_time_s"
    partial = stopped.value.partial
    assert partial is not None
    assert partial.timings.wall_s >= LIVED_S
