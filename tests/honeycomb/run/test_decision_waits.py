"""A worker paused for a decision waits through a store that fails to read a while (a
PostgreSQL server restarting): the wait reads again at its next look."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from honeycomb.errors import StoreError
from tests.support.approvals import TASK, executor, payer_saw, plan


async def test_a_paused_worker_waits_through_reads_of_the_store_that_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scheduler's wait for a decision let a failed read through: the paused worker
    failed with the store's error, though its call was decided a moment later."""
    db, effects = tmp_path / "runs.db", tmp_path / "effects.txt"
    service, deciding = executor(db, effects, read_s=0.3), executor(db, effects)
    store = service.store
    assert store is not None
    read = store.approvals_of
    failed = anyio.Event()
    away = False

    async def approvals_of(run_id: str) -> list[object]:
        if away:
            failed.set()
            raise StoreError("cannot connect to the run store: the server is away", path="-")
        return list(await read(run_id))

    monkeypatch.setattr(store, "approvals_of", approvals_of)
    results = []

    async def run() -> None:
        results.append(await service.run(TASK, subtasks=plan(2), run_id="r1"))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        with anyio.fail_after(30):
            while not await deciding.pending("r1"):  # noqa: ASYNC110 (as a web page polls)
                await anyio.sleep(0.01)
            away = True
            await failed.wait()  # the paused worker's wait read, and failed
        away = False
        await deciding.decide("r1", "pay_1", approve=True)
    (done,) = results
    assert done.status == "ok"
    assert payer_saw(done) == "payer saw: ok: paid 120 to ann"
    assert effects.read_text() == "paid 120 to ann\n"
