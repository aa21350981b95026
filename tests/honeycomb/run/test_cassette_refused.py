"""A model call whose retry the run's budget refused, recorded on a cassette, is
refused alike when replayed: the run stops over its budget as it did, having asked no
model, not on a call the cassette did not record."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb import Budgets, Executor, Policy, Role
from honeycomb.errors import BudgetExceeded
from honeycomb.models import Cassette, Model, cassette
from runtime import ModelRequest, ModelResponse
from runtime.errors import ModelTimeout
from runtime.limits.budget import timed_out
from runtime.limits.retry import RetryingModel
from runtime.limits.retry_policy import RetryPolicy

pytestmark = pytest.mark.timeout(60)


class NeverInTime:
    """An endpoint that answers no attempt in time (the prompt of each is billed)."""

    tells_attempts = True

    def __init__(self) -> None:
        self.attempts = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.attempts += 1
        timed_out()
        raise ModelTimeout(30.0, model="slow")


async def stopped(models: Model) -> BudgetExceeded:
    # A budget of tokens that the first attempt's billed prompt spends: its retry is
    # refused.
    policy = Policy(budgets=Budgets(total_tokens=5))
    executor = Executor([Role(name="writer")], models, aggregator="concat", policy=policy)
    with pytest.raises(BudgetExceeded) as caught:
        await executor.run("trip", subtasks=[("writer", "Lisbon")])
    return caught.value


async def test_a_retry_the_budget_refused_when_recorded_is_refused_alike_replayed(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "refused.jsonl"
    endpoint = NeverInTime()
    quick = RetryPolicy(initial_wait_s=0, jitter_s=0)
    recorded = await stopped(cassette(RetryingModel(endpoint, quick), record=tape))
    assert endpoint.attempts == 1  # its retry was never sent
    assert recorded.limit == "total_tokens"
    (kept,) = Cassette(tape).calls
    assert kept.timeouts == 1
    assert kept.error is not None
    assert kept.error.type == "BudgetExceeded"

    replayed = await stopped(cassette(RetryingModel(endpoint, quick), replay=tape))
    assert endpoint.attempts == 1  # nothing asked
    assert (replayed.limit, replayed.allowed, replayed.used) == (
        recorded.limit,
        recorded.allowed,
        recorded.used,
    )
    assert replayed.partial is not None
    assert recorded.partial is not None
    assert replayed.partial.usage == recorded.partial.usage
