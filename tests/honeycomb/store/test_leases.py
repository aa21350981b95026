"""Leases: one process at a time carries a stored run on; a second gets ``RunBusy``
naming the owner, an expired lease is taken only with ``steal=True``, and an owner
whose lease was taken over cannot write (nor run a side effect) as owner any more."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import anyio
import pytest

from honeycomb import ConfigError, Executor
from honeycomb.cli.main import main
from honeycomb.errors import RunBusy, StoreError
from honeycomb.store import RunStore
from tests.support import ROOT
from tests.support.durable import BUSY, START_AFTER, TASK, Setup, plan
from tests.support.old_stores import write_old_store
from tests.support.stores import Where, change, finished_in_store, query

HOST = socket.gethostname()

posix_only = pytest.mark.skipif(
    not hasattr(signal, "SIGKILL"), reason="kills and stops processes with POSIX signals"
)


def child(files: tuple[Where, Path, Path], life: str, *options: str) -> list[str]:
    paths = [str(p) for p in files]
    return [sys.executable, "-m", "tests.support.durable", *paths, "r1", life, "6", *options]


def forge_lease(db: Where, run_id: str, *, host: str, pid: int, age_s: float, ttl_s: float) -> None:
    """A lease row as another process would have left it."""
    forged = (
        "INSERT INTO leases (run_id, owner, host, pid, heartbeat, ttl_s) "
        "VALUES (?, 'someone-else', ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET "
        "owner = excluded.owner, host = excluded.host, pid = excluded.pid, "
        "heartbeat = excluded.heartbeat, ttl_s = excluded.ttl_s"
    )
    change(db, (forged, (run_id, host, pid, time.time() - age_s, ttl_s)))


def leases(db: Where) -> list[tuple[str, str, int]]:
    return query(db, "SELECT run_id, host, pid FROM leases")


def heartbeat(db: Where, run_id: str) -> tuple[float, float]:
    """The run's lease as the store holds it: its heartbeat (a time) and its TTL."""
    [(beat, ttl_s)] = query(db, "SELECT heartbeat, ttl_s FROM leases WHERE run_id = ?", (run_id,))
    return float(beat), float(ttl_s)


def wait_for(path: Path, process: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + 30
    while not path.exists():
        assert process.poll() is None, f"the child ended before {what}"
        assert time.monotonic() < deadline, f"the child never got to {what}"
        time.sleep(0.005)


def writing(db: Where) -> bool:
    """Whether a process is inside a write transaction of the store (holding SQLite's
    write lock, or a PostgreSQL transaction of Honeycomb's open)."""
    if isinstance(db, str):
        busy = (
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'honeycomb' "
            "AND xact_start IS NOT NULL AND pid <> pg_backend_pid()"
        )
        return int(query(db, busy)[0][0]) > 0
    with contextlib.closing(sqlite3.connect(db, timeout=0, isolation_level=None)) as raw:
        try:
            raw.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:  # locked: another holds the write lock
            return True
        raw.execute("ROLLBACK")
        return False


def stop_between_writes(process: subprocess.Popen[str], db: Where) -> None:
    """Stop ``process`` (SIGSTOP) at a moment it holds no transaction of the store: one
    it were stopped in would lock out every other writer for as long as it is stopped."""
    deadline = time.monotonic() + 30
    while True:
        process.send_signal(signal.SIGSTOP)
        os.waitpid(process.pid, os.WUNTRACED)  # returns once it is stopped
        if not writing(db):
            return
        process.send_signal(signal.SIGCONT)  # let it commit, and try again
        assert time.monotonic() < deadline, "the process never stopped between writes"
        time.sleep(0.005)


def effects_counted(effects: Path) -> Counter[str]:
    return Counter(effects.read_text().splitlines() if effects.exists() else [])


async def stopped_run(db: Where, effects: Path, calls: Path) -> None:
    """Run r1 and cancel it half way: the run is stored, interrupted, its lease free."""
    setup = Setup(effects, calls)
    setup.gate, setup.held = anyio.Event(), {"w0-2"}
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: setup.executor(db).run(TASK, subtasks=plan(2), run_id="r1"))
        with anyio.fail_after(10):
            await setup.holding.wait()
        tg.cancel_scope.cancel()


@posix_only
def test_two_resumes_of_a_killed_run_at_once_one_runs_it_the_other_is_busy(
    files: tuple[Where, Path, Path],
) -> None:
    db, effects, _ = files
    first = subprocess.Popen(child(files, "1", "0.2"), cwd=ROOT, stdout=subprocess.DEVNULL)
    wait_for(effects, first, "its first side effect")
    first.send_signal(signal.SIGKILL)
    first.wait()

    # Started together, once both are ready (one may take seconds more than the other to
    # get there, on a busy machine), and slow enough that the two overlap: whichever
    # takes the lease first is still running when the other asks for it.
    start = effects.with_name("start")
    env = {**os.environ, START_AFTER: str(start)}
    racers = [
        subprocess.Popen(
            child(files, life, "0.5"), cwd=ROOT, stdout=subprocess.PIPE, text=True, env=env
        )
        for life in ("2", "3")
    ]
    for life, racer in zip(("2", "3"), racers, strict=True):
        wait_for(start.with_name(f"start.{life}"), racer, "the start line")
    start.touch()
    outcomes = [(r, json.loads(r.communicate(timeout=120)[0].splitlines()[-1])) for r in racers]
    codes = sorted(r.returncode for r, _ in outcomes)
    assert codes == [0, BUSY], outcomes
    [(winner, done)] = [(r, o) for r, o in outcomes if r.returncode == 0]
    [busy] = [o for r, o in outcomes if r.returncode == BUSY]
    assert done["status"] == "ok"
    assert (busy["host"], busy["pid"], busy["expired"]) == (HOST, winner.pid, False)
    assert f"pid {winner.pid}" in busy["busy"]
    assert HOST in busy["busy"]
    counted = effects_counted(effects)
    assert max(counted.values()) == 1, counted  # no side effect twice
    assert leases(db) == []  # the winner let go when the run ended


async def test_a_live_run_is_not_taken_over_even_with_steal(
    files: tuple[Where, Path, Path],
) -> None:
    db, effects, calls = files
    setup = Setup(effects, calls)
    setup.gate, setup.held = anyio.Event(), {"w0-2"}
    other = Setup(effects, calls, life="2").executor(RunStore(db))
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: setup.executor(RunStore(db)).run(TASK, subtasks=plan(2), run_id="r1"))
        with anyio.fail_after(10):
            await setup.holding.wait()
        with pytest.raises(RunBusy) as caught:
            await other.run(TASK, subtasks=plan(2), run_id="r1")
        busy = caught.value
        assert isinstance(busy, StoreError)
        assert (busy.run_id, busy.host, busy.pid, busy.expired) == ("r1", HOST, os.getpid(), False)
        # Both calls are this process's: it says so, not that another process has it.
        assert busy.here
        assert f"by this process (pid {os.getpid()}): another call of it" in str(busy)
        with pytest.raises(RunBusy, match="not taken over"):
            await other.resume("r1", steal=True)
        setup.gate.set()
    assert effects_counted(effects) == Counter(["w0-1", "w0-2", "w1-1", "w1-2"])
    again = await other.resume("r1")  # ended: its stored result, no lease left behind
    assert again.status == "ok"
    assert leases(db) == []


async def test_a_new_run_id_given_twice_at_once_runs_once(files: tuple[Where, Path, Path]) -> None:
    db, effects, calls = files
    outcomes: list[str] = []

    async def attempt(life: str) -> None:
        try:
            result = (
                await Setup(effects, calls, life=life, latency=0.05)
                .executor(RunStore(db))
                .run(TASK, subtasks=plan(2), run_id="fresh")
            )
            outcomes.append(result.status)
        except RunBusy as exc:
            outcomes.append(f"busy {exc.pid}")

    async with anyio.create_task_group() as tg:
        tg.start_soon(attempt, "1")
        tg.start_soon(attempt, "2")
    assert sorted(outcomes) == [f"busy {os.getpid()}", "ok"]
    assert effects_counted(effects) == Counter(["w0-1", "w0-2", "w1-1", "w1-2"])


async def test_an_expired_lease_is_taken_only_with_steal(files: tuple[Where, Path, Path]) -> None:
    db, effects, calls = files
    await stopped_run(db, effects, calls)
    forge_lease(db, "r1", host="elsewhere", pid=4242, age_s=120, ttl_s=30)
    executor = Setup(effects, calls, life="2").executor(db)
    with pytest.raises(RunBusy) as caught:
        await executor.resume("r1")
    busy = caught.value
    assert (busy.host, busy.pid, busy.expired) == ("elsewhere", 4242, True)
    assert busy.heartbeat_age_s is not None
    assert busy.heartbeat_age_s >= 120
    assert "steal=True (honeycomb resume --force)" in str(busy)
    result = await executor.resume("r1", steal=True)
    assert result.status == "ok"
    assert max(effects_counted(effects).values()) == 1
    assert leases(db) == []


@posix_only
async def test_a_lease_whose_process_is_gone_is_taken_at_once(
    files: tuple[Where, Path, Path],
) -> None:
    db, effects, calls = files
    await stopped_run(db, effects, calls)
    gone = await anyio.open_process([sys.executable, "-c", "pass"])
    await gone.wait()  # reaped: no process has this pid now
    forge_lease(db, "r1", host=HOST, pid=gone.pid, age_s=0, ttl_s=3600)
    result = await Setup(effects, calls, life="2").executor(db).resume("r1")
    assert result.status == "ok"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux tells a zombie in /proc")
async def test_a_lease_whose_process_ended_unreaped_is_taken_at_once(
    files: tuple[Where, Path, Path],
) -> None:
    """A process killed whose parent has not reaped it yet (a service that kills its
    run's process and resumes the run at once) still has its pid: it is gone all the
    same, and its lease is no live one."""
    db, effects, calls = files
    await stopped_run(db, effects, calls)
    ended = await anyio.to_thread.run_sync(ended_unreaped)
    try:
        forge_lease(db, "r1", host=HOST, pid=ended.pid, age_s=0, ttl_s=3600)
        result = await Setup(effects, calls, life="2").executor(db).resume("r1")
    finally:
        await anyio.to_thread.run_sync(ended.wait)
    assert result.status == "ok"


def ended_unreaped() -> subprocess.Popen[bytes]:
    """A process that has ended, not reaped yet: a zombie, its pid still taken."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)  # returns once it ended
    return process


async def test_the_lease_is_renewed_while_the_run_goes(files: tuple[Where, Path, Path]) -> None:
    db, effects, calls = files
    ttl = 1.2  # renewed every 0.3 s: a heartbeat late by most of a second still keeps it
    setup = Setup(effects, calls)
    setup.gate, setup.held = anyio.Event(), {"w0-2"}
    async with anyio.create_task_group() as tg:
        executor = setup.executor(RunStore(db, lease_ttl_s=ttl))
        tg.start_soon(lambda: executor.run(TASK, subtasks=plan(1), run_id="r1"))
        with anyio.fail_after(10):
            await setup.holding.wait()
        # Wait for a heartbeat more than a TTL after the one seen now: the lease taken
        # then would have expired since, were it not renewed.
        first, _ = heartbeat(db, "r1")
        deadline = time.monotonic() + 10 * ttl
        while heartbeat(db, "r1")[0] <= first + ttl:
            assert time.monotonic() < deadline, "the lease's heartbeat was not renewed"
            await anyio.sleep(0.02)
        other = Setup(effects, calls, life="2").executor(db)
        with pytest.raises(RunBusy) as caught:
            await other.resume("r1", steal=True)
        assert caught.value.expired is False
        assert caught.value.heartbeat_age_s is not None
        assert caught.value.heartbeat_age_s < ttl
        setup.gate.set()


async def test_the_lease_is_let_go_however_the_run_ends(files: tuple[Where, Path, Path]) -> None:
    db, effects, calls = files
    await stopped_run(db, effects, calls)  # cancelled
    assert leases(db) == []
    executor = Setup(effects, calls).executor(db)
    with pytest.raises(ConfigError):  # a wrong task is refused after the lease is taken
        await executor.run("another task", run_id="r1")
    assert leases(db) == []
    await executor.resume("r1")  # ends ok
    await executor.resume("r1")  # returns the stored result
    assert leases(db) == []


@posix_only
def test_an_owner_whose_lease_was_taken_over_stops_writing(
    files: tuple[Where, Path, Path],
) -> None:
    """The owner is stopped (SIGSTOP: alive, but its heartbeats stop) past its TTL, the
    run is stolen and finished, then the owner goes on: none of its side effects may
    run, and it must not record the run as its own."""
    db, effects, _ = files
    owner = subprocess.Popen(
        child(files, "1", "0.2", "1.0"), cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    wait_for(effects, owner, "its first side effect")
    stop_between_writes(owner, db)
    try:
        # Until its lease expired, as any process reading the store sees it.
        deadline = time.monotonic() + 30
        while time.time() - (lease := heartbeat(db, "r1"))[0] <= lease[1]:
            assert time.monotonic() < deadline, "the stopped owner's lease never expired"
            time.sleep(0.02)
        thief = subprocess.run(
            child(files, "2", "0.0", "30", "steal"), cwd=ROOT, capture_output=True, text=True,
            timeout=60,
        )  # fmt: skip
        assert thief.returncode == 0, thief.stdout + thief.stderr[-2000:]
        assert json.loads(thief.stdout.splitlines()[-1])["status"] == "ok"
    finally:
        owner.send_signal(signal.SIGCONT)
    out, _ = owner.communicate(timeout=60)
    assert owner.returncode == BUSY, out
    assert "taken over" in json.loads(out.splitlines()[-1])["busy"]
    counted = effects_counted(effects)
    # A call under way when the owner was stopped may end after it goes on (the thief
    # reported it as of unknown outcome); no call may start after the lease was lost.
    assert max(counted.values()) == 1, counted
    assert query(db, "SELECT status FROM runs WHERE run_id = 'r1'") == [("ok",)]


def test_resume_names_the_owner_and_force_takes_an_expired_lease(
    fast_demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    args = ["--store", str(db), "--plain", "--model", "offline"]
    assert main(["demo", "--latency", "0", "--run-id", "trip", *args]) == 0
    with sqlite3.connect(db) as raw:
        raw.execute("UPDATE runs SET status = 'interrupted', result = NULL")
    capsys.readouterr()

    forge_lease(db, "trip", host="elsewhere", pid=4242, age_s=1, ttl_s=30)
    assert main(["resume", "trip", *args]) == 2
    err = capsys.readouterr().err
    assert "pid 4242 on host 'elsewhere'" in err
    assert "not taken over" in err
    assert main(["resume", "trip", "--force", *args]) == 2  # live: --force does not pre-empt

    forge_lease(db, "trip", host="elsewhere", pid=4242, age_s=120, ttl_s=30)
    assert main(["resume", "trip", *args]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["resume", "trip", "--force", *args]) == 0
    assert "Answer:" in capsys.readouterr().out


def test_a_store_without_leases_from_the_first_schema_is_upgraded(tmp_path: Path) -> None:
    """A store written before leases existed gets its leases table on first write."""
    db = tmp_path / "runs.db"
    empty = tmp_path / "empty.db"
    anyio.run(RunStore(empty).open)
    write_old_store(db, 1, empty)  # as Honeycomb wrote it before leases existed
    executor: Executor = Setup(tmp_path / "e", tmp_path / "c").executor(db)
    result = anyio.run(lambda: executor.run(TASK, subtasks=plan(1), run_id="x"))
    assert result.status == "ok"
    assert leases(db) == []


def saved_turns(db: Where) -> int:
    """Turns the workers' saved states hold so far (0 before the store has any)."""
    if isinstance(db, Path) and not db.exists():
        return 0
    try:
        return int(query(db, "SELECT coalesce(sum(turn), 0) FROM workers")[0][0] or 0)
    except Exception:  # before the schema was written
        return 0


@posix_only
def test_a_run_whose_process_died_is_listed_interrupted_with_what_it_had_spent(
    files: tuple[Where, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    db = files[0]
    process = subprocess.Popen(child(files, "1", "0.5"), cwd=ROOT, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while saved_turns(db) < 2:  # a few turns in, long before its end
        assert process.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline, "the run saved no turn"
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()

    [run] = RunStore(db).runs()
    assert run.status == "interrupted"  # not "running": its process is gone
    assert run.model_calls >= 2
    assert run.input_tokens > 0
    assert main(["runs", "--store", str(db)]) == 0  # the command line reads either store
    line = capsys.readouterr().out.splitlines()[-1]
    assert " interrupted " in line
    assert " 0 model calls" not in line

    # Another host's run: running while its lease is live, interrupted once it expired.
    forge_lease(db, "r1", host="another-host", pid=1, age_s=0, ttl_s=30)
    assert RunStore(db).runs()[0].status == "running"
    forge_lease(db, "r1", host="another-host", pid=1, age_s=60, ttl_s=30)
    assert RunStore(db).runs()[0].status == "interrupted"


async def test_a_live_run_is_listed_running_with_what_its_workers_spent_so_far(
    files: tuple[Where, Path, Path],
) -> None:
    db, effects, calls = files
    setup = Setup(effects, calls)
    setup.gate, setup.held = anyio.Event(), {"w0-2"}  # w0 waits in its second turn
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: setup.executor(RunStore(db)).run(TASK, subtasks=plan(2), run_id="r1"))
        with anyio.fail_after(10):
            await setup.holding.wait()
            await setup.answered("w1").wait()
            await finished_in_store(db, "r1", "w1")  # committed just after its answer
        run = RunStore(db).find("r1")
        assert run is not None
        # w0: two turns and two calls so far (its saved state), not yet the call it waits
        # in: a call counts once its turn has its observations (a life cut off in the
        # turn has its resumed run make the call again); w1: three and three (its result)
        assert (run.status, run.model_calls, run.tool_calls) == ("running", 5, 5)
        assert run.input_tokens > 0
        setup.gate.set()
    assert RunStore(db).find("r1").status == "ok"  # type: ignore[union-attr]


@pytest.mark.parametrize("ttl", [0, -1.0, float("nan"), float("inf")])
def test_a_lease_ttl_that_is_not_seconds_above_zero_is_refused(store: Where, ttl: float) -> None:
    # 0 or below: the writer renewed the leases in a transaction after another, without
    # a pause; NaN and infinity: the writer died, or PostgreSQL refused the value.
    with pytest.raises(ConfigError, match=r"lease_ttl_s is .*a number above 0") as caught:
        RunStore(store, lease_ttl_s=ttl)
    assert caught.value.field == "lease_ttl_s"


async def test_a_lease_ttl_that_never_runs_out_runs_on_each_store(
    files: tuple[Where, Path, Path],
) -> None:
    # PostgreSQL refused a TTL of weeks as the time its sessions may stay idle in a
    # transaction (more than 2**31 ms), where SQLite took it; and a fourth of this one,
    # the writer's wait between heartbeats, is longer than a thread can wait.
    db, effects, calls = files
    store = RunStore(db, lease_ttl_s=1e12)
    result = await Setup(effects, calls).executor(store).run(TASK, subtasks=plan(1), run_id="r1")
    assert result.status == "ok"
    store.close()
