"""Adaptive rate limiting, shared by every worker that uses one model.

An :class:`AdaptiveLimiter` bounds the model calls in flight and adapts the bound to
what the endpoint takes (additive increase, multiplicative decrease, as TCP does):

- An HTTP 429 halves the limit (never below ``min_concurrency``) and starts a shared
  cool-down: no caller starts an attempt until the 429's ``Retry-After`` (else
  ``cooldown_s``) has passed. Attempts that were already in flight when the limit was
  cut do not cut it again, so a burst of 429s is one halving, not one per request.
- Every ``increase_after`` successes at the current limit grow it by one, up to
  ``max_concurrency``.

It applies per attempt, so retries pass through it: :class:`~runtime.OpenAIModel`
holds one (``max_concurrency=`` or ``limiter=``), and :class:`RateLimitedModel` puts
one in front of any model (inside a :class:`~runtime.RetryingModel`, so that each
retry waits its turn).

One limiter serves one event loop at a time. Used on another (the next
``asyncio.run()``), it keeps what it learnt (the limit, a cool-down) and forgets the
slots and waiters of the last loop: a loop that was closed with attempts still in it
never gives those back.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from runtime.errors import ModelHTTPError
from runtime.model import Model, ModelRequest, ModelResponse, TextSink, WrapperModel, call_model

__all__ = ["AdaptiveLimiter", "RateLimitedModel"]


class AdaptiveLimiter:
    """Model calls in flight, bounded by a limit that halves on 429 and grows back.

    Args:
        max_concurrency: The limit to start at and grow back to.
        min_concurrency: The limit never goes below this.
        increase_after: Successes at the current limit that grow it by one.
        cooldown_s: Cool-down after a 429 that sent no ``Retry-After``.
        max_cooldown_s: Longest cool-down, whatever ``Retry-After`` asked for.

    Raises:
        ValueError: for a bound that is not positive or a minimum above the maximum.
    """

    def __init__(
        self,
        max_concurrency: int = 32,
        *,
        min_concurrency: int = 1,
        increase_after: int = 8,
        cooldown_s: float = 0.5,
        max_cooldown_s: float = 60.0,
    ) -> None:
        if not 1 <= min_concurrency <= max_concurrency:
            raise ValueError(
                f"need 1 <= min_concurrency <= max_concurrency, got {min_concurrency} "
                f"and {max_concurrency}"
            )
        if increase_after < 1:
            raise ValueError(f"increase_after must be at least 1, got {increase_after}")
        if cooldown_s < 0 or max_cooldown_s < cooldown_s:
            raise ValueError(
                f"need 0 <= cooldown_s <= max_cooldown_s, got {cooldown_s} and {max_cooldown_s}"
            )
        self.max_concurrency = max_concurrency
        self.min_concurrency = min_concurrency
        self.increase_after = increase_after
        self.cooldown_s = cooldown_s
        self.max_cooldown_s = max_cooldown_s
        self.throttled = 0
        """429s seen so far."""
        self._limit = max_concurrency
        self._loop: asyncio.AbstractEventLoop | None = None  # whose slots and waiters these are
        self._in_flight = 0
        self._waiters: deque[anyio.Event] = deque()
        self._cool_until = 0.0
        self._epoch = 0  # bumped at every decrease
        self._successes = 0

    def __repr__(self) -> str:
        return (
            f"AdaptiveLimiter(limit={self._limit}/{self.max_concurrency}, "
            f"in_flight={self._in_flight}, waiting={len(self._waiters)})"
        )

    @property
    def limit(self) -> int:
        """Attempts allowed in flight now."""
        return self._limit

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def waiting(self) -> int:
        """Callers waiting for a slot (not counting those sitting out a cool-down)."""
        return len(self._waiters)

    @property
    def cooldown_left_s(self) -> float:
        """Seconds until attempts may start again (0 when not cooling down)."""
        return max(self._cool_until - time.monotonic(), 0.0)

    @asynccontextmanager
    async def attempt(self) -> AsyncIterator[None]:
        """Hold a slot for one attempt; a 429 raised inside slows everyone down."""
        loop = self._adopt()
        epoch = await self._acquire(loop)
        try:
            yield
        except ModelHTTPError as exc:
            if exc.status == 429:
                self._on_throttled(epoch, exc.retry_after)
            raise
        else:
            self._on_success(epoch)
        finally:
            self._release(loop)

    def _adopt(self) -> asyncio.AbstractEventLoop:
        """The running loop, whose the slots and waiters are from now on."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._in_flight, self._waiters = loop, 0, deque()
        return loop

    async def _acquire(self, loop: asyncio.AbstractEventLoop) -> int:
        """Take a slot (first come, first served), then sit out any cool-down."""
        if self._in_flight < self._limit and not self._waiters:
            self._in_flight += 1
        else:
            waiter = anyio.Event()
            self._waiters.append(waiter)
            try:
                await waiter.wait()
            except BaseException:
                if waiter.is_set():
                    self._release(loop)  # handed a slot this caller will not use
                elif loop is self._loop:
                    self._waiters.remove(waiter)
                raise
        try:
            # Looped, not an Event: the cool-down is a deadline a new 429 may extend.
            while (left := self._cool_until - time.monotonic()) > 0:  # noqa: ASYNC110
                await anyio.sleep(left)
        except BaseException:
            self._release(loop)
            raise
        return self._epoch

    def _release(self, loop: asyncio.AbstractEventLoop) -> None:
        if loop is not self._loop:
            return  # a slot of a loop the limiter has left: it was forgotten with it
        self._in_flight -= 1
        if not loop.is_closed():  # an attempt ended as its closed loop is collected
            self._wake()

    def _wake(self) -> None:
        """Hand free slots to waiters, in order."""
        while self._waiters and self._in_flight < self._limit:
            self._in_flight += 1
            self._waiters.popleft().set()

    def _on_throttled(self, epoch: int, retry_after: float | None) -> None:
        self.throttled += 1
        wait = self.cooldown_s if retry_after is None else retry_after
        until = time.monotonic() + min(max(wait, 0.0), self.max_cooldown_s)
        self._cool_until = max(self._cool_until, until)
        if epoch == self._epoch:  # started after the last cut: a new congestion event
            self._limit = max(self._limit // 2, self.min_concurrency)
            self._epoch += 1
            self._successes = 0

    def _on_success(self, epoch: int) -> None:
        if epoch != self._epoch or self._limit >= self.max_concurrency:
            return  # started before the last cut: says nothing about the new limit
        self._successes += 1
        if self._successes >= self.increase_after:
            self._successes = 0
            self._limit += 1
            self._wake()


class RateLimitedModel(WrapperModel):
    """A model whose every call passes through an :class:`AdaptiveLimiter`.

    Put it inside a :class:`~runtime.RetryingModel` so that each retry passes through
    the limiter too; share one limiter between the models of one endpoint.
    """

    def __init__(self, inner: Model, limiter: AdaptiveLimiter | None = None) -> None:
        super().__init__(inner)
        self.limiter = limiter or AdaptiveLimiter()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        async with self.limiter.attempt():
            return await self.inner.complete(request)

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        async with self.limiter.attempt():
            return await call_model(self.inner, request, on_text)
