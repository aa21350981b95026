"""Retrying model calls: one policy, built on tenacity, used by every model adapter.

Only errors that say so are retried (``ModelError.retryable``: HTTP 408, 409, 429,
5xx, connection errors, timeouts, a 200 whose body is not JSON). Waits grow
exponentially with jitter, except that a ``Retry-After`` the endpoint sent is
honoured, and a retry through a rate limiter waits at least its cool-down (the
limiter would hold it that long anyway: the wait reported is the wait made). The
policy stops after a number of attempts or before a total deadline would be passed,
whichever comes first; a ``Retry-After`` that would end past the deadline gives up
at once with :class:`~runtime.errors.RetryAfterPastDeadline`, and so does a retry
that its limiter would hold past it (a cool-down for another call's ``Retry-After``,
a paced start), whether that is known when the retry's wait is chosen or comes while
it waits (:func:`deadline_of` tells the limiter the deadline).

An adapter that holds a limiter itself (chat, embeddings) retries a call one way,
:func:`endpoint_call`: each attempt through a slot of the limiter, held to the
deadline there. A model that wraps a rate-limited one retries it with
:class:`RetryingModel`.

Each retry is reported to the model call's caller, if it asked
(:func:`runtime.events.report_retry`), else logged.

A streamed call is retried only before any of its text was shown: an attempt that
fails after is a :class:`~runtime.errors.StreamInterrupted`, which is never retried
(whoever listened would see the text again).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

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
from runtime.limits.budget import retried
from runtime.limits.ratelimit import AdaptiveLimiter, RetryDeadline, retry_deadline
from runtime.limits.retry_policy import RetryPolicy, wall_time_ends
from runtime.limits.worktime import time_left
from runtime.model import Model, ModelRequest, ModelResponse, TextSink, WrapperModel, call_model
from runtime.secrets import HeldText

__all__ = [
    "RetryingModel",
    "ShownText",
    "before_retry",
    "deadline_of",
    "endpoint_call",
    "limiter_of",
    "retrying",
    "wait_at_least",
    "wait_retry_after",
]

T = TypeVar("T")

before_retry: ContextVar[Callable[[], Awaitable[None]] | None] = ContextVar(
    "honeycomb_before_retry", default=None
)
"""What a model call's retry awaits before it is told to the call (:func:`deadline_of`:
its budget may refuse it), when the current task sets it (None: nothing): a worker in a
Ray actor asks its driver what the run has spent now, so that its budget checks the
retry against every worker's spending, as in one process."""


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


class _CallRetrying(tenacity.AsyncRetrying):
    """tenacity's controller of one call, which remembers its deadline and what the
    call's last attempt failed with (:func:`deadline_of` records it): the error a retry
    gives up with when its limiter would hold it past the deadline."""

    failed: BaseException | None = None
    deadline_s: float = math.inf  # seconds from the call's start
    deadline: str = "the retry deadline"  # what sets it, in words


def _deadline(policy: RetryPolicy) -> tuple[float, str]:
    """The seconds a call's retries may take from now, and what sets them: the policy's
    deadline, or the run's wall time when that ends sooner (:data:`wall_time_ends`), or
    the time limit of the work the call is part of (its worker's, the tool call's that
    runs it: :func:`~runtime.limits.worktime.time_left`)."""
    ends = wall_time_ends.get()
    left = ends - time.monotonic() if ends is not None else math.inf
    deadline = (policy.deadline_s, "the retry deadline")
    if left < deadline[0]:
        deadline = (max(left, 0.0), "the run's wall time")
    own = time_left()
    if own is not None and own[0] < deadline[0]:
        deadline = (max(own[0], 0.0), own[1])
    return deadline


def _deadline_of_call(policy: RetryPolicy, state: RetryCallState) -> tuple[float, str]:
    """The deadline of the call ``state`` is of (seconds from its start), and what sets
    it, in words."""
    call = state.retry_object
    if isinstance(call, _CallRetrying):
        return call.deadline_s, call.deadline
    return policy.deadline_s, "the retry deadline"


def retrying(policy: RetryPolicy, limiter: AdaptiveLimiter | None = None) -> tenacity.AsyncRetrying:
    """A tenacity controller carrying out ``policy`` (one per call: it holds state),
    within the run's wall time.

    Args:
        policy: When and how long to retry.
        limiter: The limiter each attempt passes through: a retry waits at least
            its cool-down (which would hold it anyway), and reports that wait.
    """
    deadline_s, deadline = _deadline(policy)
    backoff = tenacity.wait_exponential(
        multiplier=policy.initial_wait_s, max=policy.max_wait_s
    ) + tenacity.wait_random(0, policy.jitter_s)
    # Capped at the deadline, not max_wait_s: stop_before_delay then stops at once.
    wait: wait_base = wait_retry_after(backoff, max_wait_s=deadline_s)
    if limiter is not None:
        wait = wait_at_least(wait, lambda: limiter.cooldown_left_s)

    def retries(exc: BaseException) -> bool:
        """Whether to retry after ``exc``: never once a stream has shown text."""
        return not isinstance(exc, StreamInterrupted) and policy.retry_on(exc)

    asked = before_retry.get()
    call = _CallRetrying(
        stop=tenacity.stop_after_attempt(policy.attempts) | tenacity.stop_before_delay(deadline_s),
        wait=wait,
        retry=tenacity.retry_if_exception(retries),
        sleep=asyncio.sleep,
        reraise=True,
        before=_asking(asked) if asked is not None else tenacity.before_nothing,
        before_sleep=_report_retry,
        retry_error_callback=lambda state: _give_up(policy, limiter, state),
    )
    call.deadline_s, call.deadline = deadline_s, deadline
    return call


def _asking(asked: Callable[[], Awaitable[None]]) -> Callable[[RetryCallState], Awaitable[None]]:
    """A call's ``before`` that awaits ``asked()`` before each retry (:data:`before_retry`)."""

    async def before(state: RetryCallState) -> None:
        if state.attempt_number > 1:
            await asked()

    return before


@contextlib.contextmanager
def deadline_of(policy: RetryPolicy, attempt: tenacity.AttemptManager) -> Iterator[None]:
    """The block is ``attempt`` of a call retried under ``policy``: a rate limiter it
    passes through holds it no longer than the call's deadline (the policy's, or the
    run's wall time when that ends sooner: :func:`retrying`) (a wait that would
    end past it gives the retry up: :class:`RetryAfterPastDeadline`, or the error the
    retry follows when that was no HTTP answer). A retry is not sent once the model
    call's budget is spent (:func:`~runtime.limits.budget.retried`).

    Raises:
        BudgetExceeded: as a retry starts, once the call's budget is spent.
    """
    state = attempt.retry_state
    if state.attempt_number > 1:
        retried()  # the model call's budget, once spent, sends no more
    call = state.retry_object
    last = call.failed if isinstance(call, _CallRetrying) else None
    deadline_s, words = _deadline_of_call(policy, state)
    at = state.start_time + deadline_s  # tenacity's clock: time.monotonic()
    deadline = RetryDeadline(at=at, attempts=state.attempt_number - 1, last=last, deadline=words)
    token = retry_deadline.set(deadline)
    try:
        yield
    except BaseException as exc:
        if isinstance(call, _CallRetrying):
            call.failed = exc
        raise
    finally:
        retry_deadline.reset(token)


async def endpoint_call(
    policy: RetryPolicy,
    limiter: AdaptiveLimiter | None,
    once: Callable[[], Awaitable[T]],
    *,
    shown: ShownText | None = None,
    model: str = "",
) -> T:
    """One call to an endpoint, ``await once()`` an attempt, retried under ``policy``,
    each attempt through a slot of ``limiter`` and held to the policy's deadline there:
    how every adapter that holds its limiter itself retries a call, so that all of
    them retry alike.

    Args:
        policy: When and how long to retry.
        limiter: The limiter every attempt passes through (None: none).
        once: Makes one attempt.
        shown: A streamed call's text shown so far: an attempt that fails after some
            was shown raises :class:`StreamInterrupted`, which is not retried.
        model: The model a :class:`StreamInterrupted` names.

    Raises:
        RetryAfterPastDeadline: when a wait past the deadline is why retrying stopped.
        ModelError: the last attempt's error, once retrying stopped.
    """
    async for attempt in retrying(policy, limiter):
        guard = shown.guard(model) if shown is not None else contextlib.nullcontext()
        with attempt, guard, deadline_of(policy, attempt):
            if limiter is None:
                return await once()
            async with limiter.attempt():
                return await once()
    raise AssertionError("unreachable: tenacity re-raises the last error")  # pragma: no cover


def _give_up(policy: RetryPolicy, limiter: AdaptiveLimiter | None, state: RetryCallState) -> Any:
    """Raise the last error, saying so when a wait past the deadline (not the number
    of attempts) is why no retry follows: the error's own Retry-After, or the
    limiter's cool-down left (the wait the retry would have made)."""
    outcome = state.outcome
    assert outcome is not None  # tenacity stops only after an attempt
    exc = outcome.exception()
    deadline_s, deadline = _deadline_of_call(policy, state)
    if exc is not None and state.attempt_number < policy.attempts:
        left = max(deadline_s - (state.seconds_since_start or 0.0), 0.0)
        attempts = state.attempt_number
        asked = exc.retry_after if isinstance(exc, ModelHTTPError) else None
        if isinstance(exc, ModelHTTPError) and asked is not None and asked >= left:
            raise RetryAfterPastDeadline(
                exc, deadline_left_s=left, attempts=attempts, deadline=deadline
            ) from exc
        cooled_by = limiter.cooled_by if limiter is not None else None
        if limiter is not None and cooled_by is not None and limiter.cooldown_left_s >= left:
            raise RetryAfterPastDeadline(
                cooled_by,
                deadline_left_s=left,
                attempts=attempts,
                wait_s=limiter.cooldown_left_s,
                asked_by=limiter.cooldown_asked_by,
                deadline=deadline,
            ) from exc
    return outcome.result()  # raises the last error


class RetryingModel(WrapperModel):
    """A model that retries another model's failed calls under a :class:`RetryPolicy`."""

    tells_attempts = True  # its retries (runtime.model.tells_attempts)

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
