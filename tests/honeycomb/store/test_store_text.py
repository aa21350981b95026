"""Text that is not valid Unicode: lone surrogates, which Python makes of bytes that
are not UTF-8 (in argv, in a file name). The store keeps such text with each
surrogate replaced by U+FFFD; a write the store cannot make in any way fails its
waiters with a StoreError, and the writer goes on."""

from __future__ import annotations

import asyncio
import os
import queue
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from honeycomb import Executor, Role, tool
from honeycomb.errors import StoreError
from honeycomb.store import RunStore
from honeycomb.store.writer import Write, _Life
from honeycomb.testing import ScriptedModel
from runtime import AssistantMessage, ToolCall
from tests.support import ROOT
from tests.support.stores import Where, query


@pytest.fixture
def thread_deaths(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The threads that died of an exception during the test."""
    died: list[str] = []
    monkeypatch.setattr(
        threading, "excepthook", lambda hook: died.append(f"{hook.thread}: {hook.exc_value!r}")
    )
    return died


def stored(db: Path, sql: str) -> list[Any]:
    with sqlite3.connect(db) as raw:
        rows = raw.execute(sql).fetchall()
    raw.close()
    return rows


async def test_a_task_with_a_lone_surrogate_runs_and_is_kept_with_it_replaced(
    store: Where, thread_deaths: list[str]
) -> None:
    db = store
    executor = Executor(
        [Role(name="w", description="d")], ScriptedModel(["fine"]), aggregator="concat", store=db
    )
    with anyio.fail_after(20):
        result = await executor.run("task \udcff", subtasks=[("w", "go")], run_id="r1")
        # The same run again: its stored result, though the store holds the task replaced.
        again = await executor.run("task \udcff", subtasks=[("w", "go")], run_id="r1")
    assert result.status == again.status == "ok"
    assert again.answer_text == result.answer_text
    assert query(db, "SELECT task, status FROM runs") == [("task \ufffd", "ok")]
    assert thread_deaths == []


async def test_a_task_with_a_nul_runs_and_is_kept(store: Where, thread_deaths: list[str]) -> None:
    # No PostgreSQL text holds a NUL: there it is kept replaced, as a lone surrogate is.
    executor = Executor(
        [Role(name="w", description="d")], ScriptedModel(["fine"]), aggregator="concat",
        store=store,
    )  # fmt: skip
    with anyio.fail_after(20):
        result = await executor.run("task \x00 end", subtasks=[("w", "go")], run_id="r1")
    assert result.status == "ok"
    kept = "task \x00 end" if isinstance(store, Path) else "task \ufffd end"
    assert query(store, "SELECT task, status FROM runs") == [(kept, "ok")]
    assert thread_deaths == []


@tool
async def listing() -> str:
    """List files."""
    return "files: report\udcff.txt"


async def test_a_tool_output_with_a_lone_surrogate_is_kept_with_it_replaced(
    store: Where, thread_deaths: list[str]
) -> None:
    db = store
    call = ToolCall(id="a", name="listing", arguments="{}")
    model = ScriptedModel([AssistantMessage(tool_calls=(call,)), "done"])
    executor = Executor(
        [Role(name="w", description="d", tools=("listing",))], model, tools=[listing],
        aggregator="concat", store=db,
    )  # fmt: skip
    with anyio.fail_after(20):
        result = await executor.run("task", subtasks=[("w", "go")], run_id="r1")
    assert result.status == "ok"
    messages = "".join(row for (row,) in query(db, "SELECT messages FROM messages"))
    assert "report\ufffd.txt" in messages
    assert thread_deaths == []


INSERT = "INSERT INTO spans (run_id, spans) VALUES (?, ?)"
"""A write of the tests of the writer."""


class Unbindable:
    """A parameter that sqlite3 cannot bind: converting it raises (not an sqlite3 error)."""

    def __conform__(self, protocol: object) -> object:
        raise RuntimeError("cannot bind this")


async def test_a_write_that_fails_in_any_way_fails_its_waiter_and_the_writer_goes_on(
    tmp_path: Path, thread_deaths: list[str]
) -> None:
    store = RunStore(tmp_path / "runs.db")
    await store.open()
    with anyio.fail_after(20):
        with pytest.raises(StoreError, match="cannot bind this") as caught:
            await store.commit((INSERT, ("r1", Unbindable())))
        assert str(tmp_path / "runs.db") in str(caught.value)
        await store.commit((INSERT, ("r1", "[]")))  # the writer still writes
    store.close()
    assert stored(tmp_path / "runs.db", "SELECT run_id, spans FROM spans") == [("r1", "[]")]
    assert thread_deaths == []


def test_a_byte_of_the_task_that_is_not_utf8_is_no_crash(tmp_path: Path) -> None:
    env = {**os.environ, "HONEYCOMB_DEMO_TOOL_LATENCY": "0", "PYTHONIOENCODING": "utf-8"}
    env["HONEYCOMB_OUTBOX"] = str(tmp_path / "outbox")
    db = tmp_path / "runs.db"
    task = b"weather in Lisbon \xff"  # as a shell passes $'weather in Lisbon \xff'
    done = subprocess.run(
        [sys.executable.encode(), b"-m", b"honeycomb", b"demo", task, b"--plain", b"--latency",
         b"0", b"--store", os.fsencode(db), b"--run-id", b"r1"],
        cwd=ROOT, env=env, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 0, err[-3000:]
    assert "Traceback" not in err
    assert "Answer:" in done.stdout.decode("utf-8", "replace")
    assert stored(db, "SELECT task, status FROM runs") == [("weather in Lisbon \ufffd", "ok")]


class Fatal(BaseException):
    """Not an error of a write: what ends a thread (as a bug of the writer would)."""


def _breaks_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The next batch a writer thread writes ends the thread with :class:`Fatal`; the
    batches after it are written."""
    batch = _Life._batch

    def dies(*args: Any) -> None:
        monkeypatch.setattr(_Life, "_batch", batch)  # once
        raise Fatal("the writer broke")

    monkeypatch.setattr(_Life, "_batch", dies)


def _dying_waits(
    died: threading.Event, went_on: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dying writer thread sets ``died`` once it has ended, and waits for ``went_on``
    before it takes what is left in its queue and tells the waiters (a test's moment to
    write)."""
    abandon = _Life._abandon

    def waits(life: _Life, *args: Any) -> None:
        died.set()
        assert went_on.wait(20)
        abandon(life, *args)

    monkeypatch.setattr(_Life, "_abandon", waits)


async def test_a_writer_that_dies_tells_its_waiters_and_the_next_write_starts_another(
    tmp_path: Path, thread_deaths: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = RunStore(tmp_path / "runs.db")
    await store.open()
    _breaks_once(monkeypatch)
    with anyio.fail_after(20):
        with pytest.raises(StoreError, match="writer stopped: Fatal: the writer broke"):
            await store.commit((INSERT, ("r1", "[]")))
        await store.commit((INSERT, ("r2", "[]")))  # a new writer
    store.close()
    assert stored(tmp_path / "runs.db", "SELECT run_id FROM spans") == [("r2",)]
    assert len(thread_deaths) == 1  # and the thread's death was not silent either


async def test_a_write_a_dying_writer_leaves_in_its_queue_is_written_by_the_next_one(
    tmp_path: Path, thread_deaths: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write queued as the thread that takes it dies, after it took what was in its
    queue: the next thread writes it, though no other write comes to start one."""
    store = RunStore(tmp_path / "runs.db")
    await store.open()
    writer = store._writer
    dying = writer._life
    assert dying is not None
    _breaks_once(monkeypatch)
    late = threading.Event()  # the write is in the dying thread's queue
    thread = dying.thread

    class Late(queue.SimpleQueue[Any]):
        def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
            if isinstance(item, Write) and item.work == ((INSERT, ("r2", "[]")),):
                thread.join(20)  # it was given to this thread, queued once it ended
                late.set()
            super().put(item, block, timeout)

    waiting, dying.queue = dying.queue, Late()
    waiting.put(object())  # wakes the thread from its wait on the queue it had: it reads Late
    loop = asyncio.get_running_loop()
    first, second = loop.create_future(), loop.create_future()
    with anyio.fail_after(20):
        writer.put(((INSERT, ("r1", "[]")),), done=first)
        writer.put(((INSERT, ("r2", "[]")),), done=second)
        assert late.is_set()
        with pytest.raises(StoreError, match="writer stopped"):
            await first
        await second
    store.close()
    assert stored(tmp_path / "runs.db", "SELECT run_id FROM spans") == [("r2",)]
    assert len(thread_deaths) == 1


async def test_a_dying_writer_leaves_the_next_one_what_was_queued_for_it(
    tmp_path: Path, thread_deaths: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write queued once the writer thread died, before the dying thread took what was
    left in its queue: the next thread writes it (the dying one never takes it), after
    the dying one has ended, on a connection of its own."""
    store = RunStore(tmp_path / "runs.db")
    await store.open()
    writer = store._writer
    dying = writer._life
    assert dying is not None
    died, went_on = threading.Event(), threading.Event()
    _breaks_once(monkeypatch)
    _dying_waits(died, went_on, monkeypatch)
    loop = asyncio.get_running_loop()
    first, second = loop.create_future(), loop.create_future()
    with anyio.fail_after(20):
        writer.put(((INSERT, ("r1", "[]")),), done=first)
        assert await anyio.to_thread.run_sync(died.wait, 20)  # its waiters not told yet
        writer.put(((INSERT, ("r2", "[]")),), done=second)  # starts the next thread
        assert writer._life is not dying
        went_on.set()
        with pytest.raises(StoreError, match="writer stopped"):
            await first
        await second
        assert not dying.thread.is_alive()
        assert dying.connection is None  # closed, by the thread that made it its own
        assert writer.running  # the next one still runs, on its own connection
        await store.commit((INSERT, ("r3", "[]")))
    store.close()
    rows = stored(tmp_path / "runs.db", "SELECT run_id FROM spans ORDER BY run_id")
    assert rows == [("r2",), ("r3",)]
    assert len(thread_deaths) == 1


def test_a_write_queued_as_the_writer_stops_is_written(
    tmp_path: Path, thread_deaths: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write another thread queues as the store closes, once the writer thread took
    its last batch: the stopping thread writes it before it ends."""
    stopped, queued = threading.Event(), threading.Event()
    write = _Life._write

    def last_batch_taken(life: _Life, items: list[Write]) -> None:
        write(life, items)
        stopped.set()
        assert queued.wait(20)

    def late_writer() -> None:
        assert stopped.wait(20)
        store._writer.put(((INSERT, ("r2", "[]")),))
        queued.set()

    monkeypatch.setattr(_Life, "_write", last_batch_taken)
    store = RunStore(tmp_path / "runs.db")
    anyio.run(store.open)
    other = threading.Thread(target=late_writer)
    other.start()
    store.close()
    other.join(20)
    assert stored(tmp_path / "runs.db", "SELECT run_id FROM spans") == [("r2",)]
    assert thread_deaths == []
