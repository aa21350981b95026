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
  one by one at that pace, not all at once to meet the same empty quota, however slow
  it is (slower than one call at a time, if that is what the quota takes). A stretch
  leaves out the time the limiter was idle (no attempt in flight, no cool-down): the
  time nobody asked says nothing of the rate the endpoint takes. A 429 that comes before a
  stretch has enough answers to learn from halves the pace instead: it let the quota
  be spent again that soon. It halves no lower than one start per the wait that 429
  asked for (its ``Retry-After``, else ``cooldown_s``): the endpoint takes a call again
  after that, so a run of 429s never holds callers for longer than they ask. At twice
  the rate learnt, with no 429 since, the pace is dropped: attempts start freely again.
- Every ``increase_after`` successes at the current limit grow it by one, up to
  ``max_concurrency``.
- A cool-down and a paced start hold retries too, but never past their call's retry
  deadline (:data:`retry_deadline`, which the retry policy sets for each attempt): a
  retry whose wait would end past it gives up at once with
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

Paced starts are booked as callers come (:class:`~runtime.limits.pacing.Pacer`): a
caller that leaves before its start gives it back to the callers booked after it.

It applies per attempt, so retries pass through it: :class:`~runtime.OpenAIModel`
holds one (``max_concurrency=`` or ``limiter=``), and :class:`RateLimitedModel` puts
one in front of any model (inside a :class:`~runtime.RetryingModel`, so that each
retry waits its turn).

One limiter serves one event loop at a time (a :class:`~runtime.concurrency.PerLoop`).
Used on the next, once the last has stopped (the next ``asyncio.run()``), it keeps
what it learnt (the limit, the pace, a cool-down) and forgets the slots and waiters of
the last loop: a loop that was closed with attempts still in it never gives those
back. Used from a second loop while the first still runs (another thread's), it
raises :class:`~runtime.errors.EventLoopConflict`: a model per thread.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar

from runtime.concurrency import OneLoop, PerLoop
from runtime.errors import ModelHTTPError, RetryAfterPastDeadline
from runtime.limits.budget import waited
from runtime.limits.pacing import Pacer, QuotaPace
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
        last: What the attempt before this one failed with: what a retry that a paced
            start would hold past ``at`` gives up with.
        deadline: What sets ``at``, in words (the retry policy's deadline, or the
            run's wall time when that ends sooner).
    """

    at: float
    attempts: int
    last: BaseException | None = None
    deadline: str = "the retry deadline"


retry_deadline: ContextVar[RetryDeadline | None] = ContextVar(
    "honeycomb_retry_deadline", default=None
)
"""The retry deadline of the attempt the current task makes, set by the retry policy
for the attempt (:func:`runtime.limits.retry.deadline_of`): the limiter holds no retry
past it."""


_BACKOFF = 0.9
"""Share of the rate a 429 taught that attempts are paced at just after it."""

_PROBE = 0.02
"""Share of the rate a 429 taught that the pace grows by every ``increase_after``
successes."""

_EVIDENCE = 8
"""Answers a rate is learnt from, at the least: a 429 that comes sooner halves the
pace instead (it let the quota be spent again that soon), and the stretch goes on."""

_BY_QUOTA = "the rate limiter's pace at the quota the endpoint reported"
_BY_429S = "the rate limiter's pace learnt from 429s"
"""Where the wait of a paced start comes from, as a retry that refuses it says."""


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
        self._serving = PerLoop(self._serve, OneLoop("an AdaptiveLimiter (a model's)"))
        self._in_flight = 0
        self._waiters: deque[asyncio.Event] = deque()
        self._cool_until = 0.0
        self._cooled_by: ModelHTTPError | None = None  # the 429 whose wait it is
        self._epoch = 0  # bumped at every decrease
        self._successes = 0
        self._quota = QuotaPace(clock, sleep)  # what the endpoint said of its quota
        # What 429s alone tell (no headers): the answers since the last 429 that taught
        # a rate, and from when (moved on by the time the limiter was idle since, when
        # no attempt was in flight); the rate taught (answers a second); the pace
        # attempts start at (None: freely).
        self._answered = 0
        self._answered_from = 0.0
        self._idle_since: float | None = None  # None: never used
        self._learnt = 0.0
        self._rate: float | None = None
        self._paced_starts = Pacer(clock, sleep)
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

    @property
    def cooldown_asked_by(self) -> str:
        """Where the cool-down's wait comes from, in words: a 429's ``Retry-After``,
        or the cool-down a 429 without one gets (``cooldown_s``)."""
        cause = self._cooled_by
        if cause is not None and cause.retry_after is None:
            return "the rate limiter's cool-down after a 429 with no Retry-After"
        return "the rate limiter's cool-down for a 429's Retry-After"

    @asynccontextmanager
    async def attempt(self) -> AsyncIterator[None]:
        """Hold a slot for one attempt; a 429 raised inside slows everyone down."""
        loop = self._adopt()
        epoch = await self._acquire(loop)
        try:
            yield
        except ModelHTTPError as exc:
            if exc.status == 429:
                self._on_throttled(epoch, exc)
            raise
        else:
            self._on_success(epoch)
        finally:
            self._release(loop)

    def _adopt(self) -> asyncio.AbstractEventLoop:
        """The running loop, whose the slots and waiters are from now on.

        Raises:
            EventLoopConflict: while another loop that used it still runs.
        """
        return self._serving.get()

    def _serve(self) -> asyncio.AbstractEventLoop:
        """Serve the running loop, a new one: the last one's slots and waiters are gone."""
        self._loop, self._in_flight, self._waiters = asyncio.get_running_loop(), 0, deque()
        self._quota.forget()
        self._paced_starts.forget()
        return self._loop

    async def _acquire(self, loop: asyncio.AbstractEventLoop) -> int:
        """Take a slot (first come, first served), then sit out any cool-down, and
        wait for this attempt's paced start; then check the budget of its model call
        (:func:`~runtime.limits.budget.waited`).

        Raises:
            BudgetExceeded: when the model call's budget was spent meanwhile (the
                slot is given back, nothing is sent).
        """
        if not self._in_flight and not self._waiters:
            self._leave_out_idle_time()
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
                    self._refuse_past_deadline(left, self.cooldown_asked_by, self._cooled_by)
                    await self._sleep(left)
                await self._pace()
                if self._cool_until <= self._now():
                    break
            waited()  # the calls that went first may have spent its budget meanwhile
        except BaseException:
            self._release(loop)
            raise
        return self._epoch

    def _leave_out_idle_time(self) -> None:
        """Move the stretch a rate is learnt from on by the time the limiter was idle
        until now (no attempt in flight, and no cool-down: retries sitting one out
        wait outside it): the time nobody asked says nothing of the rate the endpoint
        takes."""
        now = self._now()
        if self._idle_since is None:  # its first attempt
            self._answered_from = now
        else:
            self._answered_from += max(now - max(self._idle_since, self._cool_until), 0.0)

    def _refuse_past_deadline(
        self, wait_s: float, asked_by: str, cause: ModelHTTPError | None = None
    ) -> None:
        """Give a retry up at once if its wait, ``wait_s`` more, would end past its
        call's retry deadline (the first attempt of a call is not a retry: it waits).

        Args:
            wait_s: The wait the retry would make.
            asked_by: Where the wait comes from, in words.
            cause: The 429 that asked for it; None: no answer did (a paced start), and
                the retry gives up with the error it follows.

        Raises:
            RetryAfterPastDeadline: the wait, where it comes from, and the deadline
                left, with the 429 that asked for it or the HTTP error the retry follows.
            BaseException: the error the retry follows, when it was no HTTP answer (a
                timeout, a lost connection) and no 429 asked for the wait.
        """
        deadline = retry_deadline.get()
        if deadline is None or not deadline.attempts:
            return
        left = deadline.at - time.monotonic()  # the retry policy's clock
        if wait_s < left:
            return
        given_up: BaseException | None = cause or deadline.last
        if isinstance(given_up, ModelHTTPError):
            raise RetryAfterPastDeadline(
                given_up,
                deadline_left_s=max(left, 0.0),
                attempts=deadline.attempts,
                wait_s=wait_s,
                asked_by=asked_by,
                deadline=deadline.deadline,
            ) from given_up
        if given_up is not None:
            raise given_up  # as the retry policy does when it stops: the error retried

    async def _pace(self) -> None:
        """Wait for this attempt's start: by the quota the endpoint reported, then by
        the pace 429s taught (booked again if a 429 changes it meanwhile)."""
        held = await self._quota.start(lambda wait: self._refuse_past_deadline(wait, _BY_QUOTA))
        held = (
            await self._paced_starts.start(
                lambda: None if self._rate is None else 1 / self._rate,
                lambda wait: self._refuse_past_deadline(wait, _BY_429S),
            )
            or held
        )
        if held:
            self.paced += 1

    def observe(self, quota: QuotaLeft | None, *, tokens: int | None = None) -> None:
        """Take in what an answer said of the endpoint's quota, and the tokens it cost
        (see :class:`~runtime.limits.pacing.QuotaPace`).

        Called by a model adapter within an attempt (:meth:`attempt`), for every answer,
        429s included. Attempts still out besides this one count as spent: the quota
        may not have counted them yet.

        Args:
            quota: What is left (:func:`quota_from_headers`); None: nothing was said.
            tokens: The answer's input plus output tokens, which a tokens limit counts.
        """
        self._quota.observe(quota, tokens=tokens, others=max(self._in_flight - 1, 0))

    def _release(self, loop: asyncio.AbstractEventLoop) -> None:
        if loop is not self._loop:
            return  # a slot of a loop the limiter has left: it was forgotten with it
        self._in_flight -= 1
        if not loop.is_closed():  # an attempt ended as its closed loop is collected
            self._wake()
        if not self._in_flight:
            self._idle_since = self._now()

    def _wake(self) -> None:
        """Hand free slots to waiters, in order."""
        while self._waiters and self._in_flight < self._limit:
            self._in_flight += 1
            self._waiters.popleft().set()

    def _on_throttled(self, epoch: int, exc: ModelHTTPError) -> None:
        self.throttled += 1
        now = self._now()
        wait = self.cooldown_s if exc.retry_after is None else exc.retry_after
        cooldown = min(max(wait, 0.0), self.max_cooldown_s)
        until = now + cooldown
        if until >= self._cool_until:
            # Set even when its own caller gave up rather than wait (its deadline too
            # near): the endpoint asked every caller to wait.
            self._cool_until, self._cooled_by = until, exc
        if epoch == self._epoch:  # started after the last cut: a new congestion event
            self._learn_rate(now, cooldown or self.cooldown_s)
            self._limit = max(self._limit // 2, self.min_concurrency)
            self._epoch += 1
            self._successes = 0
            # Starts booked at the old pace are void: the next starts at the cool-down's
            # end, and every attempt waiting for one books again at the new pace.
            self._paced_starts.restart(self._cool_until)

    def _learn_rate(self, now: float, cooldown: float) -> None:
        """The rate of the answers since the last 429 that taught one: at each of the
        two the endpoint's quota was spent, so that is the rate it refills at (the
        first stretch also spends a quota that was full, and overstates it). Too few
        answers to tell: the stretch goes on, and a pace that let the quota be spent
        again so soon halves (as the limit in flight does), though never below one
        start per ``cooldown``, the wait this 429 asked for: the endpoint takes a call
        again after it."""
        since = self._answered_from
        if self._answered >= _EVIDENCE and now > since:
            self._learnt = self._answered / (now - since)
            self._rate = _BACKOFF * self._learnt
            self._answered, self._answered_from = 0, now
        elif self._rate is not None:
            floor = 1 / cooldown if cooldown > 0 else 0.0
            self._rate = max(self._rate / 2, min(floor, self._rate))

    def _on_success(self, epoch: int) -> None:
        self._answered += 1
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

    tells_attempts = True  # its calls, once they have their start (runtime.model.tells_attempts)

    def __init__(self, inner: Model, limiter: AdaptiveLimiter | None = None) -> None:
        super().__init__(inner)
        self.limiter = limiter or AdaptiveLimiter()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        async with self.limiter.attempt():
            return await self.inner.complete(request)

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        async with self.limiter.attempt():
            return await call_model(self.inner, request, on_text)
