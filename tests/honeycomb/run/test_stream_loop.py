"""A run's stream runs on asyncio: under another async library it fails at once with
``UnsupportedEventLoop``, as ``Executor.run`` does, before the run starts."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import pytest
import trio

from honeycomb import Executor, Role, RunStream
from honeycomb.errors import UnsupportedEventLoop
from honeycomb.testing import ScriptedModel


def executor(model: ScriptedModel) -> Executor:
    return Executor([Role(name="w")], model, aggregator="concat")


def read_under_trio(stream: Callable[[], AbstractAsyncContextManager[RunStream]]) -> None:
    async def read() -> None:
        async with stream() as events:
            async for _ in events:
                pass

    trio.run(read)


def test_a_stream_under_another_async_library_fails_at_once() -> None:
    model = ScriptedModel(["x"])

    with pytest.raises(UnsupportedEventLoop, match="runs on asyncio") as raised:
        read_under_trio(lambda: executor(model).stream("t", subtasks=[("w", "do")]))

    assert raised.value.what == "Executor.stream"
    assert model.requests == []  # the run never started


def test_a_sessions_stream_under_another_async_library_fails_at_once() -> None:
    model = ScriptedModel(["x"])

    with pytest.raises(UnsupportedEventLoop, match="runs on asyncio"):
        read_under_trio(lambda: executor(model).session("u1").stream("hi"))

    assert model.requests == []
