"""The run store: runs kept turn by turn in a real SQLite file and in a real PostgreSQL
database (each test that takes ``files`` or ``store`` runs on both), and resumed
without running finished work again or repeating a side effect."""

from __future__ import annotations

import gc
import json
import re
import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from honeycomb import Executor, Role, Subtask, tool
from honeycomb.cli.main import main
from honeycomb.errors import RunMismatch, StoreError
from honeycomb.run.restore import stored_result
from honeycomb.store import RunStore
from honeycomb.store.results import whole_result
from honeycomb.testing import FunctionModel
from runtime import AssistantMessage, ModelRequest, ToolCall, ToolMessage
from tests.support.durable import TASK, Setup, calls_by_worker, plan
from tests.support.stores import Where, change, finished_in_store, query, saved_in_store


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def interrupted_run(
    db: Where, effects: Path, calls: Path, *, idempotent: bool = False
) -> None:
    """w0 finishes; w1 is cancelled in the middle of its second append, after its
    intent was journaled and before it wrote anything."""
    setup = Setup(effects, calls, idempotent=idempotent)
    setup.gate, setup.held = anyio.Event(), {"w1-2"}
    executor = setup.executor(db)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: executor.run(TASK, subtasks=plan(2), run_id="r1"))
        with anyio.fail_after(10):
            await setup.holding.wait()
            await setup.answered("w0").wait()
            await finished_in_store(db, "r1", "w0")
        tg.cancel_scope.cancel()


async def stored_result_text(db: Where, run_id: str) -> str:
    """The run's result as the store gives it back, as JSON."""
    stored = await RunStore(db).load(run_id)
    assert stored is not None
    result = stored_result(stored)
    assert result is not None
    return result.model_dump_json()


async def test_a_run_is_kept_turn_by_turn(files: tuple[Where, Path, Path]) -> None:
    db, effects, calls = files
    result = await Setup(effects, calls).executor(db).run(TASK, subtasks=plan(3), run_id="r1")
    assert result.status == "ok"
    stored = await RunStore(db).load("r1")
    assert stored is not None
    assert stored.status == "ok"
    assert stored.task == TASK
    assert set(stored.workers) == {"w0", "w1", "w2"}
    for worker in stored.workers.values():
        assert worker.status == "ok"
        assert worker.result is not None
        # system and task are rebuilt from the role; the store keeps new messages a
        # row per save: the model's answer asking for a side effect is saved before
        # the effect runs, then its observations (the final answer is in the result)
        assert [seq for seq, _ in worker.messages] == [0, 1, 3, 4]
        assert sorted(e.status or "" for e in worker.journal.values()) == ["ok", "ok"]
    [summary] = RunStore(db).runs()
    assert (summary.run_id, summary.status, summary.workers) == ("r1", "ok", 3)
    assert summary.model_calls == 9
    assert summary.tool_calls == 9
    if isinstance(db, Path):  # a real SQLite file in WAL mode
        assert query(db, "PRAGMA journal_mode") == [("wal",)]
    # the run's result reads back as it was (each subtask's outcome from its row)
    assert await stored_result_text(db, "r1") == result.model_dump_json()


async def test_a_finished_run_gives_its_stored_result_without_calling_the_model(
    files: tuple[Where, Path, Path],
) -> None:
    db, effects, calls = files
    first = await Setup(effects, calls).executor(db).run(TASK, subtasks=plan(2), run_id="r1")

    def never(request: ModelRequest) -> str:
        raise AssertionError("a finished run called its model again")

    executor = Executor(
        [Role(name="worker", description="d")], FunctionModel(never), aggregator="concat",
        store=db,
    )  # fmt: skip
    again = await executor.resume("r1")
    assert again.answer_text == first.answer_text
    assert again.status == "ok"


async def test_a_finished_run_keeps_each_subtasks_outcome_once(
    files: tuple[Where, Path, Path],
) -> None:
    # Each subtask's outcome (its transcript with it) is in its worker's row; the run's
    # result is kept without them, not with every transcript a second time.
    db, effects, calls = files
    first = await Setup(effects, calls).executor(db).run(TASK, subtasks=plan(2), run_id="r1")
    [(kept,)] = query(db, "SELECT result FROM runs WHERE run_id = 'r1'")
    rows = dict(query(db, "SELECT worker, result FROM workers WHERE run_id = 'r1'"))
    assert json.loads(kept)["subtasks"] == {}
    assert {name: json.loads(row)["status"] for name, row in rows.items()} == {
        "w0": "ok", "w1": "ok",
    }  # fmt: skip
    assert await stored_result_text(db, "r1") == first.model_dump_json()


async def test_a_result_kept_whole_as_schema_3_kept_it_reads_back_as_it_was(
    files: tuple[Where, Path, Path],
) -> None:
    db, effects, calls = files
    first = await Setup(effects, calls).executor(db).run(TASK, subtasks=plan(2), run_id="r1")
    # The whole result in the run's row, as schema 3 kept it: it alone must do.
    whole = ("UPDATE runs SET result = ?", (first.model_dump_json(),))
    change(db, whole, ("UPDATE workers SET result = NULL", ()))
    assert await stored_result_text(db, "r1") == first.model_dump_json()


async def test_a_stored_result_missing_a_subtasks_outcome_names_it(
    files: tuple[Where, Path, Path],
) -> None:
    db, effects, calls = files
    await Setup(effects, calls).executor(db).run(TASK, subtasks=plan(2), run_id="r1")
    change(db, ("DELETE FROM workers WHERE worker = 'w1'", ()))
    with pytest.raises(StoreError, match="holds no outcome of its subtask 'w1'") as caught:
        await RunStore(db).load("r1")
    assert str(db) in str(caught.value)


async def test_a_resumed_run_repeats_no_finished_work_and_no_side_effect(
    files: tuple[Where, Path, Path],
) -> None:
    db, effects, calls = files
    await interrupted_run(db, effects, calls)
    stored = await RunStore(db).load("r1")
    assert stored is not None
    assert stored.status == "interrupted"

    setup = Setup(effects, calls, life="2")
    result = await setup.executor(RunStore(db)).run(TASK, run_id="r1")

    assert result.status == "ok"
    made = calls_by_worker(calls)
    assert [c for c in made["w0"] if c[1] == "2"] == []  # w0 had finished: not run again
    # w1 had answered turns 1 and 2; its pending append was picked up, not re-asked
    assert [t for t, life in made["w1"] if life == "2"] == [3]
    assert sorted(lines(effects)) == ["w0-1", "w0-2", "w1-1"]  # each side effect once
    w1 = result.subtasks["w1"].worker
    assert w1 is not None
    observations = [m for m in w1.transcript.messages if isinstance(m, ToolMessage)]
    assert [o.status for o in observations] == ["ok", "ok", "unknown"]
    assert "Outcome unknown" in observations[-1].content
    assert result.usage.model_calls == 6  # both lives together
    # w0's result is the one of the first life, w1's was written in this one
    assert await stored_result_text(db, "r1") == result.model_dump_json()


async def test_an_idempotent_tool_whose_outcome_was_lost_runs_again(
    files: tuple[Where, Path, Path],
) -> None:
    db, effects, calls = files
    await interrupted_run(db, effects, calls, idempotent=True)
    setup = Setup(effects, calls, life="2", idempotent=True)
    result = await setup.executor(db).run(TASK, run_id="r1")
    assert result.status == "ok"
    assert sorted(lines(effects)) == ["w0-1", "w0-2", "w1-1", "w1-2"]


async def test_policy_can_fail_a_worker_whose_side_effect_outcome_is_unknown(
    files: tuple[Where, Path, Path],
) -> None:
    db, effects, calls = files
    await interrupted_run(db, effects, calls)
    setup = Setup(effects, calls, life="2")
    executor = setup.executor(db, on_unknown_outcome="fail")
    result = await executor.run(TASK, run_id="r1")
    assert result.status == "partial"
    failed = result.subtasks["w1"]
    assert failed.status == "failed"
    assert failed.error is not None
    assert failed.error.type == "OutcomeUnknown"
    assert "'append'" in failed.error.message
    assert await stored_result_text(db, "r1") == result.model_dump_json()


async def test_resuming_with_another_task_is_refused(files: tuple[Where, Path, Path]) -> None:
    db, effects, calls = files
    await interrupted_run(db, effects, calls)
    with pytest.raises(RunMismatch, match=r"r1.*another task") as caught:
        await Setup(effects, calls).executor(db).run("something else", run_id="r1")
    assert (caught.value.run_id, caught.value.task) == ("r1", TASK)


async def test_resuming_with_other_subtasks_is_refused_and_leaves_the_run_as_it_was(
    files: tuple[Where, Path, Path],
) -> None:
    db, effects, calls = files
    await interrupted_run(db, effects, calls)  # of plan(2): w0 done, w1 cut off
    executor = Setup(effects, calls, life="2").executor(db)
    with pytest.raises(RunMismatch, match=r"'r1'.*another plan \(its subtasks are w0, w1; "):
        await executor.run(TASK, subtasks=plan(3), run_id="r1")
    changed = [plan(2)[0], Subtask(id="w1", role="worker", instruction="append nothing")]
    with pytest.raises(RunMismatch, match=r"subtask 'w1' differs in its instruction\); resume"):
        await executor.run(TASK, subtasks=changed, run_id="r1")
    assert not any(life == "2" for _, life in calls_by_worker(calls).get("w1", []))
    # its own plan given again goes on, as does a resume: w0 is not run again
    result = await executor.run(TASK, subtasks=plan(2), run_id="r1")
    assert result.status == "ok"
    assert [life for _, life in calls_by_worker(calls)["w0"]] == ["1", "1", "1"]
    # a finished run's answer is its plan's: other subtasks are refused, its own kept
    with pytest.raises(RunMismatch, match=r"another plan \(its subtasks are w0, w1; those"):
        await executor.run(TASK, subtasks=plan(1), run_id="r1")
    assert (await executor.run(TASK, subtasks=plan(2), run_id="r1")) == result


async def test_a_new_run_id_starts_a_new_run_and_unknown_ids_are_named(
    files: tuple[Where, Path, Path],
) -> None:
    db, effects, calls = files
    executor = Setup(effects, calls).executor(db)
    await executor.run(TASK, subtasks=plan(1), run_id="fresh")
    with pytest.raises(StoreError, match="no run 'missing'") as caught:
        await executor.resume("missing")
    assert str(db) in str(caught.value)


async def test_a_store_that_cannot_be_used_names_its_file(tmp_path: Path) -> None:
    bad = tmp_path / "not-a-db.db"
    bad.write_text("this is not sqlite " * 100)
    executor = Setup(tmp_path / "e", tmp_path / "c").executor(bad)
    with pytest.raises(StoreError, match=r"not-a-db\.db"):
        await executor.run(TASK, subtasks=plan(1), run_id="x")


async def test_a_write_whose_waiter_was_cancelled_stands_and_the_store_goes_on(
    store: Where,
) -> None:
    where, store = store, RunStore(store)
    await store.open()
    insert = "INSERT INTO spans (run_id, spans) VALUES (?, '[]')"
    store.write((insert, ("gathered",)))  # the writer waits a moment to gather more
    async with anyio.create_task_group() as tg:
        tg.start_soon(store.commit, (insert, ("abandoned",)))
        await anyio.lowlevel.checkpoint()
        tg.cancel_scope.cancel()  # its waiter goes; the write is queued all the same
    with anyio.fail_after(5):
        await store.commit((insert, ("after",)))
    store.close()
    rows = {r for (r,) in query(where, "SELECT run_id FROM spans")}
    assert rows == {"gathered", "abandoned", "after"}


async def test_call_ids_a_server_repeats_every_turn_are_renamed_once_and_kept_so(
    store: Where, tmp_path: Path
) -> None:
    # The model names its one call "call_0" every turn; the second is cut off mid-call.
    db, effects = store, tmp_path / "effects.txt"
    gate, holding = anyio.Event(), anyio.Event()
    held = {"2"}

    @tool(side_effects=True)
    async def append(line: str) -> str:
        """Append a line."""
        if line in held:
            holding.set()
            await gate.wait()
        with effects.open("a") as f:
            f.write(line + "\n")
        return f"appended {line}"

    requests: list[ModelRequest] = []

    def answer(request: ModelRequest) -> AssistantMessage | str:
        requests.append(request)
        turn = 1 + sum(isinstance(m, AssistantMessage) for m in request.messages)
        if turn <= 2:
            arguments = json.dumps({"line": str(turn)})
            return AssistantMessage(
                tool_calls=(ToolCall(id="call_0", name="append", arguments=arguments),)
            )
        return "done"

    def executor() -> Executor:
        return Executor(
            [Role(name="w", description="d", tools=("append",))], FunctionModel(answer),
            tools=[append], aggregator="concat", store=db,
        )  # fmt: skip

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: executor().run("t", subtasks=[("w", "go")], run_id="r1"))
        with anyio.fail_after(10):
            await holding.wait()
        tg.cancel_scope.cancel()
    held.clear()
    requests.clear()
    result = await executor().resume("r1")

    assert result.status == "ok"
    journal = query(db, "SELECT turn, call_id FROM journal ORDER BY turn")
    assert journal == [(1, "call_0"), (2, "call_0_t2")]  # as the transcript names them
    [last] = requests  # the resumed run: the cut-off call's outcome, then the answer
    sent = [c.id for m in last.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert sent == ["call_0", "call_0_t2"]
    observed = [m for m in last.messages if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.status) for m in observed] == [
        ("call_0", "ok"), ("call_0_t2", "unknown"),
    ]  # fmt: skip
    assert lines(effects) == ["1"]  # the cut-off call is reported, never run again


async def test_a_run_cut_off_before_a_runaways_wrap_up_call_makes_it_when_resumed(
    store: Where,
) -> None:
    # The model repeats lookup(k) until the loop wraps up; the run is cut off during
    # that wrap-up call, once the state before it is in the store.
    asked = anyio.Event()
    requests: list[ModelRequest] = []
    ran: list[str] = []

    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        ran.append(key)
        return f"{key} is 1"

    async def answer(request: ModelRequest) -> AssistantMessage | str:
        requests.append(request)
        if request.tool_choice != "none":
            arguments = json.dumps({"key": "k"})
            call_id = f"call_{len(requests)}"
            return AssistantMessage(
                tool_calls=(ToolCall(id=call_id, name="lookup", arguments=arguments),)
            )
        if not asked.is_set():  # the first life's wrap-up call never returns
            asked.set()
            await anyio.sleep_forever()
        return "k is 1"

    def executor() -> Executor:
        return Executor(
            [Role(name="w", description="d", tools=("lookup",))], FunctionModel(answer),
            tools=[lookup], aggregator="concat", store=store,
        )  # fmt: skip

    async with anyio.create_task_group() as tg:
        subtasks = [Subtask(id="w0", role="w", instruction="look k up")]
        tg.start_soon(lambda: executor().run("t", subtasks=subtasks, run_id="r1"))
        with anyio.fail_after(10):
            await asked.wait()
        await saved_in_store(store, "r1", "w0", repeats=3, turn=4)  # the state before it
        tg.cancel_scope.cancel()
    assert len(requests) == 5  # a call, three repeats, the wrap-up call cut off
    requests.clear()
    result = await executor().resume("r1")

    assert result.status == "ok"
    assert result.subtasks["w0"].output == "k is 1"
    [wrap_up] = requests  # the resumed run makes the wrap-up call, and nothing else
    assert wrap_up.tool_choice == "none"
    assert "You called 'lookup' with the same arguments 4 turns in a row" in str(
        wrap_up.messages[-1].content
    )
    assert ran == ["k"]


def test_a_result_gets_back_the_outcomes_of_its_finished_subtasks_in_plan_order() -> None:
    # b was stopped by a budget: its outcome is in the run's result, not in a row.
    plan = {"subtasks": [{"id": sid} for sid in ("a", "b", "c")]}
    kept = json.dumps({"plan": plan, "subtasks": {"b": {"status": "over_budget"}}})
    rows = {"a": json.dumps({"status": "ok"}), "b": None, "c": json.dumps({"status": "failed"})}

    def damaged(subtask: str) -> StoreError:
        return StoreError(f"no {subtask}", path="runs.db")

    whole = json.loads(whole_result(kept, rows, damaged=damaged))
    assert list(whole["subtasks"].items()) == [
        ("a", {"status": "ok"}), ("b", {"status": "over_budget"}), ("c", {"status": "failed"}),
    ]  # fmt: skip
    full = json.dumps({"plan": plan, "subtasks": {sid: {} for sid in "abc"}})
    assert whole_result(full, {}, damaged=damaged) == full  # kept whole: read as it is
    with pytest.raises(StoreError, match="no c"):
        whole_result(kept, {"a": "{}"}, damaged=damaged)


async def test_a_write_that_starts_the_writer_connects_outside_the_event_loop(
    store: Where, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Connecting to a server takes a while (and up to its timeout when it is down).
    from honeycomb.store.postgres import PostgresDatabase
    from honeycomb.store.sqlite import SQLiteDatabase

    database = SQLiteDatabase if isinstance(store, Path) else PostgresDatabase
    connected_in: list[str] = []
    connect = database.connect

    def recorded(self: Any) -> Any:
        connected_in.append(threading.current_thread().name)
        return connect(self)

    monkeypatch.setattr(database, "connect", recorded)
    kept = RunStore(store)
    await kept.commit(("INSERT INTO spans (run_id, spans) VALUES (?, '[]')", ("r1",)))
    kept.close()
    assert connected_in != [threading.current_thread().name]
    assert len(connected_in) == 1


async def test_the_list_of_runs_keeps_its_columns_for_ids_longer_than_their_column(
    files: tuple[Where, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # An id of more than the column's 12 characters pushed the rest of its row to the
    # right of the header's labels.
    db, effects, calls = files
    for run_id in ("r1", "weekly-report-of-december"):
        await Setup(effects, calls).executor(db).run(TASK, subtasks=plan(1), run_id=run_id)
    assert await anyio.to_thread.run_sync(main, ["runs", "--store", str(db)]) == 0
    _, header, *rows = capsys.readouterr().out.splitlines()
    assert [row.split()[0] for row in rows] == ["weekly-report-of-december", "r1"]
    for row in rows:
        started = re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d", row)
        assert started is not None
        assert started.start() == header.index("started"), row


async def test_a_write_the_database_refuses_fails_alone_not_the_writes_batched_with_it(
    store: Where,
) -> None:
    # The writer commits what is queued in one transaction: one run's write of a value
    # the database does not take (a counter past 64 bits here; on PostgreSQL a run id
    # too long for its index) failed every write batched with it, other runs' leases,
    # intents and results, with that run's error.
    runs = RunStore(store)
    await runs.open()
    holding, go_on = threading.Event(), threading.Event()

    def hold(db: Any) -> None:  # the writer busy, while both writes are queued
        holding.set()
        go_on.wait(10)

    keep = "INSERT INTO lives (run_id, life, started_at, model_calls) VALUES (?, 1, 0, ?)"
    told: dict[str, BaseException | None] = {}

    async def commit(run_id: str, calls: int) -> None:
        try:
            await runs.commit((keep, (run_id, calls)), urgent=False)
        except StoreError as exc:
            told[run_id] = exc
        else:
            told[run_id] = None

    async with anyio.create_task_group() as tg:
        tg.start_soon(runs.act, hold)
        await anyio.to_thread.run_sync(holding.wait, 10)
        tg.start_soon(commit, "r1", 2**64)
        tg.start_soon(commit, "r2", 3)
        await anyio.wait_all_tasks_blocked()  # both queued: one batch, once it goes on
        go_on.set()
    assert isinstance(told["r1"], StoreError)
    assert told["r2"] is None
    assert query(store, "SELECT run_id, model_calls FROM lives") == [("r2", 3)]
    runs.close()


def _store_threads() -> set[threading.Thread]:
    """The run stores' writer threads alive now."""
    return {t for t in threading.enumerate() if t.name == "honeycomb-store"}


async def test_an_executor_closes_the_store_it_opened_as_its_block_ends(store: Where) -> None:
    """An Executor given a store's path or URL opened it, and its block's end left it
    open: its writer thread and its connections (PostgreSQL's) stayed until the process
    ended. A store given as a RunStore is the caller's, and stays open."""
    before = _store_threads()
    model = FunctionModel(lambda request: "found")
    executor = Executor([Role(name="w")], model, aggregator="concat", store=store)
    async with executor:
        await executor.run("t", subtasks=[("w", "a")], run_id="r1")
        assert _store_threads() - before  # its writer
    assert not _store_threads() - before
    async with executor:  # used again: its run opens the store again
        again = await executor.run("t", subtasks=[("w", "b")], run_id="r2")
    assert again.status == "ok"
    assert not _store_threads() - before
    given = RunStore(store)
    try:
        async with Executor([Role(name="w")], model, aggregator="concat", store=given) as its:
            await its.run("t", subtasks=[("w", "c")], run_id="r3")
        assert _store_threads() - before  # the caller's, still open
    finally:
        given.close()
    assert not _store_threads() - before


def _connections(store: Where) -> int:
    """The store's connections to its PostgreSQL server (0: an SQLite file)."""
    if not isinstance(store, str):
        return 0
    found = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'honeycomb'"
    return int(query(store, found)[0][0])


async def test_a_store_dropped_unclosed_stops_its_writer_and_closes_its_connections(
    store: Where, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An Executor made for each request of a service, from a path or URL and never
    closed, left its store's writer thread, its SQLite file and its PostgreSQL
    connections open for as long as the process ran: one more of each a request, until
    the process ran out of files or the server of connections."""
    monkeypatch.undo()  # the fixture that closes a test's PostgreSQL stores keeps them
    before, connected = _store_threads(), _connections(store)
    model = FunctionModel(lambda request: "found")
    made: set[threading.Thread] = set()
    for request in range(3):
        executor = Executor([Role(name="w")], model, aggregator="concat", store=store)
        await executor.run("t", subtasks=[("w", "a")], run_id=f"r{request}")
        assert executor.store is not None
        executor.store.runs()  # its readers too
        made |= _store_threads() - before
    assert len(made) == 3
    del executor
    gc.collect()
    for thread in made:
        await anyio.to_thread.run_sync(thread.join, 10)
    assert not _store_threads() - before
    with anyio.fail_after(10):  # a closed connection's backend ends soon after
        while True:
            if _connections(store) <= connected:
                break
            await anyio.sleep(0.01)


async def test_a_commit_that_asks_only_for_a_checkpoint_checkpoints_the_file(
    tmp_path: Path,
) -> None:
    # A commit with nothing to write is done at once, with no connection (a flush need
    # not wait for a server that went away): one that asks for a checkpoint still gets
    # it, the file alone then holding what was written before.
    db = tmp_path / "runs.db"
    store = RunStore(db)
    await store.commit(("CREATE TABLE t (n INTEGER)", ()))
    await store.commit(("INSERT INTO t VALUES (1)", ()))  # in the -wal
    await store.commit(checkpoint=True)
    alone = tmp_path / "alone.db"
    alone.write_bytes(db.read_bytes())  # the file, without its -wal
    assert query(alone, "SELECT n FROM t") == [(1,)]
    store.close()
