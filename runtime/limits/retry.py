"""Retrying model calls: one policy, built on tenacity, used by every model adapter.

Only errors that say so are retried (``ModelError.retryable``: HTTP 408, 409, 429,
5xx, connection errors, timeouts, a 200 whose body is not JSON). Waits grow
exponentially with jitter, except that a ``Retry-After`` the endpoint sent is
honoured, and a retry through a rate limiter waits at least its cool-down (the
limiter would hold it that long anyway: the wait reported is the wait made). The
policy stops after a number of attempts or before a total deadline would be passed,
whichever comes first; a ``Retry-After`` that would end past the deadline gives up
at once with :class:`~runtime.errors.RetryAfterPastDeadline`, and so does a retry
whose limiter's cool-down (another call's ``Retry-After``) would, whether it is known
when the retry's wait is chosen or comes while it waits (:func:`deadline_of` tells
the limiter the deadline).

Each retry is reported to the model call's caller, if it asked
(:func:`runtime.events.report_retry`), else logged.

A streamed call is retried only before any of its text was shown: an attempt that
fails after is a :class:`~runtime.errors.StreamInterrupted`, which is never retried
(whoever listened would see the text again).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import tenacity
from tenacity import RetryCallState
from tenacity.wait import wait_base

from runtime import logs
from runtime.errors import (
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelTimeout,
    RetryAfterPastDeadline,
    StreamInterrupted,
)
from runtime.events import report_retry
from runtime.limits.ratelimit import AdaptiveLimiter, RetryDeadline, retry_deadline
from runtime.limits.retry_policy import RetryPolicy
from runtime.model import Model, ModelRequest, ModelResponse, TextSink, WrapperModel, call_model
from runtime.secrets import HeldText

__all__ = [
    "RetryingModel",
    "ShownText",
    "deadline_of",
    "limiter_of",
    "retrying",
    "wait_at_least",
    "wait_retry_after",
]


class wait_retry_after(wait_base):
    """Wait what the endpoint asked for (``Retry-After``), else fall back to another wait.

    Composes with tenacity's other waits (``+``) like any tenacity strategy.
    """

    def __init__(self, fallback: wait_base, *, max_wait_s: float = 120.0) -> None:
        self.fallback = fallback
        self.max_wait_s = max_wait_s

    def __call__(self, retry_state: RetryCallState) -> float:
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome is not None and outcome.failed else None
        asked = getattr(exc, "retry_after", None)
        if isinstance(asked, int | float) and asked >= 0:
            return min(float(asked), self.max_wait_s)
        return self.fallback(retry_state)


class wait_at_least(wait_base):
    """Wait what another wait says, but no less than ``floor()`` seconds: what a rate
    limiter will hold the next attempt for anyway (its cool-down after a 429), so that
    the wait a retry reports is the wait it makes."""

    def __init__(self, wait: wait_base, floor: Callable[[], float]) -> None:
        self.wait = wait
        self.floor = floor

    def __call__(self, retry_state: RetryCallState) -> float:
        return max(self.wait(retry_state), self.floor())


def retrying(policy: RetryPolicy, limiter: AdaptiveLimiter | None = None) -> tenacity.AsyncRetrying:
    """A tenacity controller carrying out ``policy`` (one per call: it holds state).

    Args:
        policy: When and how long to retry.
        limiter: The limiter each attempt passes through: a retry waits at least
            its cool-down (which would hold it anyway), and reports that wait.
    """
    backoff = tenacity.wait_exponential(
        multiplier=policy.initial_wait_s, max=policy.max_wait_s
    ) + tenacity.wait_random(0, policy.jitter_s)
    # Capped at the deadline, not max_wait_s: stop_before_delay then stops at once.
    wait: wait_base = wait_retry_after(backoff, max_wait_s=policy.deadline_s)
    if limiter is not None:
        wait = wait_at_least(wait, lambda: limiter.cooldown_left_s)

    def retries(exc: BaseException) -> bool:
        """Whether to retry after ``exc``: never once a stream has shown text."""
        return not isinstance(exc, StreamInterrupted) and policy.retry_on(exc)

    return tenacity.AsyncRetrying(
        stop=tenacity.stop_after_attempt(policy.attempts)
        | tenacity.stop_before_delay(policy.deadline_s),
        wait=wait,
        retry=tenacity.retry_if_exception(retries),
        sleep=asyncio.sleep,
        reraise=True,
        before_sleep=_report_retry,
        retry_error_callback=lambda state: _give_up(policy, limiter, state),
    )


@contextlib.contextmanager
def deadline_of(policy: RetryPolicy, attempt: tenacity.AttemptManager) -> Iterator[None]:
    """The block is ``attempt`` of a call retried under ``policy``: a rate limiter it
    passes through holds it no longer than the policy's deadline (a cool-down that
    would end past it gives the retry up with :class:`RetryAfterPastDeadline`)."""
    state = attempt.retry_state
    at = state.start_time + policy.deadline_s  # tenacity's clock: time.monotonic()
    token = retry_deadline.set(RetryDeadline(at=at, attempts=state.attempt_number - 1))
    try:
        yield
    finally:
        retry_deadline.reset(token)


def _give_up(policy: RetryPolicy, limiter: AdaptiveLimiter | None, state: RetryCallState) -> Any:
    """Raise the last error, saying so when a Retry-After past the deadline (not the
    number of attempts) is why no retry follows: the error's own, or the one the
    limiter's cool-down is the wait of."""
    outcome = state.outcome
    assert outcome is not None  # tenacity stops only after an attempt
    exc = outcome.exception()
    if exc is not None and state.attempt_number < policy.attempts:
        left = policy.deadline_s - (state.seconds_since_start or 0.0)
        asked = None
        if isinstance(exc, ModelHTTPError) and exc.retry_after is not None:
            asked = exc if exc.retry_after >= left else None
        if asked is None and limiter is not None and limiter.cooldown_left_s >= left:
            asked = limiter.cooled_by
        if asked is not None:
            left, attempts = max(left, 0.0), state.attempt_number
            raise RetryAfterPastDeadline(asked, deadline_left_s=left, attempts=attempts) from exc
    return outcome.result()  # raises the last error


class RetryingModel(WrapperModel):
    """A model that retries another model's failed calls under a :class:`RetryPolicy`."""

    def __init__(self, inner: Model, policy: RetryPolicy | None = None) -> None:
        super().__init__(inner)
        self.policy = policy or RetryPolicy()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        async for attempt in retrying(self.policy, limiter_of(self.inner)):
            with attempt, deadline_of(self.policy, attempt):
                return await self.inner.complete(request)
        raise AssertionError("unreachable: tenacity re-raises the last error")  # pragma: no cover

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        """The inner model's streamed answer, retried until some text is shown.

        Raises:
            StreamInterrupted: when an attempt failed after it had shown text.
        """
        shown = ShownText(on_text)
        async for attempt in retrying(self.policy, limiter_of(self.inner)):
            with attempt, shown.guard(repr(self.inner)), deadline_of(self.policy, attempt):
                return await call_model(self.inner, request, shown)
        raise AssertionError("unreachable: tenacity re-raises the last error")  # pragma: no cover


class ShownText:
    """Passes a streamed call's text on to ``on_text``, counting what was shown, so
    that a failure after some text is told apart from one before any (:meth:`guard`).
    Secrets are masked on the way (:class:`~runtime.secrets.HeldText`): what could
    begin one waits for the next piece, or the attempt's end."""

    def __init__(self, on_text: TextSink) -> None:
        self.on_text = on_text
        self.chars = 0
        self._held = HeldText(self._show)

    def __call__(self, text: str) -> None:
        self._held(text)

    def _show(self, text: str) -> None:
        self.chars += len(text)
        self.on_text(text)

    @contextlib.contextmanager
    def guard(self, model: str) -> Iterator[None]:
        """An error raised in the block once text was shown becomes a
        :class:`StreamInterrupted` (the error its cause), whatever it is (a model of
        one's own raises its own, which a policy's ``retry_on`` may retry); before, it
        stays itself.

        Raises:
            StreamInterrupted: for an error after text was shown.
        """
        self._held.drop()  # what a failed attempt held back was never shown
        try:
            yield
            self._held.flush()
        except StreamInterrupted:
            raise
        except Exception as exc:
            if not self.chars:
                raise
            reason = f"{type(exc).__name__}: {exc}"
            raise StreamInterrupted(model, shown_chars=self.chars, reason=reason) from exc


def limiter_of(model: Model) -> AdaptiveLimiter | None:
    """The limiter that ``model``, or a model it wraps, passes its calls through."""
    current: object = model
    while current is not None:
        found = getattr(current, "limiter", None)
        if isinstance(found, AdaptiveLimiter):
            return found
        current = current.inner if isinstance(current, WrapperModel) else None
    return None


def _report_retry(state: RetryCallState) -> None:
    outcome = state.outcome
    exc = outcome.exception() if outcome is not None and outcome.failed else None
    wait = state.next_action.sleep if state.next_action is not None else 0.0
    if exc is not None and report_retry(status_of(exc), f"{type(exc).__name__}: {exc}", wait):
        return  # the caller's report emits it as an event (which is logged)
    if logs.configured():
        fields = {"attempt": state.attempt_number, "wait_s": wait, "error": repr(exc)}
        logs.log("model_call.retry", fields, level="warning")


def status_of(exc: BaseException) -> str:
    """What went wrong with an attempt, in a word: the HTTP status, or the kind."""
    if isinstance(exc, ModelHTTPError):
        return str(exc.status)
    if isinstance(exc, ModelTimeout):
        return "timeout"
    if isinstance(exc, ModelConnectionError):
        return "connection"
    if isinstance(exc, ModelError):
        return "response"
    return type(exc).__name__
