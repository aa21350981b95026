"""When and how long to retry a failed model call: the policy as a value, which a
hive's ``retry:`` validates into (:mod:`runtime.limits.retry` carries it out)."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Annotated

from msgspec import Meta

from runtime.errors import ModelError
from runtime.value import Settings

__all__ = ["RetryPolicy", "is_retryable", "wall_time_ends"]

wall_time_ends: ContextVar[float | None] = ContextVar("honeycomb_wall_time_ends", default=None)
"""When the run a model call is made in must end (``time.monotonic()``): its wall-time
budget's deadline, set by the run for its workers and the sub-runs they start (None:
it has none). A call's retries end there, if that comes before their own deadline: a
retry that could not start in time is not waited for."""


def is_retryable(exc: BaseException) -> bool:
    """True for model errors that may succeed when tried again."""
    return isinstance(exc, ModelError) and exc.retryable


class RetryPolicy(Settings, frozen=True, kw_only=True):
    """When and how long to retry a failed model call (``retry:`` of a hive's model).

    Attributes:
        attempts: Total attempts, the first included (1 disables retries; at most 20).
        deadline_s: No retry starts if its wait would end past this many seconds
            after the first attempt began.
        initial_wait_s: First backoff wait, doubled each retry.
        max_wait_s: Longest backoff wait. A Retry-After is honoured in full, never
            cut short (retrying before the endpoint allows only earns another 429);
            one that would end past ``deadline_s`` stops retrying instead.
        jitter_s: Up to this much random time is added to each backoff wait.
        retry_on: Which exceptions to retry; default :func:`is_retryable`.
    """

    attempts: Annotated[int, Meta(ge=1, le=20)] = 4
    deadline_s: Annotated[float, Meta(gt=0)] = 90.0
    initial_wait_s: Annotated[float, Meta(ge=0)] = 0.5
    max_wait_s: Annotated[float, Meta(gt=0)] = 30.0
    jitter_s: Annotated[float, Meta(ge=0)] = 0.5
    retry_on: Callable[[BaseException], bool] = is_retryable
