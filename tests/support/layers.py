"""A fake next layer for testing one tool-call layer alone, and calls to give it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from runtime.testing import call
from runtime.tools import Tool, tool
from runtime.tools.layers import Admitted, Outcome, Prepared


class Next:
    """The next layer, faked: it records what reaches it (each turn's admission, each
    call, how many run at once) and answers each call ``ran <id>`` after ``delay_s``."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.admitted: list[list[Prepared]] = []
        self.called: list[Prepared] = []
        self.running = self.most = 0

    async def admit(self, calls: Sequence[Prepared]) -> list[Admitted]:
        self.admitted.append(list(calls))
        return list(calls)

    async def __call__(self, call: Prepared) -> Outcome:
        self.called.append(call)
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await asyncio.sleep(self.delay_s)
        finally:
            self.running -= 1
        return Outcome(status="ok", content=f"ran {call.call.id}")


@tool
async def look(key: str) -> str:
    """Look a key up."""
    return key


@tool(side_effects=True)
async def send(to: str) -> str:
    """Send to someone."""
    return f"sent to {to}"


def prepared(found: Tool[Any, Any], position: int = 0, *, turn: int = 1, **kwargs: Any) -> Prepared:
    """A call of ``found`` ready to run, its id ``c<position>``."""
    made = call(found.name, kwargs, id=f"c{position}")
    return Prepared(position=position, call=made, tool=found, kwargs=kwargs, turn=turn)
