"""Limits on what a run spends and how fast: budgets shared by a run's workers
(:mod:`~runtime.limits.budget`), deadlines for many calls at once, adaptive rate
limits and the quotas endpoints report, and retries with backoff. The rate limiter
and the retry policy (which imports ``tenacity``) load on first use."""

from typing import TYPE_CHECKING

from runtime.lazy import lazy_attributes
from runtime.limits.budget import Budget, CallInFlight, InFlight, LimitedModel, Limits, limited
from runtime.limits.deadlines import TimedOut, within

if TYPE_CHECKING:
    from runtime.limits.quota import QuotaLeft
    from runtime.limits.ratelimit import AdaptiveLimiter, RateLimitedModel
    from runtime.limits.retry import RetryingModel, RetryPolicy

__all__ = [
    "AdaptiveLimiter",
    "Budget",
    "CallInFlight",
    "InFlight",
    "LimitedModel",
    "Limits",
    "QuotaLeft",
    "RateLimitedModel",
    "RetryPolicy",
    "RetryingModel",
    "TimedOut",
    "limited",
    "within",
]

_LAZY = {
    "AdaptiveLimiter": "runtime.limits.ratelimit",
    "QuotaLeft": "runtime.limits.quota",
    "RateLimitedModel": "runtime.limits.ratelimit",
    "RetryPolicy": "runtime.limits.retry",
    "RetryingModel": "runtime.limits.retry",
}

__getattr__ = lazy_attributes("runtime.limits", _LAZY, globals())
