"""The actor's side of one worker's stream to the driver: what it sends goes in its
driver's outbox, in order; what it asks waits for the driver's answer."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from honeycomb.backends._wire import Message, raised
from runtime.concurrency import TimedOut, shielded, within
from runtime.events import CallReport, current_call
from runtime.models.layers.budget import spending, spent_by
from runtime.tools.approval_gate import settled_by

SPENT_WAIT_S = 1.0
"""How long a request cut off here waits for what its call at the driver spent until it
stopped (see :meth:`Link.ask_spending`)."""


class Outbox:
    """What an actor's workers have sent one driver and it has not taken yet: every
    worker's messages in one list, in the order they were sent."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, Message]] = []
        self.ready = asyncio.Event()

    def post(self, key: str, message: Message) -> None:
        self.messages.append((key, message))
        self.ready.set()

    async def take(self, wait_s: float) -> list[tuple[str, Message]]:
        """Everything posted so far, once there is something (or ``wait_s`` passed)."""
        if not self.messages:
            with contextlib.suppress(TimedOut), within(wait_s):
                await self.ready.wait()
        taken, self.messages = self.messages, []
        self.ready.clear()
        return taken


class Link:
    """One worker's side of its stream to the driver: what it sends, and the answers
    it waits for."""

    def __init__(self, key: str, outbox: Outbox) -> None:
        self._key = key
        self._outbox = outbox
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count()
        self._reports: dict[int, CallReport] = {}  # of the calls asked for (a judge's)
        self.stopping = False
        """Whether the driver cancelled the worker as its run stopped its workers
        (another failed under ``fail_fast``, a budget ran out), not from outside."""
        self.heard: Callable[[Any], None] | None = None
        """Told what the run had spent as the driver gave the worker a slot of the
        model's calls or of a rate limiter (its budget's ``told``; None: the run has
        no limit to check)."""

    def send(self, *message: Any) -> None:
        """Send without waiting for an answer (the stream keeps the order)."""
        self._outbox.post(self._key, message)

    async def ask(self, op: str, *args: Any, **options: Any) -> Any:
        """Send a request and wait for the driver's answer: ``op`` is what to do there
        (``hold``, ``reserve``, ``tool``, or the path of a call in the worker's
        services there, ``services.approver``).

        Raises:
            BudgetExceeded: when the driver's budget refused it.
            RemoteFailure: when it failed at the driver.
        """
        number = next(self._ids)
        answer = self._waiting[number] = asyncio.get_running_loop().create_future()
        self._outbox.post(self._key, ("ask", number, op, args, options))
        try:
            return await answer
        except asyncio.CancelledError as cancelled:
            if not answer.done() or answer.cancelled():
                # What the driver does for it is cancelled; an approver's question
                # withdrawn there is told the decision that settled it, as here.
                settled = settled_by(cancelled)
                self.send("forget", number, *(() if settled is None else (settled,)))
            raise
        finally:
            self._waiting.pop(number, None)

    async def ask_spending(self, op: str, *args: Any) -> Any:
        """:meth:`ask`, for a model call at the driver that spends the run's budget and
        says so in its error (a judge's): its retries are told to the report of the call
        here (:data:`~runtime.events.current_call`), and, cut off here, the request waits
        a while for the call there, cut off too, to say what it spent, and the
        cancellation raised carries it (its ``spent``), as the call's own would in one
        process.

        Raises:
            BudgetExceeded: when the driver's budget refused it.
            RemoteFailure: when it failed at the driver.
        """
        number = next(self._ids)
        answer = self._waiting[number] = asyncio.get_running_loop().create_future()
        report = current_call.get()  # told of the call's retries (:meth:`retrying`)
        if report is not None:
            self._reports[number] = report
        self._outbox.post(self._key, ("ask", number, op, args, {}))
        try:
            return await asyncio.shield(answer)
        except asyncio.CancelledError as cut:
            if not answer.done():
                self.send("forget", number)
                with contextlib.suppress(asyncio.CancelledError):  # (``cut`` goes on)
                    await shielded(_settled(answer))
            told = answer.exception() if answer.done() and not answer.cancelled() else None
            spent = spent_by(told) if told is not None else None
            if spent is not None:
                spending(cut, spent)
            raise
        finally:
            self._waiting.pop(number, None)
            self._reports.pop(number, None)

    def retrying(self, number: int, status: str, error: str, wait_s: float) -> None:
        """The call that request ``number`` made at the driver is retried: its report
        here is told, as the retry policy tells it in one process."""
        report = self._reports.get(number)
        if report is not None:
            report.retrying(status, error, wait_s)

    def answer(self, number: int, ok: bool, value: Any) -> None:
        found = self._waiting.get(number)
        if found is None or found.done():
            return  # the request was given up (its caller cancelled)
        if ok:
            found.set_result(value)
        else:
            found.set_exception(raised(value))


here: ContextVar[Link] = ContextVar("honeycomb_ray_worker")
"""The stream of the worker whose task is running (for what a role's setup, shared by
all its workers in the actor, does at the driver)."""


async def at_driver(op: str, *args: Any, **options: Any) -> Any:
    """Ask the driver to do ``op`` for the current worker, and wait for its answer."""
    return await here.get().ask(op, *args, **options)


async def _settled(answer: asyncio.Future[Any]) -> None:
    """Once ``answer`` is given, or :data:`SPENT_WAIT_S` passed."""
    with contextlib.suppress(TimedOut), within(SPENT_WAIT_S):
        await asyncio.wait((answer,))
