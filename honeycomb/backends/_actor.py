"""The actor of the Ray backend: many workers at once on an event loop of its own,
each talking to the driver through one stream of messages (see :mod:`._link`), and
every worker of the actor sharing two Ray calls with the driver, so a message costs no
call of its own: what piles up while the driver reads one batch is the next batch.

This module imports no Ray: the driver makes the actor class of :class:`Hive`.
"""

from __future__ import annotations

import asyncio
import functools
import os
import pickle
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar, cast

import msgspec

from honeycomb.backends._link import Link, Outbox, here
from honeycomb.backends._standins import AtDriver, CutAtDriver, DriverBudget, served, stand_in
from honeycomb.backends._wire import Message, Pinned, WorkerSpec, portable_result
from runtime import ConfigError, Model, Tool, ToolRegistry
from runtime.limits.cut import run_cut
from runtime.limits.retry import before_retry
from runtime.limits.retry_policy import wall_time_ends
from runtime.logs import forwarded
from runtime.models.layers.cassette import cassette_case
from workers import Role, Worker, WorkerError, WorkerResult, WorkerSetup
from workers.state import LoopSettings

T = TypeVar("T")


class Hive:
    """The actor: many workers at once on its event loop; roles, tools (resolved by
    import path) and models are installed once, then shared by its workers.

    A driver talks to it through two calls, whatever the number of workers:
    :meth:`deliver` brings its messages (workers to start, answers, cancellations) and
    :meth:`take` returns what the workers sent since the last take. Each driver's
    messages go in their own outbox (a ``channel``), so a take left waiting by a driver
    that went away never takes another's.

    The workers run on an event loop of the actor's own, in a thread of its own, started
    by ``asyncio.run`` as in any program, not on the loop Ray runs the actor's calls on:
    anyio, which runs sync tools in threads, looks for the loop's root task on every
    such call, and on a loop with none (Ray's) it searches every task, each time.
    """

    def __init__(self, switch_interval_s: float | None = None) -> None:
        if switch_interval_s is not None:  # the actor's process is its own
            sys.setswitchinterval(switch_interval_s)
        self._setups: dict[str, WorkerSetup] = {}
        self._models: dict[str, Model] = {}
        self._outboxes: dict[str, Outbox] = {}
        self._workers: dict[str, tuple[Link, asyncio.Task[None], CutAtDriver]] = {}
        started = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            started.set()
            await asyncio.Event().wait()  # the actor's life: it ends with its process

        threading.Thread(target=asyncio.run, args=(main(),), name="hive", daemon=True).start()
        started.wait()

    async def _there(self, call: Coroutine[Any, Any, T]) -> T:
        """Run ``call`` on the workers' loop and wait for it here, on Ray's."""
        assert self._loop is not None
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(call, self._loop))

    def pid(self) -> int:
        """The actor's process id (what a fault test kills)."""
        return os.getpid()

    def switch_interval(self) -> float:
        """The actor's process's ``sys.getswitchinterval()``."""
        return sys.getswitchinterval()

    async def install_setup(
        self,
        key: str,
        role: Role,
        tools: Sequence[Tool[Any, Any] | Pinned],
        settings: LoopSettings,
    ) -> str | ConfigError | None:
        """A role's setup, from its tools as the driver resolved them (made again here
        from their functions; a pinned tool's calls go back to the driver, and so do a
        memory's) and its settings as the run made them (its limits); what went wrong,
        if anything did."""

        def install() -> None:
            made = ToolRegistry([stand_in(t) if isinstance(t, Pinned) else t for t in tools])
            memory = AtDriver("setup.memory") if role.memory is not None else None
            setup = WorkerSetup.resolved(role, made, settings.output_type, memory)
            self._setups[key] = msgspec.structs.replace(setup, settings=settings)

        return await self._there(_failure_of(install))

    def imports_from(self, key: str, folders: Sequence[str]) -> None:
        """Imports look in ``folders`` first, in that order (a hive's, whose tools sit
        beside it), as in a process whose ``PYTHONPATH`` they lead; ``key`` names them."""
        sys.path[:] = [*folders, *(p for p in sys.path if p not in folders)]

    async def install_model(self, key: str, recipe: bytes) -> str | ConfigError | None:
        """Make a model from what the driver sent of it (see
        ``honeycomb.backends.ray.recipe``); what went wrong, if anything did."""

        def install() -> None:
            self._models[key] = cast(Model, pickle.loads(recipe))

        return await self._there(_failure_of(install))

    async def deliver(self, channel: str, messages: list[Message]) -> None:
        """A driver's messages, in order: ``("start", key, spec)`` runs a worker,
        ``("answer", key, answers)`` answers its requests, ``("cancel", key, used,
        stopping)`` cancels it and its tool calls (``used``: the seconds used as its
        run's wall time, or its own time limit, cut it off, else None; ``stopping``:
        whether its run is stopping its workers), ``("retrying", key,
        number, status, error, wait_s)`` tells it that the model call its request
        ``number`` made there is retried."""
        await self._there(self._deliver(channel, messages))

    async def _deliver(self, channel: str, messages: list[Message]) -> None:
        outbox = self._outboxes.setdefault(channel, Outbox())
        for kind, key, *payload in messages:
            if kind == "start":
                link = Link(key, outbox)
                # Its run's wall-time cut and its own time limit's, which fall there.
                cut = CutAtDriver(link)
                task = asyncio.ensure_future(self._work(link, payload[0], cut))
                task.add_done_callback(functools.partial(self._ended, key, link))
                self._workers[key] = (link, task, cut)
                continue
            found = self._workers.get(key)
            if found is None:
                continue  # it ended meanwhile
            if kind == "answer":
                for number, ok, value in payload[0]:
                    found[0].answer(number, ok, value)
            elif kind == "cancel":
                used, stopping = payload
                if used is not None:  # cut off by its (run's) time
                    found[2].fell(used)
                found[0].stopping = stopping  # what a recording's call cut off asks
                found[1].cancel()
            elif kind == "retrying":  # a call it asked the driver for is retried there
                found[0].retrying(*payload)

    async def take(self, channel: str, wait_s: float) -> list[tuple[str, Message]]:
        """What this driver's workers sent since its last take, as ``(key, message)``
        in the order they were sent; waits for the first (at most ``wait_s``)."""
        return await self._there(self._take(channel, wait_s))

    async def _take(self, channel: str, wait_s: float) -> list[tuple[str, Message]]:
        return await self._outboxes.setdefault(channel, Outbox()).take(wait_s)

    async def _work(self, link: Link, spec: WorkerSpec, cut: CutAtDriver) -> None:
        here.set(link)  # in this worker's task (and the tasks it starts) only
        run_cut.set(cut)
        left = spec.services.wall_left_s
        if left is not None:  # its model calls' retries end with the run's wall time
            wall_time_ends.set(time.monotonic() + left)
        try:
            with cassette_case(spec.services.case):  # as its calls are recorded, replayed
                worker = self._worker(link, spec)
                # A retry of its model calls asks the driver what the run spent now.
                before_retry.set(cast(DriverBudget, worker.services.budget).heard_now)
                if spec.services.logs:  # Honeycomb's entries: the driver logs them
                    forwarded.set(functools.partial(link.send, "log"))
                link.send("began", time.time())  # its first message: its span begins then
                result = await worker.run(
                    spec.task,
                    inputs=spec.inputs,
                    resume=spec.resume,
                    conversation=spec.conversation,
                    keep=spec.keep,
                )
        except asyncio.CancelledError:
            raise  # it says it stopped as it ends (see _ended)
        except BaseException as exc:
            # A defect here: the worker fails, saying so. A tool's SystemExit (or
            # KeyboardInterrupt) stops the run at the driver, as in one process; here
            # it would end the loop every worker of the actor runs on.
            result = WorkerResult(
                worker=spec.name,
                role=self._setups[spec.setup].role.name,
                status="failed",
                error=WorkerError(type=type(exc).__name__, message=str(exc)),
                exception=exc,
            )
        link.send("done", portable_result(result))

    def _ended(self, key: str, link: Link, task: asyncio.Task[None]) -> None:
        """A worker's task ended: it is forgotten, and, cancelled, it says it stopped,
        the last it sends (the driver waits for it). So does one cancelled before it
        began, whose start and cancellation came in one batch (it ran no line)."""
        self._workers.pop(key, None)
        if task.cancelled():
            link.send("stopped")

    def _worker(self, link: Link, spec: WorkerSpec) -> Worker:
        setup = self._setups[spec.setup]
        summarizer = None
        if spec.summarizer is not None and setup.settings.compaction is not None:
            named = setup.settings.compaction.model or ""
            summarizer = (named, self._models[spec.summarizer])
        model, services = served(spec.services, link, self._models[spec.model], summarizer)
        return Worker(setup, model, name=spec.name, services=services)


async def _failure_of(install: Callable[[], None]) -> str | ConfigError | None:
    """What went wrong installing, if anything did: as text, since not every error can
    be unpickled at the driver, but for a :class:`ConfigError` (a mistake to fix, which
    says what), which crosses whole."""
    try:
        install()
    except ConfigError as exc:
        return exc
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None
