"""The layer of locks and slots alone, with a fake next layer."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from runtime import EventLoopConflict
from runtime.tools import Tool, tool
from runtime.tools.layers import Held, LockTable
from tests.support.layers import Next, look, prepared
from tests.support.loops import LIMIT_S, LoopInThread, hold, stranded


@tool(exclusive="db")
async def migrate(step: str) -> str:
    """Migrate the database."""
    return step


async def ask_worker(question: str) -> str:
    """Ask a nested worker."""
    return question


ask = Tool(ask_worker, name="ask", nests=True)


async def test_calls_sharing_an_exclusive_key_never_overlap() -> None:
    inner = Next(delay_s=0.02)
    layer = Held(inner, LockTable(), None)
    async with asyncio.TaskGroup() as tg:
        for i in range(3):
            tg.create_task(layer(prepared(migrate, i, step=str(i))))
    assert inner.most == 1


async def test_leaf_calls_hold_a_slot_and_nesting_ones_none() -> None:
    inner = Next(delay_s=0.02)
    layer = Held(inner, LockTable(), anyio.CapacityLimiter(2))
    async with asyncio.TaskGroup() as tg:
        for i in range(5):
            tg.create_task(layer(prepared(look, i, key=str(i))))
    assert inner.most == 2
    slots = anyio.CapacityLimiter(1)
    async with slots:  # its ancestor holds the only slot: a nesting call still runs
        async with asyncio.timeout(5):
            outcome = await Held(Next(), LockTable(), slots)(prepared(ask, question="q"))
    assert outcome.content == "ran c0"


def test_a_key_a_stopped_loop_holds_is_free_on_the_next_and_no_second_loop_shares_it() -> None:
    locks = LockTable()

    async def take() -> None:
        with anyio.fail_after(LIMIT_S):  # a failsafe: the key is free at once
            async with locks.lock("db"):
                pass

    with stranded(lambda: hold(locks.lock("db"))):
        asyncio.run(take())
        with LoopInThread() as there:
            there.run(take())
            with pytest.raises(EventLoopConflict, match="this LockTable"):
                asyncio.run(take())
    assert repr(locks) == "LockTable(['db'])"
