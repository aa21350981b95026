"""The budget layer alone, around a fake model."""

from __future__ import annotations

import asyncio

import pytest

from runtime.errors import BudgetExceeded
from runtime.limits import Budget, Limits
from runtime.messages import AssistantMessage, Usage, UserMessage
from runtime.model import Model, ModelRequest, ModelResponse, call_model
from runtime.models.layers import Budgeted, ModelCalls
from runtime.testing import FunctionModel, ScriptedModel

ASK = ModelRequest(messages=(UserMessage(content="hi"),), turn=3)


def budgeted(model: Model, budget: Budget) -> ModelCalls:
    return ModelCalls(model, (Budgeted(),), budget=budget, who="w1")


def spending(request: ModelRequest) -> ModelResponse:
    usage = Usage(input_tokens=10, output_tokens=5, cost=0.25)
    return ModelResponse(message=AssistantMessage(content="ok"), usage=usage)


async def test_a_call_is_reserved_before_it_is_made_and_charged_once_it_answers() -> None:
    budget = Budget()
    await budgeted(FunctionModel(spending), budget).complete(ASK)
    assert budget.usage == Usage(input_tokens=10, output_tokens=5, model_calls=1, cost=0.25)


async def test_a_call_the_budget_refuses_is_never_made() -> None:
    inner = ScriptedModel(["never"])
    budget = Budget(Limits(model_calls=1))
    layer = budgeted(inner, budget)
    budget.reserve_model_call()  # the one call allowed, spent elsewhere
    with pytest.raises(BudgetExceeded):
        await layer.complete(ASK)
    assert inner.requests == []


async def test_a_call_is_in_flight_while_it_runs_with_what_it_streamed() -> None:
    budget = Budget()
    seen: list[str] = []
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(request: ModelRequest) -> ModelResponse:
        started.set()
        await release.wait()
        return spending(request)

    call = asyncio.ensure_future(
        call_model(budgeted(FunctionModel(slow), budget), ASK, seen.append)
    )
    await started.wait()
    (flight,) = budget.in_flight()
    assert (flight.who, flight.kind, flight.turn) == ("w1", "turn", 3)
    release.set()
    await call
    assert budget.in_flight() == ()
