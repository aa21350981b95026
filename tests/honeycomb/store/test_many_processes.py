"""Many processes, one PostgreSQL store, against a real server: processes resuming the
same crashed runs at once carry each run in one of them, with no side effect twice; a
call waiting in one process is approved through another's ``honeycomb serve``, which
continues the run; a run waits while the database restarts and goes on; a connection
dropped as it commits fails the write clearly, and the store holds all of the
transaction or none of it. (A run started in one process, killed and resumed in another
is ``test_crash.py``'s, on both stores.)"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import anyio
import httpx
import pytest

from honeycomb.errors import RunFailed, StoreError
from honeycomb.store import RunStore
from tests.support import ROOT
from tests.support.durable import TASK, Setup, calls_by_worker, plan
from tests.support.many_runs import WORKERS
from tests.support.postgres import PostgresServer
from tests.support.stores import ON_POSTGRES, change, query

pytestmark = [
    ON_POSTGRES,
    pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="kills processes with SIGKILL"),
]

RUNS = ["r0", "r1", "r2"]
RESUMERS = 4


@pytest.fixture
def url(postgres: PostgresServer) -> str:
    """A new store's URL (its schema is made by the first write)."""
    return postgres.url()


def many_runs(url: str, folder: Path, life: str, *, mode: str) -> list[str]:
    return [sys.executable, "-m", "tests.support.many_runs", url, str(folder), life, mode, *RUNS]


def test_processes_resuming_the_same_crashed_runs_at_once_carry_each_once(
    url: str, tmp_path: Path
) -> None:
    first = subprocess.Popen(many_runs(url, tmp_path, "1", mode="run"), cwd=ROOT)
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"effects-{run}.txt").exists() for run in RUNS):
        assert first.poll() is None, "the runs ended before they could be killed"
        assert time.monotonic() < deadline, "the runs made no side effect"
        time.sleep(0.005)
    first.send_signal(signal.SIGKILL)
    first.wait()

    command = functools.partial(many_runs, url, tmp_path, mode="resume")
    resumers = [
        subprocess.Popen(command(str(life)), cwd=ROOT, stdout=subprocess.PIPE, text=True)
        for life in range(2, 2 + RESUMERS)
    ]
    told = [json.loads(r.communicate(timeout=120)[0].splitlines()[-1]) for r in resumers]
    assert [r.returncode for r in resumers] == [0] * RESUMERS, told
    assert all(set(outcomes.values()) <= {"ok", "busy"} for outcomes in told), told
    for run in RUNS:
        # Exactly one process made model calls for it after the crash: it carried it.
        calls = calls_by_worker(tmp_path / f"calls-{run}.txt")
        carriers = {life for made in calls.values() for _, life in made if life != "1"}
        assert len(carriers) == 1, (run, carriers)
        effects = Counter((tmp_path / f"effects-{run}.txt").read_text().splitlines())
        assert max(effects.values()) == 1, (run, effects)  # no side effect twice
        unknown = {
            json.loads(arguments)["line"]
            for (arguments,) in query(
                url, "SELECT arguments FROM journal WHERE run_id = ? AND status = 'unknown'", (run,)
            )
        }
        for worker in range(WORKERS):
            for step in (1, 2):
                line = f"w{worker}-{step}"
                assert effects[line] == 1 or line in unknown, (run, line)
    assert sorted(query(url, "SELECT run_id, status FROM runs")) == [(r, "ok") for r in RUNS]
    assert query(url, "SELECT count(*) FROM leases") == [(0,)]


def test_a_call_waiting_in_one_process_is_approved_through_another_ones_serve(
    url: str, tmp_path: Path
) -> None:
    environment = {
        **os.environ, "PYTHONPATH": str(ROOT), "HONEYCOMB_DEMO_TOOL_LATENCY": "0",
        "HONEYCOMB_OUTBOX": str(tmp_path / "outbox"),
    }  # fmt: skip
    demo = [sys.executable, "-m", "honeycomb", "demo", "--approve", "--plain", "--latency", "0"]
    waiting = subprocess.run(
        [*demo, "--store", url, "--run-id", "d1"], capture_output=True, text=True,
        cwd=tmp_path, env=environment, timeout=120, check=False,
    )  # fmt: skip
    assert waiting.returncode == 3, waiting.stderr  # off a terminal, the run waits
    assert f"--store {shlex.quote(url)}" in waiting.stdout  # how to go on names the store
    [asked] = RunStore(url).approvals("d1")

    serve = [sys.executable, "-m", "honeycomb", "serve", "--store", url, "--port", "0"]
    server = subprocess.Popen(
        serve, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env=environment,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        address = re.search(r"(http://127\.0\.0\.1:\d+/hc-[0-9a-f]{16}/)\?token=(\S+)", line)
        assert address is not None, line
        decided = httpx.post(
            f"{address[1]}runs/d1/calls/{asked.pending.call_id}/decision",
            data={"decision": "approve"},
            headers={"authorization": f"Bearer {address[2]}"},
        )
        assert decided.status_code == 303, decided.text
        deadline = time.monotonic() + 60
        while (found := RunStore(url).find("d1")) is None or found.status != "ok":
            assert time.monotonic() < deadline, found
            time.sleep(0.05)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=15)
    [entry] = RunStore(url).approvals("d1")
    assert entry.decision is not None
    assert entry.decision.approve
    assert len(list((tmp_path / "outbox").iterdir())) == 1  # sent once, by the server's process


async def test_a_run_waits_while_the_database_restarts_and_goes_on(
    postgres: PostgresServer, url: str, tmp_path: Path
) -> None:
    setup = Setup(tmp_path / "effects.txt", tmp_path / "calls.txt")
    # Both workers wait in their second side effect, its intent committed: no write of
    # theirs is committing as the server stops (one lost as it committed would fail its
    # worker, as it must).
    setup.gate, setup.held = anyio.Event(), {"w0-2", "w1-2"}
    store = RunStore(url)
    assert await store.load("r1") is None  # the pool of its reads has a connection now
    async with anyio.create_task_group() as tg:
        done: list[str] = []

        async def run() -> None:
            result = await setup.executor(store).run(TASK, subtasks=plan(2), run_id="r1")
            done.append(result.status)

        tg.start_soon(run)
        with anyio.fail_after(30):
            await setup.holding.wait()
            await anyio.to_thread.run_sync(postgres.stop)  # every connection dropped
            await anyio.to_thread.run_sync(postgres.start)
        setup.gate.set()  # its outcome, and all that follows, on new connections
    assert done == ["ok"]
    stored = await store.load("r1")  # read on a connection of the pool made anew too
    assert stored is not None
    assert stored.status == "ok"
    store.close()
    assert Counter(setup.effects.read_text().splitlines()) == Counter(
        ["w0-1", "w0-2", "w1-1", "w1-2"]
    )
    assert query(url, "SELECT status FROM runs") == [("ok",)]
    assert query(url, "SELECT count(*) FROM journal WHERE status IS NULL") == [(0,)]


DROP_AT_COMMIT = [
    "CREATE SEQUENCE drops",
    "CREATE FUNCTION drop_connection() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "IF nextval('drops') = 1 THEN PERFORM pg_terminate_backend(pg_backend_pid()); END IF; "
    "RETURN NULL; END $$",
    "CREATE CONSTRAINT TRIGGER drop_at_commit AFTER INSERT ON journal "
    "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION drop_connection()",
]
"""The first transaction that journals a call loses its connection as it commits (a
deferred trigger runs then; the sequence counts outside transactions)."""


async def test_a_connection_dropped_as_it_commits_fails_clearly_and_writes_nothing_half(
    url: str, tmp_path: Path
) -> None:
    store = RunStore(url)
    await store.open()  # the store's tables, then the trigger on them
    change(url, *((statement, ()) for statement in DROP_AT_COMMIT))
    setup = Setup(tmp_path / "effects.txt", tmp_path / "calls.txt")
    with pytest.raises(RunFailed) as caught:
        await setup.executor(store).run(TASK, subtasks=plan(1), run_id="r1")
    assert caught.value.partial is not None
    error = caught.value.partial.subtasks["w0"].error
    assert error is not None
    assert error.type == "StoreError"
    assert "lost as it committed: what was being written may be there or not" in error.message
    assert not setup.effects.exists()  # its intent was not known written: it did not run
    assert query(url, "SELECT count(*) FROM journal") == [(0,)]  # the whole transaction, or none

    again = Setup(setup.effects, setup.calls, life="2")
    resumed = await again.executor(store).resume("r1")
    assert resumed.status == "ok"
    assert setup.effects.read_text().splitlines() == ["w0-1", "w0-2"]
    store.close()
    with pytest.raises(StoreError, match="no run 'r2'"):
        await again.executor(RunStore(url)).resume("r2")
