"""The event loop the CLI runs on: uvloop when it is installed (the ``fast`` extra),
else asyncio's own. Honeycomb itself runs on either; choosing is the application's
business, and this is the CLI's choice."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import importlib.util
import signal
from collections.abc import Callable, Coroutine, Iterator
from types import FrameType
from typing import Any, TypeVar

__all__ = ["loop_factory", "loop_name", "run_on_loop"]

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's ``new_event_loop`` when uvloop is installed; None (asyncio's) otherwise."""
    if importlib.util.find_spec("uvloop") is None:
        return None
    import uvloop

    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def loop_name() -> str:
    """``uvloop <version>`` or ``asyncio``: what :func:`run_on_loop` runs on."""
    if loop_factory() is None:
        return "asyncio"
    return f"uvloop {importlib.metadata.version('uvloop')}"


def run_on_loop(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, on uvloop when it is installed."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)


STOPS = (signal.SIGINT, signal.SIGTERM)
"""The signals that stop a command: Ctrl-C, and a service manager's stop."""


@contextlib.contextmanager
def stops_handled_by(
    handler: Callable[[int, FrameType | None], Any] | signal.Handlers,
) -> Iterator[None]:
    """While the block runs, :data:`STOPS` go to ``handler`` (``signal.SIG_IGN``: they
    do nothing); as it ends, back to what had them before."""
    before = {number: signal.signal(number, handler) for number in STOPS}
    try:
        yield
    finally:
        for number, had in before.items():
            signal.signal(number, had)
