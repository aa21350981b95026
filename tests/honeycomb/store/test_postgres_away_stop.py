"""A run stopped while its PostgreSQL server is away ends in a moment: the record of
its interruption waits for the server briefly, not the writer's half minute."""

from __future__ import annotations

import asyncio
import time

import anyio
import pytest

from honeycomb import Executor, Role, Subtask
from honeycomb.store import RunStore, writer
from honeycomb.testing import FunctionModel
from runtime import ModelRequest
from tests.support.postgres import PostgresServer, away, role_of
from tests.support.stores import ON_POSTGRES

pytestmark = ON_POSTGRES


async def test_a_run_cancelled_while_its_server_is_away_stops_without_the_writers_wait(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C on a run whose server went away waited the writer's whole time of tries
    (30 s) to record that the run was interrupted; the record is a stopping write now,
    which waits :data:`~honeycomb.store.writer.STOPPING_S`."""
    monkeypatch.setattr(writer, "RECONNECT_S", 40 * writer.STOPPING_S)
    url = postgres.url()
    mine = role_of(url, "stopping")
    role = mine.split("//", 1)[1].split("@", 1)[0]
    thinking = anyio.Event()

    async def answer(request: ModelRequest) -> str:
        thinking.set()
        await anyio.sleep_forever()  # until the run is cancelled
        raise AssertionError("unreachable")

    store = RunStore(mine)
    executor = Executor(
        [Role(name="worker", description="Answers.")], FunctionModel(answer), store=store
    )
    subtasks = [Subtask(id="w0", role="worker", instruction="answer")]
    running = asyncio.ensure_future(executor.run("answer", subtasks=subtasks, run_id="r1"))
    await thinking.wait()
    away(url, role)
    began = time.monotonic()
    running.cancel()  # as Ctrl-C cancels the command's run
    with pytest.raises(asyncio.CancelledError) as stopped:
        await running
    took = time.monotonic() - began
    notes = getattr(stopped.value, "__notes__", [])
    assert any("could not record the run as interrupted" in note for note in notes), notes
    assert took < writer.RECONNECT_S / 4, took  # a moment's tries, not the writer's
    store.close()
