"""Adaptive rate limiting, shared by every worker that uses one model.

An :class:`AdaptiveLimiter` bounds the model calls in flight and adapts the bound to
what the endpoint takes (additive increase, multiplicative decrease, as TCP does):

- An HTTP 429 halves the limit (never below ``min_concurrency``) and starts a shared
  cool-down: no caller starts an attempt until the 429's ``Retry-After`` (else
  ``cooldown_s``) has passed. Attempts that were already in flight when the limit was
  cut do not cut it again, so a burst of 429s is one halving, not one per request.
- A 429 also teaches the rate the endpoint takes: the answers it gave since the last
  429 that taught one, over the time since (at each of the two its quota was spent, so
  that is the rate it refills at, whatever was sent in between). From then on attempts
  start paced, at 90% of that rate, and the pace grows by 2% of it every
  ``increase_after`` successes: the quota refills a little between two probes, and a
  probe past it costs one 429 or two, not a storm. Callers leaving a cool-down start
  one by one at that pace, not all at once to meet the same empty quota. The pace never
  holds attempts back more than ``min_concurrency`` calls in flight would (at the
  latency the answers took), and at twice the rate learnt, with no 429 since, it is
  dropped: attempts start freely again.
- Every ``increase_after`` successes at the current limit grow it by one, up to
  ``max_concurrency``.
- A cool-down holds retries too, but never past their call's retry deadline
  (:data:`retry_deadline`, which the retry policy sets for each attempt): a retry whose
  cool-down would end past it gives up at once with
  :class:`~runtime.errors.RetryAfterPastDeadline`, as one told the same ``Retry-After``
  by its own 429 does. The 429 still sets the cool-down when its own caller refused
  to wait so long: it is the endpoint's word for every caller.
- Where the endpoint says what is left of its quota (``x-ratelimit-remaining-*`` and
  ``x-ratelimit-reset-*`` for requests and tokens, read by
  :func:`~runtime.limits.quota.quota_from_headers` and given to
  :meth:`AdaptiveLimiter.observe`), attempts start freely while enough is left, and
  once it runs low they are spaced at the rate the quota refills (from
  ``x-ratelimit-limit-*``; without it, they wait for the reset): the limiter slows
  down before the first 429, not after it.

It applies per attempt, so retries pass through it: :class:`~runtime.OpenAIModel`
holds one (``max_concurrency=`` or ``limiter=``), and :class:`RateLimitedModel` puts
one in front of any model (inside a :class:`~runtime.RetryingModel`, so that each
retry waits its turn).

One limiter serves one event loop at a time. Used on another (the next
``asyncio.run()``), it keeps what it learnt (the limit, the pace, a cool-down) and
forgets the slots and waiters of the last loop: a loop that was closed with attempts
still in it never gives those back.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar

from runtime.concurrency import TimedOut, within
from runtime.errors import ModelHTTPError, RetryAfterPastDeadline
from runtime.limits.quota import QuotaLeft, quota_from_headers
from runtime.model import Model, ModelRequest, ModelResponse, TextSink, WrapperModel, call_model
from runtime.value import Value

# QuotaLeft and quota_from_headers are runtime.limits.quota's; named here too, beside
# observe(), which reads them.
__all__ = [
    "AdaptiveLimiter",
    "QuotaLeft",
    "RateLimitedModel",
    "RetryDeadline",
    "quota_from_headers",
    "retry_deadline",
]


class RetryDeadline(Value, frozen=True, kw_only=True):
    """The retry deadline of the model call an attempt belongs to.

    Attributes:
        at: When no retry may still be waiting (``time.monotonic()``).
        attempts: Attempts the call made before this one (0: this is the first).
    """

    at: float
    attempts: int


retry_deadline: ContextVar[RetryDeadline | None] = ContextVar(
    "honeycomb_retry_deadline", default=None
)
"""The retry deadline of the attempt the current task makes, set by the retry policy
for the attempt (:func:`runtime.limits.retry.deadline_of`): the limiter holds no retry
past it."""


_PACE = 0.97
"""Share of the quota's refill rate that paced attempts start at: a little below it,
so that jitter in when requests arrive does not empty the quota."""

_RESERVE = 0.02
"""Share of a limit that is left unspent before pacing starts (at least two calls'
worth): what requests on their way when the quota was read may still take."""

_BACKOFF = 0.9
"""Share of the rate a 429 taught that attempts are paced at just after it."""

_PROBE = 0.02
"""Share of the rate a 429 taught that the pace grows by every ``increase_after``
successes."""

_EVIDENCE = 8
"""Answers a rate is learnt from, at the least: a 429 that comes sooner (the later
ones of a burst) leaves the pace as it is, and the stretch goes on."""


class AdaptiveLimiter:
    """Model calls in flight, bounded by a limit that halves on 429 and grows back.

    Args:
        max_concurrency: The limit to start at and grow back to.
        min_concurrency: The limit never goes below this.
        increase_after: Successes at the current limit that grow it by one.
        cooldown_s: Cool-down after a 429 that sent no ``Retry-After``.
        max_cooldown_s: Longest cool-down, whatever ``Retry-After`` asked for.
        clock: The time now, in seconds (``time.monotonic``), that cool-downs and
            paces are reckoned by.
        sleep: Waits that many seconds of ``clock`` (``asyncio.sleep``). A test gives
            the two of a virtual clock, so that pacing is judged without waiting.

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
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
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
        self._now = clock
        self._sleep = sleep
        self.throttled = 0
        """429s seen so far."""
        self._limit = max_concurrency
        self._loop: asyncio.AbstractEventLoop | None = None  # whose slots and waiters these are
        self._in_flight = 0
        self._waiters: deque[asyncio.Event] = deque()
        self._cool_until = 0.0
        self._cooled_by: ModelHTTPError | None = None  # the 429 whose wait it is
        self._epoch = 0  # bumped at every decrease
        self._successes = 0
        # What the endpoint said of its quota (observe): attempts that may start
        # freely, and then the seconds between attempts (None: wait for the reset).
        self._allowance = math.inf
        self._interval: float | None = None
        self._refilled_at = 0.0
        self._next_start = 0.0
        self._tokens_per_call: float | None = None
        # What 429s alone tell (no headers): the answers since the last 429 that taught
        # a rate, and from when; the rate taught (answers a second); the pace attempts
        # start at (None: freely) and the next paced start; the latency of answers.
        self._answered = 0
        self._answered_from: float | None = None
        self._learnt = 0.0
        self._rate: float | None = None
        self._next_paced = 0.0
        # The waits for a paced start, in the order they were booked: a 429 that
        # changes the pace ends them, and each books again at the new one.
        self._booked: dict[within, None] = {}
        self._latency: float | None = None
        self.paced = 0
        """Attempts held back: to keep within the quota the endpoint reported, or to
        the pace its 429s taught."""

    def __repr__(self) -> str:
        return (
            f"AdaptiveLimiter(limit={self._limit}/{self.max_concurrency}, "
            f"in_flight={self._in_flight}, waiting={len(self._waiters)}, "
            f"pace={'none' if self._rate is None else f'{self._rate:.3g}/s'})"
        )

    @property
    def limit(self) -> int:
        """Attempts allowed in flight now."""
        return self._limit

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def pace(self) -> float | None:
        """Attempts a second that start, at most, by what 429s taught (None: no pace)."""
        return self._rate

    @property
    def waiting(self) -> int:
        """Callers waiting for a slot (not counting those sitting out a cool-down)."""
        return len(self._waiters)

    @property
    def cooldown_left_s(self) -> float:
        """Seconds until attempts may start again (0 when not cooling down)."""
        return max(self._cool_until - self._now(), 0.0)

    @property
    def cooled_by(self) -> ModelHTTPError | None:
        """The 429 whose wait the cool-down is (None when not cooling down)."""
        return self._cooled_by if self._cool_until > self._now() else None

    @asynccontextmanager
    async def attempt(self) -> AsyncIterator[None]:
        """Hold a slot for one attempt; a 429 raised inside slows everyone down."""
        loop = self._adopt()
        epoch = await self._acquire(loop)
        started = self._now()
        try:
            yield
        except ModelHTTPError as exc:
            if exc.status == 429:
                self._on_throttled(epoch, exc)
            raise
        else:
            self._on_success(epoch, self._now() - started)
        finally:
            self._release(loop)

    def _adopt(self) -> asyncio.AbstractEventLoop:
        """The running loop, whose the slots and waiters are from now on."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._in_flight, self._waiters = loop, 0, deque()
            self._booked = {}
        return loop

    async def _acquire(self, loop: asyncio.AbstractEventLoop) -> int:
        """Take a slot (first come, first served), then sit out any cool-down, and
        wait for this attempt's paced start."""
        if self._answered_from is None:
            self._answered_from = self._now()
        if self._in_flight < self._limit and not self._waiters:
            self._in_flight += 1
        else:
            waiter = asyncio.Event()
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
            # Looped, not an Event: the cool-down is a deadline a new 429 may extend,
            # also while a caller waits for its paced start.
            while True:
                while (left := self._cool_until - self._now()) > 0:
                    self._refuse_past_deadline(left)
                    await self._sleep(left)
                await self._pace()
                if self._cool_until <= self._now():
                    break
        except BaseException:
            self._release(loop)
            raise
        return self._epoch

    def _refuse_past_deadline(self, wait_s: float) -> None:
        """Give a retry up at once if its cool-down, ``wait_s`` more, would end past its
        call's retry deadline (the first attempt of a call is not a retry: it waits).

        Raises:
            RetryAfterPastDeadline: the 429 that asked for the cool-down, and the
                deadline left.
        """
        deadline, cause = retry_deadline.get(), self._cooled_by
        if deadline is None or not deadline.attempts or cause is None:
            return
        left = deadline.at - time.monotonic()  # the retry policy's clock
        if wait_s >= left:
            left = max(left, 0.0)
            raise RetryAfterPastDeadline(
                cause, deadline_left_s=left, attempts=deadline.attempts
            ) from cause

    async def _pace(self) -> None:
        """Wait for this attempt's start: by the quota the endpoint reported, then by
        the pace 429s taught."""
        held = await self._pace_by_quota()
        held = await self._pace_by_429s() or held
        if held:
            self.paced += 1

    async def _pace_by_quota(self) -> bool:
        """Start now while the quota has room, else at the next moment paced at its
        refill rate; True if this attempt was held back."""
        if self._allowance >= 1:
            self._allowance -= 1
            return False
        now = self._now()
        if self._interval is None:
            start = self._refilled_at  # no rate known: the quota is whole again then
        else:
            start = max(now, self._next_start)
            self._next_start = start + self._interval
        if start <= now:
            return False
        await self._sleep(start - now)
        return True

    async def _pace_by_429s(self) -> bool:
        """Start at the next paced moment, booked again if a 429 changes the pace
        meanwhile; True if this attempt was held back."""
        held = False
        while self._rate is not None:
            now = self._now()
            start = max(now, self._next_paced)
            self._next_paced = start + 1 / self._rate
            if start <= now:
                break
            held, booked = True, within(None)
            self._booked[booked] = None
            try:
                with contextlib.suppress(TimedOut), booked:
                    await self._sleep(start - now)
            finally:
                self._booked.pop(booked, None)
            if not booked.expired:
                break
        return held

    def observe(self, quota: QuotaLeft | None, *, tokens: int | None = None) -> None:
        """Take in what an answer said of the endpoint's quota, and the tokens it cost.

        Called by a model adapter within an attempt (:meth:`attempt`), for every answer,
        429s included. Attempts still out besides this one count as spent: the quota
        may not have counted them yet.

        Args:
            quota: What is left (:func:`quota_from_headers`); None: nothing was said.
            tokens: The answer's input plus output tokens, which a tokens limit counts.
        """
        if tokens is not None and tokens > 0:
            known = self._tokens_per_call
            self._tokens_per_call = tokens if known is None else 0.7 * known + 0.3 * tokens
        if quota is None:
            return
        now = self._now()
        others = max(self._in_flight - 1, 0)
        allowance, interval, refilled_at = math.inf, None, now
        for left, reset_s, limit, cost in (
            (quota.requests, quota.requests_reset_s, quota.requests_limit, 1.0),
            (quota.tokens, quota.tokens_reset_s, quota.tokens_limit, self._tokens_per_call),
        ):
            if left is None or cost is None:
                continue
            reserve = max(2 * cost, _RESERVE * (limit or 0.0))
            allowance = min(allowance, (left - reserve) / cost - others)
            if reset_s is not None:
                refilled_at = max(refilled_at, now + reset_s)
                if limit is not None and limit > left and reset_s > 0:
                    calls_per_s = (limit - left) / reset_s / cost
                    interval = max(interval or 0.0, 1 / (calls_per_s * _PACE))
        self._allowance, self._refilled_at = allowance, refilled_at
        if interval is not None:
            self._interval = interval  # a quota's rate stays; a full quota does not say it

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

    def _on_throttled(self, epoch: int, exc: ModelHTTPError) -> None:
        self.throttled += 1
        now = self._now()
        wait = self.cooldown_s if exc.retry_after is None else exc.retry_after
        until = now + min(max(wait, 0.0), self.max_cooldown_s)
        if until >= self._cool_until:
            # Set even when its own caller gave up rather than wait (its deadline too
            # near): the endpoint asked every caller to wait.
            self._cool_until, self._cooled_by = until, exc
        if epoch == self._epoch:  # started after the last cut: a new congestion event
            self._learn_rate(now)
            self._limit = max(self._limit // 2, self.min_concurrency)
            self._epoch += 1
            self._successes = 0
            # Starts booked at the old pace are void: the next starts at the cool-down's
            # end, and every attempt waiting for one books again at the new pace.
            self._next_paced = self._cool_until
            booked, self._booked = self._booked, {}
            for block in booked:
                block.expire()

    def _learn_rate(self, now: float) -> None:
        """The rate of the answers since the last 429 that taught one: at each of the
        two the endpoint's quota was spent, so that is the rate it refills at (the
        first stretch also spends a quota that was full, and overstates it). Too few
        answers to tell (the 429s of one burst): the stretch goes on."""
        since = self._answered_from
        if self._answered >= _EVIDENCE and since is not None and now > since:
            self._learnt = self._answered / (now - since)
            self._rate = _BACKOFF * self._learnt
            self._answered, self._answered_from = 0, now
        if self._rate is not None and self._latency:
            # No slower than min_concurrency calls one after another: a 429 that is
            # not of a quota (an endpoint at its capacity, a fault) cannot stall it.
            self._rate = max(self._rate, self.min_concurrency / self._latency)

    def _on_success(self, epoch: int, latency: float) -> None:
        self._answered += 1
        known = self._latency
        self._latency = latency if known is None else 0.8 * known + 0.2 * latency
        if self._rate is not None:
            self._rate += _PROBE * self._learnt / self.increase_after
            if self._rate >= 2 * self._learnt:
                self._rate = None  # twice what the endpoint took, and no 429: let go
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
