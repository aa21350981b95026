"""Adaptive rate limiting, shared by every worker that uses one model.

An :class:`AdaptiveLimiter` bounds the model calls in flight and adapts the bound to
what the endpoint takes (additive increase, multiplicative decrease, as TCP does):

- An HTTP 429 halves the limit (never below ``min_concurrency``) and starts a shared
  cool-down: no caller starts an attempt until the 429's ``Retry-After`` (else
  ``cooldown_s``) has passed. Attempts that were already in flight when the limit was
  cut do not cut it again, so a burst of 429s is one halving, not one per request.
- The callers leaving a cool-down (those that sat it out, and the retries that waited
  out the same ``Retry-After``) start one by one, paced at the rate the endpoint
  answered at between its last two bursts of 429s, not all at once to meet the same
  empty quota; once none is waiting for its turn, attempts start freely again.
- Every ``increase_after`` successes at the current limit grow it by one, up to
  ``max_concurrency``.
- Where the endpoint says what is left of its quota (``x-ratelimit-remaining-*`` and
  ``x-ratelimit-reset-*`` for requests and tokens, read by :func:`quota_from_headers`
  and given to :meth:`AdaptiveLimiter.observe`), attempts start freely while enough
  is left, and once it runs low they are spaced at the rate the quota refills (from
  ``x-ratelimit-limit-*``; without it, they wait for the reset): the limiter slows
  down before the first 429, not after it.

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
import math
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import anyio

from runtime.errors import ModelHTTPError
from runtime.model import Model, ModelRequest, ModelResponse, TextSink, WrapperModel, call_model
from runtime.value import Value

__all__ = ["AdaptiveLimiter", "QuotaLeft", "RateLimitedModel", "quota_from_headers"]


class QuotaLeft(Value, frozen=True, kw_only=True):
    """What an endpoint said is left of its rate limits, after one answer.

    Attributes:
        requests: Requests left now.
        requests_reset_s: Seconds until the requests limit is whole again.
        requests_limit: The requests limit itself.
        tokens: Tokens left now.
        tokens_reset_s: Seconds until the tokens limit is whole again.
        tokens_limit: The tokens limit itself.
    """

    requests: float | None = None
    requests_reset_s: float | None = None
    requests_limit: float | None = None
    tokens: float | None = None
    tokens_reset_s: float | None = None
    tokens_limit: float | None = None


def quota_from_headers(headers: Mapping[str, str]) -> QuotaLeft | None:
    """The ``x-ratelimit-{remaining,reset,limit}-{requests,tokens}`` headers (OpenAI's,
    also sent by Groq, Together, vLLM behind a gateway ...), or None when none of them
    makes sense. Resets are read as OpenAI writes them (``1s``, ``6m0s``, ``250ms``) or
    as plain seconds."""
    found: dict[str, float] = {}
    for kind in ("requests", "tokens"):
        for part, field in (("remaining", kind), ("reset", f"{kind}_reset_s"),
                            ("limit", f"{kind}_limit")):  # fmt: skip
            value = headers.get(f"x-ratelimit-{part}-{kind}")
            number = None if value is None else _number(value, duration=part == "reset")
            if number is not None:
                found[field] = number
    if "requests" not in found and "tokens" not in found:
        return None
    return QuotaLeft(**found)


_DURATION = re.compile(r"(\d+(?:\.\d*)?)(ms|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def _number(value: str, *, duration: bool) -> float | None:
    """A non-negative number; for a duration, seconds from ``1m30.5s`` or ``20ms``."""
    text = value.strip()
    try:
        number = float(text)
    except ValueError:
        if not duration or not text or _DURATION.sub("", text):
            return None
        number = sum(float(n) * _UNIT_S[unit] for n, unit in _DURATION.findall(text))
    return number if math.isfinite(number) and number >= 0 else None


_PACE = 0.97
"""Share of the quota's refill rate that paced attempts start at: a little below it,
so that jitter in when requests arrive does not empty the quota."""

_RESERVE = 0.02
"""Share of a limit that is left unspent before pacing starts (at least two calls'
worth): what requests on their way when the quota was read may still take."""


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
        # What the endpoint said of its quota (observe): attempts that may start
        # freely, and then the seconds between attempts (None: wait for the reset).
        self._allowance = math.inf
        self._interval: float | None = None
        self._refilled_at = 0.0
        self._next_start = 0.0
        self._tokens_per_call: float | None = None
        # What 429s alone tell (no headers): the attempts started since the last burst
        # of 429s that were not answered 429, and from when; the seconds between such
        # attempts that makes (0: nothing learnt yet); when the next caller leaving a
        # cool-down may start (None: no one is leaving one), and how many are to.
        self._passed = 0
        self._passed_from: float | None = None
        self._spacing = 0.0
        self._departure: float | None = None
        self._leaving = 0
        self._out = 0  # attempts started and not yet answered
        self.paced = 0
        """Attempts held back: to keep within the quota the endpoint reported, or to
        leave a cool-down in turn."""

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
        self._out += 1
        try:
            yield
        except ModelHTTPError as exc:
            if exc.status == 429:
                self._on_throttled(epoch, exc.retry_after)
            raise
        else:
            self._on_success(epoch)
        finally:
            if loop is self._loop:  # else forgotten with the loop it left
                self._out -= 1
            self._release(loop)

    def _adopt(self) -> asyncio.AbstractEventLoop:
        """The running loop, whose the slots and waiters are from now on."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._in_flight, self._out, self._waiters = loop, 0, 0, deque()
        return loop

    async def _acquire(self, loop: asyncio.AbstractEventLoop) -> int:
        """Take a slot (first come, first served), then sit out any cool-down, and
        leave it in turn."""
        if self._passed_from is None:
            self._passed_from = time.monotonic()
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
            await self._cool_down()
            await self._pace()
        except BaseException:
            self._release(loop)
            raise
        self._passed += 1
        return self._epoch

    async def _cool_down(self) -> None:
        """Sit out any cool-down, then wait for this caller's turn to leave it."""
        if self._cool_until > time.monotonic():
            self._leaving += 1
        while True:
            # Looped, not an Event: the cool-down is a deadline a new 429 may extend,
            # also while a caller waits for its turn.
            while (left := self._cool_until - time.monotonic()) > 0:  # noqa: ASYNC110
                await anyio.sleep(left)
            wait = self._turn()
            if wait <= 0:
                return
            await anyio.sleep(wait)
            if self._cool_until <= time.monotonic():
                return

    def _turn(self) -> float:
        """Seconds until this caller's turn to leave a cool-down (0: now, or there is
        no cool-down to leave); taking a turn books the next one, a spacing later."""
        if self._departure is None:
            return 0.0
        now = time.monotonic()
        if self._leaving <= 0 or now - self._departure > self._spacing:
            # All have left, or none was waiting for a turn (with no rate learnt yet,
            # none ever is: they leave together).
            self._departure, self._leaving = None, 0
            return 0.0
        self._leaving -= 1
        start = max(now, self._departure)
        self._departure = start + self._spacing
        if start > now:
            self.paced += 1
        return start - now

    async def _pace(self) -> None:
        """Start now while the quota has room, else at the next paced moment."""
        if self._allowance >= 1:
            self._allowance -= 1
            return
        now = time.monotonic()
        if self._interval is None:
            start = self._refilled_at  # no rate known: the quota is whole again then
        else:
            start = max(now, self._next_start)
            self._next_start = start + self._interval
        if start > now:
            self.paced += 1
            await anyio.sleep(start - now)

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
        now = time.monotonic()
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

    def _on_throttled(self, epoch: int, retry_after: float | None) -> None:
        self.throttled += 1
        now = time.monotonic()
        wait = self.cooldown_s if retry_after is None else retry_after
        until = now + min(max(wait, 0.0), self.max_cooldown_s)
        self._cool_until = max(self._cool_until, until)
        if epoch == self._epoch:  # started after the last cut: a new congestion event
            self._passed -= 1  # the quota had no room for it
            self._learn_rate(now)
            self._limit = max(self._limit // 2, self.min_concurrency)
            self._epoch += 1
            self._successes = 0
        # The first caller leaves as the cool-down ends, the others a spacing apart:
        # this call's retry, and each caller that sits the cool-down out.
        if self._departure is None or self._departure < self._cool_until:
            self._departure = self._cool_until
        self._leaving += 1

    def _learn_rate(self, now: float) -> None:
        """The rate of the attempts the endpoint took (started, not answered 429)
        between its last two bursts of 429s: at each burst its quota is spent, so that
        is the rate it refills at (the first stretch also spends a full quota, and
        overstates it)."""
        since = self._passed_from
        # Those still out when the quota ran dry are not counted: most meet it dry too.
        passed = self._passed - max(self._out - 1, 0)
        if passed > 0 and since is not None and now > since:
            self._spacing = (now - since) / passed / _PACE
        self._passed, self._passed_from = 0, now

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
