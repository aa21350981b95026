"""A worker runs on asyncio: awaited under another async library it raises
``UnsupportedEventLoop`` at once, as ``AgentLoop.run`` does, rather than return a
failed result for a subtask it never ran."""

from __future__ import annotations

import pytest
import trio

from runtime.errors import UnsupportedEventLoop
from runtime.testing import ScriptedModel
from workers import Role, Worker


def test_a_worker_under_another_async_library_raises_at_once() -> None:
    model = ScriptedModel(["x"])
    worker = Worker(Role(name="w"), model)

    with pytest.raises(UnsupportedEventLoop, match="runs on asyncio") as raised:
        trio.run(worker.run, "t")

    assert raised.value.what == "Worker.run"
    assert model.requests == []
