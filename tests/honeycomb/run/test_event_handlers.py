"""Where ``on_event`` handlers are given (an Executor, a run, a session's message), an
``async def`` one is refused before anything runs or is kept: handlers are called
synchronously, and the coroutine one returned would never run."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb import Executor, Role
from honeycomb.errors import ConfigError
from honeycomb.events import Event
from honeycomb.testing import ScriptedModel

ROLES = [Role(name="w")]


async def push(event: Event) -> None:
    """An async handler, as one pushing to a websocket would be written."""


def test_an_executor_refuses_an_async_handler_when_it_is_made(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="handler push is an async function") as refused:
        Executor(ROLES, ScriptedModel(["x"]), on_event=[print, push], store=tmp_path / "r.db")  # type: ignore[list-item]
    assert refused.value.field == "on_event[1]"
    assert "called synchronously" in str(refused.value)
    assert not (tmp_path / "r.db").exists()  # refused before the store was opened
    # One handler alone is refused as a run refuses it (it was unpacked first: a
    # bare "TypeError: Value after * must be an iterable").
    # print, by its name: a process that ran Ray's tqdm has it as safe_print
    named = rf"not one: write on_event=\[{print.__name__}\]"
    with pytest.raises(ConfigError, match=named) as refused:
        Executor(ROLES, ScriptedModel(["x"]), on_event=print, store=tmp_path / "r.db")  # type: ignore[arg-type]
    assert refused.value.field == "on_event"
    assert not (tmp_path / "r.db").exists()


async def test_a_run_refuses_an_async_handler_before_it_starts_or_is_kept(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(["x"])
    executor = Executor(ROLES, model, aggregator="concat", store=tmp_path / "r.db")
    with pytest.raises(ConfigError, match="handler push is an async function"):
        await executor.run("t", subtasks=[("w", "do")], on_event=[push])  # type: ignore[list-item]
    assert model.requests == []
    assert executor.store is not None
    assert executor.store.runs() == []
    executor.store.close()


async def test_a_sessions_message_refuses_an_async_handler_and_keeps_no_turn() -> None:
    model = ScriptedModel(["x"])
    executor = Executor(ROLES, model, planner=lambda task: [("w", task)], aggregator="concat")
    session = executor.session("u1")
    with pytest.raises(ConfigError, match="handler push is an async function"):
        await session.run("hi", on_event=[push])  # type: ignore[list-item]
    assert model.requests == []
    assert await session.turns() == []
    assert (await session.run("hi", on_event=[print])).status == "ok"  # plain ones run
