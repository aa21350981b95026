"""The layers a model call goes through that a worker adds, each in a module of its
own: a cap on what one call may cost (:mod:`.cost_cap`), the run's budget
(:mod:`.budget`), tracing (:mod:`.trace`) and the check of what the model answered
(:mod:`.checked`). Each is a :class:`~.base.ModelLayer`: its parts before and after a
call, run around the call's one await (:mod:`.base`), so that no layer holds a frame
while the model works. The model's own layers are made with it, as models holding
the next: a cassette that records its calls or replays them (:mod:`.cassette`,
outside the rest of them, loaded on first use), its slots
(:class:`~runtime.limits.LimitedModel`), rate limits
(:class:`~runtime.limits.ratelimit.RateLimitedModel`), retries
(:class:`~runtime.limits.retry.RetryingModel`) and price
(:class:`~runtime.models.pricing.PricedModel`); the OpenAI adapters retry and pace
inside. They are composed, in their order, in one place:
:func:`workers.calls.model_calls`."""

from runtime.models.layers.base import CallSite, ModelCall, ModelCalls, ModelLayer
from runtime.models.layers.budget import Budgeted, failed_usage
from runtime.models.layers.checked import Checked
from runtime.models.layers.cost_cap import CostCap, check_priced, price_of
from runtime.models.layers.trace import Traced

__all__ = [
    "Budgeted",
    "CallSite",
    "Checked",
    "CostCap",
    "ModelCall",
    "ModelCalls",
    "ModelLayer",
    "Traced",
    "check_priced",
    "failed_usage",
    "price_of",
]
