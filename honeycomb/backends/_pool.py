"""The pool's actors as the driver sees them: each one's handle, what is installed in
it, its load, whether it answers, and its channel to each event loop of this process."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from honeycomb.backends._channel import Channel
from honeycomb.backends._setup import answering


@dataclass
class Actor:
    """One actor of the pool: its handle, what is installed in it, its load, and its
    channel to this process's event loop."""

    handle: Any
    installing: dict[str, asyncio.Future[None]] = field(default_factory=dict)
    running: int = 0
    dead: bool = False
    stopped: bool = False  # killed by its pool's stop()
    channel: Channel | None = None
    idle: bool = False  # it ran workers, and runs none now: it may have died unseen
    checked: asyncio.Future[bool] | None = None  # whether it answers, once idle

    async def answers(self) -> bool:
        """Whether it is alive, asked once whenever it gets a worker after it ran none
        (what died then, its process killed or its node lost, no worker saw die):
        a worker is not sent to it to be lost with it, before it began."""
        if not self.idle:
            return True
        if self.checked is None or cut_off(self.checked):
            self.checked = asyncio.ensure_future(answering(self.handle))
        alive = await asyncio.shield(self.checked)
        self.idle, self.checked = False, None
        return alive

    def channel_here(self, names: Iterator[int]) -> Channel:
        """Its channel for the running event loop (a new loop gets a new one)."""
        loop = asyncio.get_running_loop()
        if self.channel is None or self.channel.loop is not loop:
            self.channel = Channel(self.handle, f"c{next(names)}-{os.getpid()}", loop)
        return self.channel


def cut_off(pending: asyncio.Future[Any]) -> bool:
    """Whether an install (or a check) ended with its event loop, not by itself:
    cancelled, or still waiting on a loop that is not this one (which runs no more)."""
    if pending.done():
        return pending.cancelled()
    return pending.get_loop() is not asyncio.get_running_loop()
