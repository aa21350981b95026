"""Prompt caching as servers report it: cached input tokens read from the usage of a
completion (OpenAI's and DeepSeek's forms), priced at their own rate, added up."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
import pytest

from runtime import (
    AssistantMessage,
    Budget,
    ConfigError,
    ModelRequest,
    ModelResponse,
    ModelResponseError,
    OpenAIModel,
    Price,
    PricedModel,
    RetryPolicy,
    Usage,
    UserMessage,
    validate_value,
)
from runtime.testing import FunctionModel
from tests.support.openai_server import OpenAIServer, Raw, Reply

MakeModel = Callable[..., OpenAIModel]
HELLO = ModelRequest(messages=(UserMessage(content="hi"),))


@pytest.fixture
async def make_model(openai_server: OpenAIServer) -> AsyncIterator[MakeModel]:
    made: list[OpenAIModel] = []

    def make(**kwargs: Any) -> OpenAIModel:
        made.append(
            OpenAIModel(
                "gpt-test", base_url=openai_server.base_url, retry=RetryPolicy(attempts=1), **kwargs
            )
        )
        return made[-1]

    yield make
    for model in made:
        await model.client.close()


async def test_openai_cached_tokens_are_read_from_the_prompt_tokens_details(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(
        Reply(content="ok", prompt_tokens=2000, cached_tokens=1536, reasoning_tokens=3)
    )
    usage = (await make_model().complete(HELLO)).usage
    assert usage.input_tokens == 2000
    assert usage.cached_input_tokens == 1536  # of the input tokens, not beside them
    assert usage.reasoning_tokens == 3


async def test_deepseeks_cache_hit_tokens_are_cached_input_tokens(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(Reply(content="ok", prompt_tokens=900, cache_hit_tokens=640))
    usage = (await make_model().complete(HELLO)).usage
    assert (usage.input_tokens, usage.cached_input_tokens) == (900, 640)


async def test_a_server_that_says_nothing_of_its_cache_has_none(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(Reply(content="ok", prompt_tokens=50))
    assert (await make_model().complete(HELLO)).usage.cached_input_tokens == 0


async def test_more_cached_than_input_tokens_counts_no_more_than_the_input(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(Reply(content="ok", prompt_tokens=10, cached_tokens=64))
    assert (await make_model().complete(HELLO)).usage.cached_input_tokens == 10


async def test_cached_tokens_of_the_wrong_type_are_a_malformed_completion(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    body = {
        "choices": [{"message": {"role": "assistant", "content": "ok"}}],
        "usage": {"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": "many"}},
    }
    openai_server.enqueue(Raw(200, body=body))
    with pytest.raises(ModelResponseError, match=r"usage.prompt_tokens_details.cached_tokens"):
        await make_model().complete(HELLO)


async def test_cached_input_tokens_are_priced_at_their_own_rate() -> None:
    price = Price(input_per_mtok=2.0, output_per_mtok=8.0, cached_input_per_mtok=0.5)
    assert price.of(1_000_000, 0, cached_input_tokens=600_000) == pytest.approx(0.8 + 0.3)
    cached = Usage(input_tokens=1000, output_tokens=100, cached_input_tokens=800)

    def answer(request: ModelRequest) -> ModelResponse:
        return ModelResponse(message=AssistantMessage(content="ok"), usage=cached)

    model = PricedModel(FunctionModel(answer), price)
    usage = (await model.complete(HELLO)).usage
    assert usage.cost == pytest.approx((200 * 2.0 + 800 * 0.5 + 100 * 8.0) / 1e6)


def test_without_a_cached_price_cached_tokens_cost_the_input_price() -> None:
    price = Price(input_per_mtok=2.0, output_per_mtok=8.0)
    assert price.of(1000, 10, cached_input_tokens=900) == price.of(1000, 10)
    told = r"Price.cached_input_per_mtok: must be 0 or more \(got -1\.0\)"
    with pytest.raises(ConfigError, match=told):
        Price(input_per_mtok=1.0, output_per_mtok=1.0, cached_input_per_mtok=-1.0)


def test_cached_input_tokens_add_up_and_are_counted_by_the_budget() -> None:
    total = Usage(input_tokens=10, cached_input_tokens=4) + Usage(
        input_tokens=5, cached_input_tokens=5
    )
    assert total == Usage(input_tokens=15, cached_input_tokens=9)
    assert total.cached_share == pytest.approx(0.6)
    assert Usage().cached_share == 0.0
    budget = Budget()
    budget.charge(total)
    assert budget.usage.cached_input_tokens == 9
    # Usage stored before the field existed still reads.
    assert validate_value(Usage, '{"input_tokens": 3}').cached_input_tokens == 0
    assert msgspec.json.decode(msgspec.json.encode(total), type=Usage) == total
