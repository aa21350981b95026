"""Sync tools in worker threads, so they never block the event loop.

A parallel-safe call is abandoned when cancelled (its thread's ``check_cancelled()``
stops it if it cooperates); a side-effecting call's thread is always waited for, so
it never overlaps the next call nor outlives its run.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar, cast

import anyio
import anyio.to_thread

from runtime.concurrency import shielded
from runtime.tools.define import Tool

__all__ = [
    "RanToItsEnd",
    "abandoned_when_cancelled",
    "in_thread",
    "ran_to_its_end",
    "run_tool",
    "still_running",
    "to_the_end",
    "waited_for",
]

T = TypeVar("T")


class _Abandoned:
    """One call run by :func:`abandoned_when_cancelled`: once abandoned, it is among
    :func:`still_running` until its thread ends (or at once, if its thread never
    takes it up)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.ended = threading.Event()
        self._began = self._abandoned = False

    def run(self, call: Callable[[], T]) -> T:
        with _LOCK:
            self._began = True
            if self._abandoned:  # its thread took it up after it was abandoned
                _RUNNING.add(self)
        try:
            return call()
        finally:
            with _LOCK:
                self.ended.set()
                _RUNNING.discard(self)

    def abandon(self) -> None:
        with _LOCK:
            self._abandoned = True
            if self._began and not self.ended.is_set():
                _RUNNING.add(self)


_LOCK = threading.Lock()
_RUNNING: set[_Abandoned] = set()


def still_running() -> list[tuple[str, threading.Event]]:
    """The calls abandoned when cancelled whose threads still run, each named, with
    the event set when it ends. Python waits for them before the process exits."""
    with _LOCK:
        return [(call.name, call.ended) for call in _RUNNING]


_WAITED: dict[object, str] = {}
"""The named calls of :func:`to_the_end` whose threads run now, by a token of each."""


def waited_for() -> list[str]:
    """The named calls run :func:`to_the_end` whose threads run now (sync
    side-effecting tools'): what stopping their run waits for, as they cannot be
    interrupted (a command stopped by Ctrl-C says so)."""
    with _LOCK:
        return list(_WAITED.values())


def run_tool(
    found: Tool[Any, Any], kwargs: dict[str, Any], begun: threading.Event | None = None
) -> Awaitable[Any]:
    """A call of ``found`` with validated arguments: an async tool's coroutine, a sync
    tool in a worker thread (``begun`` is set once a side-effecting one's thread has
    taken it up: cancelled before, it never ran)."""
    if found.is_async:
        return cast(Awaitable[Any], found.fn(**kwargs))
    return in_thread(found, kwargs, begun)


async def in_thread(
    found: Tool[Any, Any], kwargs: dict[str, Any], begun: threading.Event | None = None
) -> Any:
    """Run a sync tool in a worker thread."""
    run = partial(found.fn, **kwargs)
    if found.side_effects:
        return await to_the_end(run, begun, found.name)
    return await abandoned_when_cancelled(run, found.name)


async def abandoned_when_cancelled(run: Callable[[], T], name: str = "a sync call") -> T:
    """Run ``run`` in a thread, abandoned when cancelled, so that a timeout is prompt:
    its thread's ``check_cancelled()`` stops it then, if it cooperates, and until it
    ends it is among :func:`still_running`, under ``name``."""
    call = _Abandoned(name)
    # A call running in a task of an asyncio task group is cancelled natively, which
    # anyio's scopes do not see: cancel an enclosing scope too, so the thread sees it.
    with anyio.CancelScope() as scope:
        try:
            result = await anyio.to_thread.run_sync(partial(call.run, run), abandon_on_cancel=True)
        except asyncio.CancelledError:
            scope.cancel()
            call.abandon()
            raise
    return result


async def to_the_end(
    run: Callable[[], Any], begun: threading.Event | None = None, name: str | None = None
) -> Any:
    """Run ``run`` in a thread and, even when cancelled, return only once it has ended:
    a side-effecting call must not overlap the next one, nor outlive its run. Cancelled
    before its thread took it up, it never runs: it returns at once (``begun``, when
    given, is set once it has been taken up). Given a ``name``, it is among
    :func:`waited_for` while its thread runs it."""
    ended = threading.Event()
    lock = threading.Lock()
    took = dropped = False
    came: RanToItsEnd | None = None  # how it ended, unless it was cut short
    token = object()

    def guarded() -> Any:
        nonlocal took, came
        with lock:
            if dropped:  # cancelled while it waited for its thread
                return None
            took = True
        if begun is not None:
            begun.set()
        if name is not None:
            with _LOCK:
                _WAITED[token] = name
        try:
            value = run()
        except Exception as exc:  # not its check_cancelled(): it stopped half way
            came = RanToItsEnd(error=exc)
            raise
        else:
            came = RanToItsEnd(value=value)
            return value
        finally:
            with _LOCK:
                _WAITED.pop(token, None)
            ended.set()  # once came is set: the waiter reads it

    with anyio.CancelScope() as scope:
        try:
            # Shielded: anyio's cancellation waits for the thread by itself.
            return await anyio.to_thread.run_sync(guarded, abandon_on_cancel=False)
        except asyncio.CancelledError as exc:
            # A native cancellation (a timeout, an asyncio task group) gets through the
            # shield, unseen by the thread: cancel the enclosing scope too, so its
            # check_cancelled() stops it, and wait for it to end. It may come before
            # the thread took the call up (or before it was handed over at all): then
            # the call is dropped, and nothing is waited for.
            scope.cancel()
            with lock:
                dropped = not took
            if dropped:  # it never began: known too
                came = RanToItsEnd(began=False)
            try:
                if not dropped and not ended.is_set():
                    await shielded(anyio.to_thread.run_sync(ended.wait))
            except asyncio.CancelledError as again:  # the scope's own, as it waited
                _ran(again, came)
                raise
            _ran(exc, came)
            raise


@dataclass(frozen=True)
class RanToItsEnd:
    """What a call :func:`to_the_end` waited for after it was cancelled returned, or
    raised (``error``: an exception of its own, not its ``check_cancelled()``'s, which
    stops it half way); or that it never ``began``: cancelled before its thread took it
    up, it was dropped."""

    value: Any = None
    error: BaseException | None = None
    began: bool = True


def ran_to_its_end(cancelled: BaseException) -> RanToItsEnd | None:
    """How the call of :func:`to_the_end` that ``cancelled`` came out of ended, when it
    was waited for to its end, or that it never began (None: it stopped half way, or the
    cancellation came from elsewhere): its worker is stopped, but what the call did is
    known, and a journal keeps it (a resumed worker is told what it did, or runs it, not
    told that it may have done it)."""
    found = vars(cancelled).get(_RAN)
    return found if isinstance(found, RanToItsEnd) else None


def _ran(cancelled: BaseException, came: RanToItsEnd | None) -> None:
    if came is not None:  # how the call ended is known: it goes with the cancellation
        vars(cancelled)[_RAN] = came


_RAN = "honeycomb_ran_to_its_end"
