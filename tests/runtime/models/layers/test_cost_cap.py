"""The cost-cap layer alone, around a fake model."""

from __future__ import annotations

import msgspec
import pytest
from anyio import CapacityLimiter

from runtime.errors import BudgetExceeded
from runtime.limits import LimitedModel
from runtime.messages import UserMessage
from runtime.model import Model, ModelRequest, ToolSchema
from runtime.models.layers import CostCap, ModelCalls, price_of
from runtime.models.layers.cost_cap import prompt_tokens, sent_tokens
from runtime.models.pricing import Price, PricedModel
from runtime.models.protocols import TextToolModel
from runtime.testing import ScriptedModel

# A tenth of a cent a prompt token, two tenths an answer's.
PRICE = Price(input_per_mtok=1000.0, output_per_mtok=2000.0)


def capped(model: Model) -> ModelCalls:
    return ModelCalls(model, (CostCap(0.05, PRICE),))


def asking(words: int, limit: int | None = 4096) -> ModelRequest:
    return ModelRequest(messages=(UserMessage(content="word " * words),), max_output_tokens=limit)


async def test_a_calls_output_limit_is_what_its_prompt_leaves_of_the_cap() -> None:
    inner = ScriptedModel(["ok"])
    request = asking(10)
    await capped(inner).complete(request)
    prompt = prompt_tokens(request) * 0.001
    (sent,) = inner.requests
    assert sent.max_output_tokens == int((0.05 - prompt) / 0.002)
    assert 0 < sent.max_output_tokens < 25


async def test_a_lower_limit_of_the_calls_own_stands() -> None:
    inner = ScriptedModel(["ok"])
    await capped(inner).complete(asking(10, limit=3))
    assert inner.requests[0].max_output_tokens == 3


async def test_a_call_whose_prompt_alone_costs_the_cap_is_never_made() -> None:
    inner = ScriptedModel(["never"])
    with pytest.raises(BudgetExceeded) as refused:
        await capped(inner).complete(asking(200))
    assert refused.value.limit == "cost_per_call"
    assert refused.value.allowed == 0.05
    assert refused.value.used > 0.05
    assert inner.requests == []


def test_the_price_is_found_through_the_models_layers() -> None:
    scripted = ScriptedModel([])
    assert price_of(LimitedModel(PricedModel(scripted, PRICE), CapacityLimiter(1))) == PRICE
    assert price_of(scripted) is None


async def test_the_prompt_is_what_a_tool_protocols_model_sends() -> None:
    """Through the text protocol, the cap priced the request it was given, without
    the tools' catalogue and the rules its model writes into the prompt (more than
    twice its tokens): the output limit it left let the call cost past the cap."""
    weather = ToolSchema(
        name="get_weather",
        description="The weather in a city today.",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
    )
    inner = ScriptedModel(["ok"])
    protocol = TextToolModel(inner)
    request = msgspec.structs.replace(asking(3), tools=(weather,))
    await ModelCalls(PricedModel(protocol, PRICE), (CostCap(1.0, PRICE),)).complete(request)
    (sent,) = inner.requests
    prompt = prompt_tokens(protocol.written(request))
    assert prompt > 2 * prompt_tokens(request)
    assert sent.max_output_tokens == int((1.0 - prompt * 0.001) / 0.002)
    assert sent_tokens(protocol, request) == prompt
