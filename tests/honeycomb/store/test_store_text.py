"""Text that is not valid Unicode: lone surrogates, which Python makes of bytes that
are not UTF-8 (in argv, in a file name). The store keeps such text with each
surrogate replaced by U+FFFD; a write the store cannot make in any way fails its
waiters with a StoreError, and the writer goes on."""

from __future__ import annotations

import os
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


def _breaks_once(writer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer's next batch ends its thread with :class:`Fatal`; the batches of the
    writers after it are written."""
    batch = writer._batch

    def dies(*args: Any) -> None:
        monkeypatch.setattr(writer, "_batch", batch)  # once
        raise Fatal("the writer broke")

    monkeypatch.setattr(writer, "_batch", dies)


async def test_a_writer_that_dies_tells_its_waiters_and_the_next_write_starts_another(
    tmp_path: Path, thread_deaths: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = RunStore(tmp_path / "runs.db")
    await store.open()
    _breaks_once(store._writer, monkeypatch)
    with anyio.fail_after(20):
        with pytest.raises(StoreError, match="writer stopped: Fatal: the writer broke"):
            await store.commit((INSERT, ("r1", "[]")))
        await store.commit((INSERT, ("r2", "[]")))  # a new writer
    store.close()
    assert stored(tmp_path / "runs.db", "SELECT run_id FROM spans") == [("r2",)]
    assert len(thread_deaths) == 1  # and the thread's death was not silent either


async def test_a_dying_writer_leaves_the_next_one_its_connection(
    tmp_path: Path, thread_deaths: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The waiter a dying writer tells may start the next writer before the dying one
    has ended: the dying one's last steps leave the new one running, its connection
    open."""
    store = RunStore(tmp_path / "runs.db")
    await store.open()
    writer = store._writer
    abandon = writer._abandon
    next_one_wrote = threading.Event()

    def abandons(*args: Any) -> None:
        abandon(*args)  # its waiters are told: the next write starts the next writer
        assert next_one_wrote.wait(20)  # which writes before this one has ended

    _breaks_once(writer, monkeypatch)
    monkeypatch.setattr(writer, "_abandon", abandons)
    with anyio.fail_after(20):
        with pytest.raises(StoreError, match="writer stopped"):
            await store.commit((INSERT, ("r1", "[]")))
        dying = writer._thread
        await store.commit((INSERT, ("r2", "[]")))
        assert writer._thread is not dying
        next_one_wrote.set()
        assert dying is not None
        await anyio.to_thread.run_sync(dying.join)
        assert writer.running  # the next one still runs, on its own connection
        await store.commit((INSERT, ("r3", "[]")))
    store.close()
    rows = stored(tmp_path / "runs.db", "SELECT run_id FROM spans ORDER BY run_id")
    assert rows == [("r2",), ("r3",)]
    assert len(thread_deaths) == 1
