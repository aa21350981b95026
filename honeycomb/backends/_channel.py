"""The channel between this process and one actor: every message of the workers
running there, in batches, one call each way at a time (the driver's side of each
worker is :class:`~honeycomb.backends._driver.Driver`, which follows its worker's
messages through it)."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from honeycomb.backends._wire import Message, RemoteFailure, portable_error
from runtime.events import NO_TRACE, CallReport
from runtime.secrets import masked


class Follower(Protocol):
    """What follows one worker's messages (the driver's side of its stream)."""

    def receive(self, message: Message) -> None:
        """A message its worker sent."""
        ...

    def lost(self, exc: Exception) -> None:
        """Its worker was lost with its actor (``exc``: Ray's error), or its start
        could not be sent."""
        ...


class Channel:
    """Every message between this process and one actor, for all the workers running
    there: what is to be sent goes in one batch per call (one call at a time, so they
    arrive in order), and one call at a time takes what the workers sent, so what
    piles up while a batch is read here is the next batch.

    The actor dying fails every worker on it with Ray's error (see
    :meth:`Follower.lost`).
    """

    TAKE_WAIT_S = 2.0  # a take with nothing to return comes back after this

    def __init__(self, handle: Any, name: str, loop: asyncio.AbstractEventLoop) -> None:
        self.handle = handle
        self.name = name
        self.loop = loop
        self.drivers: dict[str, Follower] = {}
        self._outgoing: list[Message] = []
        self._sending: asyncio.Task[None] | None = None
        self._taking: asyncio.Task[None] | None = None

    def join(self, key: str, driver: Follower) -> None:
        self.drivers[key] = driver
        if self._taking is None:
            self._taking = self.loop.create_task(self._take())

    def leave(self, key: str) -> None:
        self.drivers.pop(key, None)

    def send(self, message: Message) -> None:
        self._outgoing.append(message)
        if self._sending is None:
            self._sending = self.loop.create_task(self._send())

    async def _send(self) -> None:
        import ray.exceptions

        try:
            while self._outgoing:
                batch, self._outgoing = self._outgoing, []
                try:
                    await self.handle.deliver.remote(self.name, batch)
                except ray.exceptions.RayActorError:
                    raise
                except Exception:  # a message that cannot be sent: find it, each alone
                    for message in batch:
                        try:
                            await self.handle.deliver.remote(self.name, [message])
                        except ray.exceptions.RayActorError:
                            raise
                        except Exception as exc:
                            self._undeliverable(message, exc)
        except Exception as exc:  # the actor died (the take sees it too)
            self._fail(exc)
        finally:
            self._sending = None

    def _undeliverable(self, message: Message, exc: Exception) -> None:
        """A message Ray could not send (something in it does not pickle): its worker
        alone fails (a worker to start), or its requests do (answers)."""
        kind, key, *payload = message
        driver = self.drivers.get(key)
        if kind == "start" and driver is not None:
            self.drivers.pop(key)
            driver.lost(exc)
        elif kind == "answer":
            error = portable_error(
                RemoteFailure(f"its answer could not be sent ({type(exc).__name__}: {exc})")
            )
            self._outgoing.append(("answer", key, [(n, False, error) for n, _, _ in payload[0]]))

    async def _take(self) -> None:
        try:
            while self.drivers:  # none left: no take waits at the actor
                batch = await self.handle.take.remote(self.name, self.TAKE_WAIT_S)
                for key, message in batch:
                    driver = self.drivers.get(key)
                    if driver is not None:
                        driver.receive(message)
        except Exception as exc:
            self._fail(exc)
        finally:
            self._taking = None

    def _fail(self, exc: Exception) -> None:
        drivers, self.drivers = self.drivers, {}
        for driver in drivers.values():
            driver.lost(exc)


class RelayedReport(CallReport):
    """The report of a judge's call made here for a worker in an actor: each retry of
    it is told to the report of the checked turn there (``model_call.retrying``, and the
    attempts its guard's event counts), as the retry policy tells it in one process."""

    __slots__ = ("_channel", "_key", "_number")

    def __init__(self, channel: Channel, key: str, number: int) -> None:
        super().__init__(NO_TRACE, worker=None, run_id=None, turn=0)
        self._channel, self._key, self._number = channel, key, number

    def retrying(self, status: str, error: str, wait_s: float) -> None:
        # Masked here: the actor knows none of this process's secrets.
        self._channel.send(("retrying", self._key, self._number, status, masked(error), wait_s))
