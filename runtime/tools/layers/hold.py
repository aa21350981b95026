"""The tool-call layer of locks and limits: a call of an ``exclusive`` tool holds its
key's lock (in a :class:`LockTable` shared by every worker of an Executor, so calls
sharing a key never overlap anywhere), and every leaf call holds one of the run's
tool slots while it runs. A call of a tool that ``nests`` (it runs nested workers,
whose own calls take the slots) holds none, so a nested call never waits for a slot
its ancestor holds.

The per-turn cap of one worker's parallel calls is the dispatcher's own (it decides
which calls of a turn run together)."""

from __future__ import annotations

import contextlib
from collections.abc import Coroutine
from typing import Any

import anyio

from runtime.concurrency import OneLoop, PerLoop
from runtime.limits import Slots
from runtime.tools.layers.base import Outcome, Prepared, ToolHandler, ToolLayer

__all__ = ["Held", "LockTable"]

_NOTHING = contextlib.nullcontext()


class LockTable:
    """Named locks for ``exclusive`` tools; share one table between workers so that
    calls with the same key never overlap across them.

    Its locks serve one event loop at a time (a
    :class:`~runtime.concurrency.PerLoop`): the next loop, once the last has stopped,
    has locks of its own, which no call the stopped loop left holding holds.
    """

    def __init__(self) -> None:
        self._locks = PerLoop(dict[str, anyio.Lock], OneLoop("this LockTable"))

    def lock(self, key: str) -> contextlib.AbstractAsyncContextManager[None]:
        """The lock of ``key``, to hold with ``async with`` (one made on first use).

        Raises:
            EventLoopConflict: from a second event loop while the one it serves runs.
        """
        locks = self._locks.get()
        found = locks.get(key)
        if found is None:
            found = locks[key] = anyio.Lock()
        return found

    def __repr__(self) -> str:
        return f"LockTable({sorted(self._locks.last or ())})"


class Held(ToolLayer):
    """Holds a call's exclusive lock and a tool slot while the call runs.

    Args:
        next: The handlers inside it.
        locks: The lock table of ``exclusive`` keys (the run's).
        slots: Bounds the leaf tool calls in flight (the run's; None: unbounded).
    """

    def __init__(self, next: ToolHandler, locks: LockTable, slots: Slots | None) -> None:
        super().__init__(next)
        self.locks = locks
        self.slots = slots

    def __call__(self, call: Prepared) -> Coroutine[Any, Any, Outcome]:
        found = call.tool
        # A call that only waits for nested workers holds no slot: theirs do.
        slots = None if found.nests else self.slots
        if found.exclusive is None and slots is None:
            return self.next(call)
        return self._held(call, found.exclusive, slots)

    async def _held(self, call: Prepared, key: str | None, slots: Slots | None) -> Outcome:
        lock = self.locks.lock(key) if key is not None else _NOTHING
        async with lock, slots or _NOTHING:
            return await self.next(call)
