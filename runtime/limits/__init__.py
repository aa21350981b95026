"""Limits on what a run spends and how fast: budgets shared by a run's workers
(:mod:`~runtime.limits.budget`), adaptive rate limits and the quotas endpoints report,
and retries with backoff (the policy a value of its own, :mod:`~runtime.limits.retry_policy`).
The rate limiter and the retrying models (which import ``tenacity``) load on first use;
time limits are :class:`~runtime.concurrency.within`."""

from typing import TYPE_CHECKING

from runtime.lazy import lazy_attributes
from runtime.limits.budget import Budget, CallInFlight, InFlight, LimitedModel, Limits, limited

if TYPE_CHECKING:
    from runtime.limits.quota import QuotaLeft
    from runtime.limits.ratelimit import AdaptiveLimiter, RateLimitedModel
    from runtime.limits.retry import RetryingModel
    from runtime.limits.retry_policy import RetryPolicy

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
    "limited",
]

_LAZY = {
    "AdaptiveLimiter": "runtime.limits.ratelimit",
    "QuotaLeft": "runtime.limits.quota",
    "RateLimitedModel": "runtime.limits.ratelimit",
    "RetryPolicy": "runtime.limits.retry_policy",
    "RetryingModel": "runtime.limits.retry",
}

__getattr__ = lazy_attributes("runtime.limits", _LAZY, globals())
